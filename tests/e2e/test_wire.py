"""The real claude, codex and gemini CLIs against the loopback model server.

Each CLI is configured the way a user would configure it (see clis.py) and run
with exactly the flags the product uses, the prompt arriving on a stdin pipe.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.clis import (
    INSTALL_HINT,
    STUB_MODEL,
    cli_environment,
    node_bin_dir,
    real_clis_installed,
)
from tests.e2e.model_server import ANTHROPIC, GEMINI, OPENAI_RESPONSES, ModelServer

pytestmark = pytest.mark.e2e

CLI_TIMEOUT_S = 60

CLAUDE_ARGV = (
    "claude", "-p", "--bare", "--permission-mode", "plan", "--tools", "",
    "--no-session-persistence", "--output-format", "json",
)  # fmt: skip
CODEX_ARGV = (
    "codex", "exec", "--skip-git-repo-check", "--ephemeral", "--sandbox", "read-only", "--json",
    "-c", "analytics.enabled=false", "-c", "web_search=disabled",
    "--disable", "plugins", "--disable", "remote_plugin", "--disable", "apps",
    "--disable", "shell_tool", "--disable", "goals", "--disable", "multi_agent",
    "--disable", "unified_exec",
)  # fmt: skip
GEMINI_ARGV = ("gemini", "--approval-mode", "plan", "--skip-trust", "-o", "json")


def claude_answer(stdout: str) -> str:
    result = json.loads(stdout)
    assert result["is_error"] is False, result
    return str(result["result"])


def codex_answer(stdout: str) -> str:
    messages = []
    for line in stdout.splitlines():
        if not line.strip():
            continue
        event = json.loads(line)
        item = event.get("item") or {}
        if event.get("type") == "item.completed" and item.get("type") == "agent_message":
            messages.append(str(item["text"]))
    assert messages, f"no agent_message in codex output:\n{stdout}"
    return messages[-1]


def gemini_answer(stdout: str) -> str:
    return str(json.loads(stdout)["response"])


@dataclass(frozen=True)
class Cli:
    name: str
    protocol: str
    argv: tuple[str, ...]
    answer: Callable[[str], str]


CLIS = [
    Cli("claude", ANTHROPIC, CLAUDE_ARGV, claude_answer),
    Cli("codex", OPENAI_RESPONSES, CODEX_ARGV, codex_answer),
    Cli("gemini", GEMINI, GEMINI_ARGV, gemini_answer),
]


@pytest.fixture(params=CLIS, ids=lambda cli: cli.name)
def cli(request: pytest.FixtureRequest) -> Cli:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as running:
        yield running


@pytest.fixture
def env(tmp_path: Path, server: ModelServer) -> dict[str, str]:
    return cli_environment(tmp_path, server)


def run_cli(
    cli: Cli, prompt: str, env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    if not real_clis_installed():
        pytest.fail(f"real CLIs not found in {node_bin_dir()}: {INSTALL_HINT}", pytrace=False)
    executable = shutil.which(cli.argv[0], path=env["PATH"])
    assert executable, f"{cli.argv[0]} not on PATH: {INSTALL_HINT}"
    cwd.mkdir(exist_ok=True)
    started = time.monotonic()
    # input= feeds the prompt through a real pipe, as the product does.
    completed = subprocess.run(
        [executable, *cli.argv[1:]],
        input=prompt,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )
    print(f"{cli.name}: exit {completed.returncode} in {time.monotonic() - started:.2f}s")
    return completed


def shell_hostile_prompt(marker: str) -> str:
    return (
        f"Council question {marker}\n"
        "Should we \"quote\" it, 'single-quote' it, or leave $HOME and ${PATH} alone?\n"
        "Also: does `echo $(whoami)` run? Answer in one line; \\n is not a newline.\n"
    )


def describe(completed: subprocess.CompletedProcess[str]) -> str:
    return (
        f"exit {completed.returncode}\n"
        f"--- stdout\n{completed.stdout}\n--- stderr\n{completed.stderr}"
    )


def test_cli_answers_from_user_configured_server(
    cli: Cli, server: ModelServer, env: dict[str, str], tmp_path: Path
) -> None:
    marker = f"MARKER-{uuid.uuid4().hex[:12]}"
    expected = f'Verdict for {marker}: "yes", with `care` and $HOME untouched.'
    server.answers[cli.protocol] = expected
    prompt = shell_hostile_prompt(marker)

    completed = run_cli(cli, prompt, env, tmp_path / "work")

    assert completed.returncode == 0, describe(completed)
    assert cli.answer(completed.stdout) == expected
    calls = server.requests.for_protocol(cli.protocol)
    assert calls, f"no {cli.protocol} request reached the server: {server.requests!r}"
    assert all(call.model == STUB_MODEL for call in calls), calls
    # The whole prompt, unexpanded, proves it travelled over stdin untouched.
    assert any(prompt.strip() in call.prompt for call in calls), [c.prompt for c in calls]
    unexpected = [r for r in server.requests if r.status == 404]
    assert not unexpected, f"{cli.name} made requests the server does not know: {unexpected}"


def test_cli_fails_on_api_error(
    cli: Cli, server: ModelServer, env: dict[str, str], tmp_path: Path
) -> None:
    server.fail[cli.protocol] = 400

    completed = run_cli(cli, shell_hostile_prompt("MARKER-fail"), env, tmp_path / "work")

    assert completed.returncode != 0, describe(completed)
    assert [r.status for r in server.requests.for_protocol(cli.protocol)] == [400]
    if cli.name == "claude":
        result = json.loads(completed.stdout)
        assert result["is_error"] is True
        assert result["api_error_status"] == 400
    elif cli.name == "codex":
        events = [json.loads(line) for line in completed.stdout.splitlines() if line.strip()]
        assert any(event["type"] == "turn.failed" for event in events), completed.stdout
    else:
        assert completed.returncode == 400 % 256
        assert completed.stdout.strip() == ""
        assert "INVALID_ARGUMENT" in completed.stderr
