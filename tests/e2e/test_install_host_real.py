"""`rune council install <host>`, then `/rune council "<q>"` typed into the real, pinned host.

Each test installs into a fresh HOME exactly as a user would, runs the host headless with the
slash command, and lets the loopback ModelServer play the host's model: it reads the
arguments out of the expanded command the host sent and calls the council's MCP tool the way
the command tells it to. The host starts the installed MCP server, the council runs (its
voices are fake CLIs run as real processes), and the host hands the result back to the model
in its next request, where the test reads it. The question carries quotes, `$(...)` and
backticks, and the options a template and rounds; all of it must reach the run file as
text, and nothing in it may run. Codex gets a narrower test (see its docstring). The flows
of a fresh project (consent, the host's own subagents) are in test_host_flow_real.py.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.e2e.clis import INSTALL_HINT, STUB_MODEL, cli_environment, node_bin_dir
from tests.e2e.model_server import (
    ANTHROPIC,
    GEMINI,
    OPENAI_RESPONSES,
    ModelServer,
    RecordedRequest,
    ToolCall,
)
from tests.fakes.bin import install_fake, path_with
from tests.helpers import PLAN, ROLLBACK, SHARDS, UNDO, answer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "contracts" / "council-result.schema.json").read_text())
RUN_ID = "from-the-slash-command"
# What a user might well type: quotes of both kinds, a command substitution and backticks.
QUESTION = (
    "Is the sharding plan in plan.md safe to run 'as written' with $(touch PWNED) "
    "and `touch PWNED2` in it? It's meant for one weekend."
)
TYPED = (
    f'/rune council --template security-review --rounds 2 "{QUESTION}" --mode critique '
    f"--artifact plan.md --id {RUN_ID}"
)
FINAL = "Stamp: MULTI_FAMILY. The council found no rollback step; I would not run it yet."
BEGIN, END = "----- rune arguments -----\n", "\n----- end of rune arguments -----"


def _arguments(prompt_text: str) -> str | None:
    """The user's arguments as the expanded /rune command shows them to the model."""
    start = prompt_text.find(BEGIN)
    end = prompt_text.find(END, start)
    return None if start < 0 or end < 0 else prompt_text[start + len(BEGIN) : end]


def _tool_arguments(arguments: str) -> dict[str, Any]:
    """What a model following the command makes of `council [options] "<question>"`:
    everything after `council`, as typed, in the tool's one `arguments` string."""
    head, sep, rest = arguments.partition(" ")
    assert head == "council" and sep, arguments
    return {"arguments": rest}


def _voices(
    tmp_path: Path,
    question: str = QUESTION,
    *,
    codex_fails: bool = False,
    argv_log: Path | None = None,
) -> Path:
    """Fake claude, codex and gemini answering ``question`` (NO, NO, YES): the council the
    host's MCP server runs. ``argv_log`` records each one's command line."""
    voices = tmp_path / "voices"
    log = {"argv_log": str(argv_log)} if argv_log is not None else {}
    install_fake(voices, "claude", answer=answer(question, "NO", [ROLLBACK]), **log)
    codex = {"mode": "crash"} if codex_fails else {}
    install_fake(voices, "codex", answer=answer(question, "NO", [UNDO]), **codex, **log)
    install_fake(voices, "gemini", answer=answer(question, "YES", [SHARDS]), **log)
    return voices


def _install(host: str, env: dict[str, str], *extra: str, cwd: Path | None = None) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "rune_council.cli", "council", "install", host, *extra],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def _host_env(tmp_path: Path, server: ModelServer, voices: Path) -> dict[str, str]:
    env = cli_environment(tmp_path, server)
    # The council the host's MCP server runs finds the fakes, not the real CLIs; consent is
    # the user's standing choice, given the way a user gives it.
    env["PATH"] = path_with(voices)
    env["RUNE_COUNCIL_ALLOW_EXTERNAL"] = "1"
    return env


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "plan.md").write_text(PLAN, encoding="utf-8")
    return project


def _run_file(project: Path, run_id: str) -> dict[str, Any]:
    """The run file the council wrote in ``project``, checked against the published schema."""
    doc: dict[str, Any] = json.loads(
        (project / ".rune" / "council" / f"run-{run_id}.json").read_text(encoding="utf-8")
    )
    jsonschema.validate(doc, SCHEMA)
    return doc


def _check_the_run(project: Path, tmp_path: Path) -> dict[str, Any]:
    doc = _run_file(project, RUN_ID)
    assert doc["status"] == "complete" and doc["decorrelation"] == "MULTI_FAMILY"
    assert doc["request"]["question"] == QUESTION  # every quote, `$(`, backtick as typed
    assert doc["request"]["mode"] == "critique"  # the user's own option over the template's
    assert doc["request"]["template"]["name"] == "security-review"
    assert doc["request"]["deliberation"]["rounds"]["max_rounds"] == 2
    assert doc["request"]["artifact"]["path"] == str((project / "plan.md").resolve())
    assert any(c["claim"] == ROLLBACK["text"] for c in doc["agreement"]["consensus_claims"])
    assert not list(tmp_path.rglob("PWNED*")), "a part of the question was run as a command"
    return doc


def _model_requests(server: ModelServer, protocol: str) -> list[RecordedRequest]:
    return [
        r
        for r in server.requests.for_protocol(protocol)
        if isinstance(r.body, dict) and "count_tokens" not in r.path and "countTokens" not in r.path
    ]


# --------------------------------------------------------------------------- Claude Code


def _claude_text(body: dict[str, Any]) -> str:
    parts = []
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts += [p.get("text", "") for p in content if isinstance(p, dict)]
    return "\n".join(parts)


def _claude_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        part
        for message in body.get("messages", [])
        if message.get("role") == "user" and isinstance(message.get("content"), list)
        for part in message["content"]
        if part.get("type") == "tool_result"
    ]


def _claude_result_text(shown: str) -> str:
    """The tool result as Claude Code hands it on: inline, or (a two-round council is large)
    saved to a file its model may read, with a preview inline."""
    saved = re.search(r"<persisted-output>\nOutput too large .*?saved to: (\S+)", shown)
    return Path(saved.group(1)).read_text(encoding="utf-8") if saved else shown


def _claude_tools(body: dict[str, Any]) -> set[str]:
    return {t.get("name") for t in body.get("tools", [])}


def _run_claude(
    project: Path, env: dict[str, str], typed: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """The real claude in print mode, given ``typed`` as the user's prompt."""
    claude = node_bin_dir() / "claude"
    # Print mode connects MCP servers in the background unless told to wait for them.
    env = {**env, "MCP_CONNECTION_NONBLOCKING": "0"}
    return subprocess.run(
        [str(claude), "-p", "--model", STUB_MODEL, "--output-format", "json", typed],
        cwd=project,
        env=env,
        # In print mode claude appends whatever its stdin holds to the prompt: give it
        # nothing, whatever the test runner's own stdin is.
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.parametrize("scope", ["user", "project"])
def test_claude_slash_command_convenes_the_council_through_the_installed_server(
    tmp_path: Path, scope: str
) -> None:
    claude = node_bin_dir() / "claude"
    if not claude.exists():
        pytest.fail(f"claude not found in {node_bin_dir()}: {INSTALL_HINT}", pytrace=False)
    tool = "mcp__council__convene"
    project, voices = _project(tmp_path), _voices(tmp_path)
    calls: list[ToolCall] = []

    def model(body: dict[str, Any]) -> ToolCall | None:
        arguments = _arguments(_claude_text(body))
        if arguments is None or tool not in _claude_tools(body) or _claude_results(body):
            return None
        calls.append(ToolCall(tool, _tool_arguments(arguments)))
        return calls[-1]

    with ModelServer(keep_bodies=True) as server:
        server.tool_calls[ANTHROPIC] = model
        server.answers[ANTHROPIC] = FINAL
        env = _host_env(tmp_path, server, voices)
        extra = ("--project",) if scope == "project" else ()
        installed = _install("claude", env, *extra, cwd=project)
        usage = f'installed rune-council into claude ({scope}): /rune council "<question>"'
        assert usage in installed
        where = project if scope == "project" else Path(env["HOME"])
        assert (where / ".claude" / "commands" / "rune.md").is_file()
        out = _run_claude(project, env, TYPED)
        requests = _model_requests(server, ANTHROPIC)

    assert out.returncode == 0, (out.stdout[-2000:], out.stderr[-2000:])
    printed = json.loads(out.stdout)
    assert printed["is_error"] is False and printed["result"] == FINAL
    assert printed["permission_denials"] == []  # the command's allowed-tools let the call through

    first = requests[0].body
    text = _claude_text(first)
    assert _arguments(text) == TYPED.removeprefix("/rune ")
    assert "Start with the stamp" in text and "needs_decision" in text
    assert len(calls) == 1

    answered = [r.body for r in requests if _claude_results(r.body)]
    assert answered, "no request after the tool call carried its result"
    (result,) = [t for t in _claude_results(answered[0]) if t["tool_use_id"] == calls[0].id]
    assert not result.get("is_error"), result
    content = result["content"]
    seen = json.loads(
        _claude_result_text(content if isinstance(content, str) else content[0]["text"])
    )
    doc = _check_the_run(project, tmp_path)
    assert seen["id"] == RUN_ID and seen["agreement"] == doc["agreement"]


# --------------------------------------------------------------------------- Gemini CLI


def _gemini_parts(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for c in body.get("contents", []) for p in c.get("parts", []) if isinstance(p, dict)]


def _gemini_tools(body: dict[str, Any]) -> set[str]:
    return {d.get("name") for t in body.get("tools", []) for d in t.get("functionDeclarations", [])}


def _gemini_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [p["functionResponse"] for p in _gemini_parts(body) if "functionResponse" in p]


def _run_gemini(
    project: Path, env: dict[str, str], typed: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """The real Gemini CLI headless, given ``typed`` as the user's prompt."""
    gemini, node = node_bin_dir() / "gemini", shutil.which("node")
    assert node is not None
    return subprocess.run(
        [node, str(gemini), "-o", "json", "--skip-trust", "-p", typed],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,  # as for claude: no stdin reaches the prompt
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_gemini_slash_command_convenes_the_council_through_the_installed_server(
    tmp_path: Path,
) -> None:
    gemini, node = node_bin_dir() / "gemini", shutil.which("node")
    if not gemini.exists() or node is None:
        pytest.fail(f"gemini or node not found: {INSTALL_HINT}", pytrace=False)
    tool = "mcp_council_convene"
    project, voices = _project(tmp_path), _voices(tmp_path)
    calls: list[ToolCall] = []

    def model(body: dict[str, Any]) -> ToolCall | None:
        text = "\n".join(p.get("text", "") for p in _gemini_parts(body))
        arguments = _arguments(text)
        if arguments is None or tool not in _gemini_tools(body) or _gemini_results(body):
            return None
        calls.append(ToolCall(tool, _tool_arguments(arguments)))
        return calls[-1]

    with ModelServer(keep_bodies=True) as server:
        server.tool_calls[GEMINI] = model
        server.answers[GEMINI] = FINAL
        env = _host_env(tmp_path, server, voices)
        settings = Path(env["GEMINI_CLI_HOME"]) / ".gemini" / "settings.json"
        # Gemini CLI hands its MCP servers no variable whose name looks like a secret unless
        # the user allows it; the codex voice reads its provider's key from OPENAI_API_KEY.
        users_own = json.loads(settings.read_text())
        users_own["security"]["environmentVariableRedaction"] = {"allowed": ["OPENAI_API_KEY"]}
        settings.write_text(json.dumps(users_own))
        _install("gemini", env)
        out = _run_gemini(project, env, TYPED)
        requests = _model_requests(server, GEMINI)

    assert out.returncode == 0, (out.stdout[-2000:], out.stderr[-2000:])
    assert json.loads(out.stdout)["response"] == FINAL

    first = "\n".join(p.get("text", "") for p in _gemini_parts(requests[0].body))
    assert _arguments(first) == TYPED.removeprefix("/rune ")
    assert "Start with the stamp" in first and "needs_decision" in first
    assert len(calls) == 1

    answered = [r.body for r in requests if _gemini_results(r.body)]
    assert answered, "no request after the tool call carried its result"
    (result,) = _gemini_results(answered[0])
    assert result["name"] == tool
    shown = json.dumps(result["response"])
    doc = _check_the_run(project, tmp_path)
    assert RUN_ID in shown and "MULTI_FAMILY" in shown and doc["id"] == RUN_ID

    # The user's own settings are kept through install and uninstall alike.
    _install("gemini", env, "--uninstall")
    assert json.loads(settings.read_text()) == users_own


# --------------------------------------------------------------------------- Codex


def _function_outputs(body: Any) -> list[dict[str, Any]]:
    items = body.get("input", []) if isinstance(body, dict) else []
    return [i for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"]


def test_codex_reads_the_installed_rune_skill_and_starts_its_mcp_server(tmp_path: Path) -> None:
    """Codex 0.171 offers MCP tools only behind its own tool search, which the loopback
    server does not speak: a call of the council's convene or submit_answers by name is
    "unsupported call". So here the real codex shows what it can: the server entry as
    ``codex mcp get`` parses it; the ``$rune`` skill (with the subagent protocol) and the
    arguments reaching the model when the user mentions it; and, when its model lists the
    council's MCP resources, that codex starts the installed server and talks to it."""
    codex, node = node_bin_dir() / "codex", shutil.which("node")
    if not codex.exists() or node is None:
        pytest.fail(f"codex or node not found: {INSTALL_HINT}", pytrace=False)
    typed = TYPED.replace("/rune", "$rune", 1)
    listing = ToolCall("list_mcp_resources", {"server": "council"})
    with ModelServer(keep_bodies=True) as server:
        server.tool_calls[OPENAI_RESPONSES] = lambda body: (
            None if _function_outputs(body) else listing
        )
        env = _host_env(tmp_path, server, _voices(tmp_path))
        config = Path(env["CODEX_HOME"]) / "config.toml"
        users_own = config.read_bytes()
        _install("codex", env)
        shown = subprocess.run(
            [node, str(codex), "mcp", "get", "council", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        out = subprocess.run(
            [node, str(codex), "exec", "--skip-git-repo-check", "--ephemeral", "--json"],
            input=typed,
            cwd=_project(tmp_path),
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        requests = _model_requests(server, "openai-responses")

    assert shown.returncode == 0, shown.stderr
    server_entry = json.loads(shown.stdout)
    assert server_entry["enabled"] is True
    transport = server_entry["transport"]
    assert [transport["command"], *transport["args"]] == [
        sys.executable,
        "-m",
        "rune_council.cli",
        "council",
        "mcp",
    ]
    assert server_entry["tool_timeout_sec"] >= 600

    assert out.returncode == 0, (out.stdout[-2000:], out.stderr[-2000:])
    sent = json.dumps(requests[0].body)
    assert json.dumps(typed)[1:-1] in sent  # the user's message, every character as typed
    assert "<name>rune</name>" in sent and "Start with the stamp" in sent
    assert "mcp__council__submit_answers" in sent and "needs_consent" in sent
    (listed,) = [o for r in requests for o in _function_outputs(r.body)]
    assert listed["call_id"] == listing.id
    resources = json.loads(listed["output"])["resources"]
    assert {r["uri"] for r in resources} == {"rune://contract/council-result"}

    _install("codex", env, "--uninstall")
    assert config.read_bytes() == users_own
