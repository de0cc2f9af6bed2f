"""`show`, `list`, help on every command, shell completion, and one-line errors."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.core import TyperArgument, TyperGroup, TyperOption
from typer.testing import CliRunner

from rune_council.cli import app

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / ".rune-example" / "council"
FINISHED = EXAMPLES / "run-orders-shard-critique.json"
SKELETON = EXAMPLES / "run-orders-shard-critique.skeleton.json"
RUNE = Path(sys.executable).with_name("rune")


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["council", *args])


def rune_dir_with(tmp: Path, *docs: dict[str, Any]) -> Path:
    council = tmp / ".rune" / "council"
    council.mkdir(parents=True)
    for doc in docs:
        (council / f"run-{doc['id']}.json").write_text(json.dumps(doc))
    return tmp / ".rune"


def example(path: Path, **changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text())
    doc.update(changes)
    return doc


def dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


# --------------------------------------------------------------------------- show


def test_show_renders_the_output_format_from_a_run_file() -> None:
    result = invoke("show", str(FINISHED))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "## Council Result: orders-shard-critique"
    assert lines[1] == "- **Decorrelation**: MULTI_FAMILY (anthropic, google, openai)"
    for heading in ("### Consensus (verified, cross-family)", "### Dissent", "### Needs Decision"):
        assert heading in lines
    doc = json.loads(FINISHED.read_text())
    assert doc["agreement"]["consensus_claims"][0]["claim"] in result.output


def test_show_by_id_looks_in_the_rune_dir(tmp_path: Path) -> None:
    rune = rune_dir_with(tmp_path, example(FINISHED, id="mine"))
    result = invoke("show", "mine", "--rune-dir", str(rune))
    assert result.exit_code == 0
    assert result.output.startswith("## Council Result: mine\n")
    as_json = invoke("show", "mine", "--rune-dir", str(rune), "--json")
    assert json.loads(as_json.output)["id"] == "mine"


def test_show_of_a_run_in_progress_says_so(tmp_path: Path) -> None:
    live = example(SKELETON, id="live")
    live["orchestrator"].update(pid=os.getpid(), host=socket.gethostname())
    now = dt.datetime.now(dt.UTC).isoformat()
    live["orchestrator"].update(started_at=now, heartbeat_at=now)
    rune = rune_dir_with(tmp_path, live)
    result = invoke("show", "live", "--rune-dir", str(rune))
    assert result.exit_code == 0
    assert "- **Decorrelation**: (none: run running)" in result.output
    assert "- **Status**: running" in result.output


def test_show_and_list_agree_that_a_run_whose_writer_died_is_abandoned(tmp_path: Path) -> None:
    orphan = example(SKELETON, id="orphan")
    orphan["orchestrator"].update(pid=dead_pid(), host=socket.gethostname())
    rune = rune_dir_with(tmp_path, orphan)
    listed = invoke("list", "--rune-dir", str(rune)).output.splitlines()[1].split()
    shown = invoke("show", "orphan", "--rune-dir", str(rune)).output
    assert listed[1] == "abandoned"
    # Before: show printed "Status: running" for a run list called abandoned.
    assert "- **Status**: running" not in shown
    assert "- **Status**: abandoned (process" in shown


@pytest.mark.parametrize(
    ("ref", "fragment"),
    [
        ("missing-run", "no run file at"),
        ("../../etc/passwd", "no run file at"),  # a path, taken as one: it is not there
        ("..", "not a safe file name"),
    ],
)
def test_show_errors_are_one_line(tmp_path: Path, ref: str, fragment: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "rune_council.cli", "council", "show", ref],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    [line] = out.stderr.strip().splitlines()
    assert line.startswith("rune council: ") and fragment in line


# --------------------------------------------------------------------------- list


def test_list_shows_recent_runs_newest_first_with_their_state(tmp_path: Path) -> None:
    older = example(FINISHED, id="older", started_at="2026-01-01T10:00:00.000+00:00")
    older["finished_at"] = "2026-01-01T10:01:05.500+00:00"
    newer = example(FINISHED, id="newer", started_at="2026-02-01T10:00:00.000+00:00")
    newer["finished_at"] = "2026-02-01T10:00:02.000+00:00"
    orphan = example(SKELETON, id="orphan", started_at="2026-01-15T10:00:00.000+00:00")
    orphan["orchestrator"].update(pid=dead_pid(), host=socket.gethostname())
    rune = rune_dir_with(tmp_path, older, newer, orphan)
    (rune / "council" / "run-broken.json").write_text("{not json")

    result = invoke("list", "--rune-dir", str(rune))
    assert result.exit_code == 0, result.output
    header, *rows = result.output.splitlines()
    assert header.split()[:5] == ["id", "status", "decorrelation", "voices", "duration"]
    by_id = {row.split()[0]: row.split() for row in rows}
    # Newest first by start time; a file that is not a readable run comes last.
    assert [r.split()[0] for r in rows] == ["newer", "orphan", "older", "broken"]
    assert by_id["newer"][1:5] == ["complete", "MULTI_FAMILY", "3/3", "2.0s"]
    assert by_id["older"][4] == "1m05s"
    assert by_id["orphan"][1:3] == ["abandoned", "-"]
    assert by_id["broken"][1] == "unreadable"
    newest = next(r for r in rows if r.startswith("newer"))
    assert "  Is the orders sharding plan in plan.md safe to execute" in newest
    assert newest.endswith("…")  # a long question is cut, visibly

    limited = json.loads(invoke("list", "--rune-dir", str(rune), "--limit", "1", "--json").output)
    assert [r["id"] for r in limited] == ["newer"]
    assert limited[0]["duration_s"] == 2.0 and limited[0]["voices_valid"] == 3


def test_list_with_no_runs_says_where_it_looked(tmp_path: Path) -> None:
    result = invoke("list", "--rune-dir", str(tmp_path))
    assert result.exit_code == 0
    assert result.output.strip() == f"no runs in {tmp_path / 'council'}"


# --------------------------------------------------------------------------- help, completion


def _commands() -> list[tuple[str, Any]]:
    root = typer.main.get_command(app)
    assert isinstance(root, TyperGroup)
    found: list[tuple[str, Any]] = []
    for name, command in root.commands.items():
        found.append((name, command))
        if isinstance(command, TyperGroup):
            found += [(f"{name} {sub}", c) for sub, c in command.commands.items()]
    return found


def test_every_command_and_option_has_help() -> None:
    names = [name for name, _ in _commands()]
    for expected in ("council run", "council demo", "council watch", "council verify"):
        assert expected in names
    for name, command in _commands():
        assert (command.help or "").strip(), f"{name} has no help"
        for param in command.params:
            if isinstance(param, TyperOption) and param.name != "help":
                assert (param.help or "").strip(), f"{name} {param.opts} has no help"
            if isinstance(param, TyperArgument):
                assert getattr(param, "help", None), f"{name} {param.name} has no help"
        shown = CliRunner().invoke(app, [*name.split(), "--help"])
        assert shown.exit_code == 0 and "Usage:" in shown.output, name


@pytest.mark.skipif(not RUNE.exists(), reason="the rune console script is not installed")
def test_shell_completion_installs_and_completes(tmp_path: Path) -> None:
    env = {"PATH": f"{RUNE.parent}:/usr/bin:/bin", "HOME": str(tmp_path), "SHELL": "/bin/bash"}
    out = subprocess.run(
        [str(RUNE), "--install-completion", "bash"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    script = tmp_path / ".bash_completions" / "rune.sh"
    assert "_RUNE_COMPLETE=complete_bash" in script.read_text()
    assert str(script) in (tmp_path / ".bashrc").read_text()

    rune_dir_with(tmp_path, example(FINISHED, id="shard-a"), example(FINISHED, id="other"))

    def complete(words: str) -> list[str]:
        done = subprocess.run(
            [str(RUNE)],
            env={
                **env,
                "_RUNE_COMPLETE": "complete_bash",
                "COMP_WORDS": words,
                "COMP_CWORD": str(len(words.split()) - 1),
            },
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return done.stdout.split()

    assert complete("rune council ver") == ["verify"]
    assert complete("rune council show sh") == ["shard-a"]
    if shutil.which("bash"):
        # The installed script really defines the completion function bash will call.
        check = subprocess.run(
            ["bash", "-c", f"source {script} && complete -p rune"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert "_rune_completion" in check.stdout


def test_an_unusable_rune_dir_is_one_clear_line(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    out = subprocess.run(
        [sys.executable, "-m", "rune_council.cli", "council", "demo", "--pace", "0", "--json"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "RUNE_COUNCIL_DIR": str(blocker)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    [line] = out.stderr.strip().splitlines()
    assert line.startswith("rune council: cannot create ") and "Not a directory" in line
    assert blocker.read_text() == "x"


# --------------------------------------------------------------------------- the agent skill


def test_the_skill_has_front_matter_and_names_only_real_commands_and_options() -> None:
    text = (ROOT / "skill" / "SKILL.md").read_text(encoding="utf-8")
    assert text.startswith("---\n")
    front, _, body = text[4:].partition("\n---\n")
    assert re.search(r"^name: rune-council$", front, re.MULTILINE)
    assert re.search(r"^description: \S", front, re.MULTILINE)
    assert "NO_DECORRELATION" in front and "MULTI_FAMILY" in front

    root = typer.main.get_command(app)
    assert isinstance(root, TyperGroup)
    council = root.commands["council"]
    assert isinstance(council, TyperGroup)
    for sub in set(re.findall(r"rune council (\w+) ", body)) - {"run"}:
        if sub in council.commands:
            continue
        # Otherwise it must be the first word of a question (`rune council "..."`).
        raise AssertionError(f"SKILL.md mentions `rune council {sub}`, which does not exist")
    run_options = {opt for p in council.commands["run"].params for opt in getattr(p, "opts", [])}
    for option in ("--mode", "--artifact", "--json", "--yes", "--n", "--subagent-cmd", "--id"):
        assert option in body and option in run_options, option
