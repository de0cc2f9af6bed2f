"""`/rune council --template security-review --rounds 2 "<q>"` in a host reaches the one intake.

The installed command tells the host's model to pass everything after `council` to the MCP
tool as `arguments`, never `--yes`; the shell fallback passes the same words, each quoted.
Both are run here as the host would run them: the tool through the SDK's client against a
real `rune council mcp`, the shell recipe through bash, with fake AI CLIs answering. The
words carry `$(...)` and backticks; they must arrive as text and nothing in them may run.
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer

from rune_council.mcp_server.tools import host_flags
from tests.fakes.bin import install_fake, path_with
from tests.helpers import PLAN, ROLLBACK, SHARDS, UNDO, answer
from tests.mcp_client import connect, server_env, text_of

pytestmark = pytest.mark.timeout(180)

PY = sys.executable
COMMANDS = {
    "claude": ".claude/commands/rune.md",
    "gemini": ".gemini/commands/rune.toml",
    "codex": ".codex/skills/rune/SKILL.md",
}
HOSTILE = "Is $(touch PWNED) and `touch PWNED2` safe to run 'as written'? It's one weekend."


def install(home: Path, host: str) -> str:
    out = subprocess.run(
        [PY, "-m", "rune_council.cli", "council", "install", host],
        cwd=home,
        env={"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return (home / COMMANDS[host]).read_text(encoding="utf-8")


def project(tmp: Path) -> Path:
    work = tmp / "work"
    work.mkdir()
    (work / "plan.md").write_text(PLAN, encoding="utf-8")
    install_fake(work / "bin", "claude", answer=answer(HOSTILE, "NO", [ROLLBACK]))
    install_fake(work / "bin", "codex", answer=answer(HOSTILE, "NO", [UNDO]))
    install_fake(work / "bin", "gemini", answer=answer(HOSTILE, "YES", [SHARDS]))
    return work


def recorded(work: Path, run_id: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(
        (work / ".rune" / "council" / f"run-{run_id}.json").read_text(encoding="utf-8")
    )
    return doc


@pytest.mark.parametrize("host", sorted(COMMANDS))
def test_the_command_offers_the_options_the_intake_takes_from_a_host(
    tmp_path: Path, host: str
) -> None:
    text = install(tmp_path, host)
    if host == "gemini":
        text = text.replace('\\"', '"')
    listed = re.search(r"a host may pass:\n(.*?)\.\n", text, re.S)
    assert listed is not None, text[:400]
    offered = re.findall(r"`(--[a-z-]+)`", listed.group(1))
    assert offered == host_flags()
    # Every one is a flag of `rune council run`, so the shell fallback takes the same words.
    import rune_council.cli  # noqa: F401  (registers the commands)
    from rune_council.cli.app import council_app

    run_command = typer.main.get_command(council_app).commands["run"]  # type: ignore[attr-defined]
    cli_flags = {opt for param in run_command.params for opt in param.opts}
    assert set(offered) <= cli_flags
    # Only the operator grants consent or names a program; the command passes neither.
    assert not {"--yes", "--subagent-cmd", "--orchestrator-cmd", "--key-env"} & set(offered)
    flat = " ".join(text.split())
    assert "in its `arguments` argument, exactly as typed" in flat
    assert "Leave out `--yes` (and `-y`)" in flat


def test_the_arguments_reach_the_council_as_data_through_the_tool(tmp_path: Path) -> None:
    work = project(tmp_path)
    typed = (
        "--template security-review --rounds 2 --on-divergence continue --artifact plan.md "
        f'--id host-line --round-prompt-prefix "Again: $(touch PWNED3)" {shlex.quote(HOSTILE)}'
    )

    async def scenario() -> list[Any]:
        async with connect(work, "--yes", env=server_env(work)) as session:
            return [
                await session.call_tool("convene", {"arguments": typed}),
                # What a model must not do, refused as the flag it came as.
                await session.call_tool("convene", {"arguments": f"--yes {typed}"}),
                await session.call_tool("convene", {"arguments": "--rounds 11 'q'"}),
            ]

    ran, granted, bad = asyncio.run(scenario())
    assert not ran.is_error, text_of(ran)
    doc = recorded(work, "host-line")
    request = doc["request"]
    assert request["question"] == HOSTILE
    assert request["template"]["name"] == "security-review"
    rounds = request["deliberation"]["rounds"]
    assert (rounds["max_rounds"], rounds["on_divergence"]) == (2, "continue")
    assert rounds["round_prompt_prefix"] == "Again: $(touch PWNED3)"
    assert request["artifact"]["path"] == str((work / "plan.md").resolve())
    assert len(doc["deliberation"]["rounds"]) == 2
    assert granted.is_error and text_of(granted).startswith(
        "rune council: --yes: only the operator of this MCP server sets this"
    )
    assert text_of(bad).startswith("rune council: --rounds: Input should be less than")
    assert not list(tmp_path.rglob("PWNED*")), "a word of the arguments was run"


def test_the_shell_fallback_passes_the_same_words_quoted(tmp_path: Path) -> None:
    text = install(tmp_path, "claude")
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if "rune council - --json" in line)
    recipe = "\n".join(line.strip() for line in lines[start : start + 3])
    words = [
        "--template",
        "security-review",
        "--rounds",
        "2",
        "--artifact",
        "plan.md",
        "--round-prompt-prefix",
        "Again: $(touch PWNED3) `touch PWNED4`",
        "--id",
        "shell-line",
        "--yes",
    ]
    # As the command says: each word in single quotes (none of these holds one).
    options = " ".join(f"'{word}'" for word in words)
    script = recipe.replace("[options]", options).replace(
        "<the question, exactly as typed>", HOSTILE
    )
    work = project(tmp_path)
    out = subprocess.run(
        ["bash", "-c", script],
        cwd=work,
        env={
            "PATH": f"{Path(PY).parent}:{path_with(work / 'bin')}",
            "HOME": str(tmp_path),
            "LANG": "C.UTF-8",
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode in (0, 1), out.stderr
    request = recorded(work, "shell-line")["request"]
    assert request["question"] == HOSTILE
    assert request["template"]["name"] == "security-review"
    rounds = request["deliberation"]["rounds"]
    assert rounds["max_rounds"] == 2
    assert rounds["round_prompt_prefix"] == "Again: $(touch PWNED3) `touch PWNED4`"
    assert not list(tmp_path.rglob("PWNED*")), "a word of the arguments was run"
