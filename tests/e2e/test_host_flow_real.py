"""`/rune council` in a fresh project, typed into the real, pinned Claude Code and Gemini CLI.

Each test installs into a fresh HOME as a user would and runs the host headless with the
slash command; the loopback ModelServer plays the host's model and follows what the
installed command tells it: call convene with the arguments, and on `needs_answers` run each
prompt as a subagent ("running" one here means answering the prompt from the prompt alone,
as a subagent would) and hand the replies to submit_answers. Every run ends with a stamped
result or with an instruction for the user, never with an empty council.

- The consent path: nobody has allowed sending the question out, so the tool answers
  needs-consent with the one command to run; the user runs it on their terminal; the next
  `/rune council` gets voices. There one CLI fails, its slot goes to the host's subagent,
  and the result carries that voice as `is_fallback`.
- The subagent path: no AI CLI on the machine at all; the host's subagents take every slot.
  In Claude Code also the whole way: its model starts a real subagent per prompt with its own
  agent tool, and submits what they answered.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.clis import INSTALL_HINT, cli_environment, node_bin_dir
from tests.e2e.model_server import ANTHROPIC, GEMINI, ModelServer, RecordedRequest, ToolCall
from tests.e2e.test_install_host_real import (
    _arguments,
    _claude_result_text,
    _claude_text,
    _claude_tools,
    _gemini_parts,
    _gemini_tools,
    _install,
    _model_requests,
    _project,
    _run_claude,
    _run_file,
    _run_gemini,
    _voices,
)
from tests.fakes.bin import path_with
from tests.host_flow import consent_on_a_terminal, subagent_reply

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

QUESTION = "Is the sharding plan in plan.md safe to run as written?"
FINAL = "Done: I reported what the council said."


def _typed(run_id: str) -> str:
    return f'/rune council "{QUESTION}" --mode critique --artifact plan.md --id {run_id}'


@dataclass
class Turn:
    """A tool result the host handed back to its model."""

    tool: str
    is_error: bool
    payload: Any  # the structured part when the host passed it on, else the text


@dataclass
class ScriptedModel:
    """The host's model, doing what the installed /rune command says, turn by turn."""

    convene: str
    submit: str
    calls: list[ToolCall] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)

    def next_call(self, arguments: str, seen: list[Turn]) -> ToolCall | None:
        """The model's next step, given every result of its calls so far (the request
        carries the whole conversation)."""
        if len(seen) < len(self.calls):
            return None  # not a turn after a result of ours (the host asking on its own)
        self.turns = seen
        last = seen[-1] if seen else None
        if last is None:
            head, _, rest = arguments.partition(" ")
            assert head == "council", arguments
            call = ToolCall(self.convene, {"arguments": rest})
        elif isinstance(last.payload, dict) and last.payload.get("needs_answers") is True:
            work = last.payload
            answers = [
                {"slot": p["slot"], "token": p["token"], "answer": subagent_reply(p["prompt"])}
                for p in work["prompts"]
            ]
            call = ToolCall(self.submit, {"run_id": work["run_id"], "answers": answers})
        else:
            return None  # a verdict or an instruction: the model reports it
        self.calls.append(call)
        return call


_RUN = re.compile(r"call submit_answers once with run_id '(?P<run>[^']+)'")
_SLOT = re.compile(
    r"^----- slot (?P<slot>\S+) \((?P<role>[^)]*)\), token (?P<token>\S+) -----$", re.M
)


def _work_from_text(text: str) -> dict[str, Any] | None:
    """The prompts as the text part lays them out, for a host that shows its model only
    that (Gemini CLI does): everything a model needs is in the text too."""
    run = _RUN.search(text)
    slots = list(_SLOT.finditer(text))
    if run is None or not slots:
        return None
    ends = [m.start() for m in slots[1:]] + [len(text)]
    prompts = [
        {
            "slot": m["slot"],
            "role": m["role"],
            "token": m["token"],
            "prompt": text[m.end() + 1 : end],
        }
        for m, end in zip(slots, ends, strict=True)
    ]
    return {"needs_answers": True, "run_id": run["run"], "prompts": prompts, "from_text": True}


def _payload(text: str) -> Any:
    """The structured part when the host passed it on, else what the text says."""
    try:
        return json.loads(text)
    except ValueError:
        return _work_from_text(text) or text


# --------------------------------------------------------------------------- the hosts


@dataclass(frozen=True)
class Host:
    name: str
    convene: str
    submit: str
    protocol: str
    # (the env, the scripted model, the server) -> the host's run of the typed command
    run: Callable[[Path, dict[str, str], str], subprocess.CompletedProcess[str]]
    turns: Callable[[dict[str, Any], ScriptedModel], tuple[str | None, list[Turn]]]


def _claude_turns(body: dict[str, Any], model: ScriptedModel) -> tuple[str | None, list[Turn]]:
    """The /rune arguments the request carries, and the results of the model's calls in it."""
    if model.convene not in _claude_tools(body):
        return None, []
    names = {c.id: c.name for c in model.calls}
    seen: list[Turn] = []
    for message in body.get("messages", []):
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, list):
            continue
        for part in content:
            if part.get("type") == "tool_result" and part.get("tool_use_id") in names:
                shown = part.get("content")
                text = shown if isinstance(shown, str) else shown[0]["text"]
                payload = _payload(_claude_result_text(text))
                seen.append(Turn(names[part["tool_use_id"]], bool(part.get("is_error")), payload))
    return _arguments(_claude_text(body)), seen


def _gemini_turns(body: dict[str, Any], model: ScriptedModel) -> tuple[str | None, list[Turn]]:
    if model.convene not in _gemini_tools(body):
        return None, []
    text = "\n".join(p.get("text", "") for p in _gemini_parts(body))
    seen: list[Turn] = []
    for part in _gemini_parts(body):
        response = part.get("functionResponse")
        if response is None or response.get("name") not in (model.convene, model.submit):
            continue
        shown = response.get("response", {})
        # Gemini CLI gives its model the text part, fenced as untrusted, under "output" (or
        # "error" for a tool error).
        is_error = "error" in shown
        text = str(shown.get("error") or shown.get("output") or "")
        text = text.removeprefix("<untrusted_context>\n").removesuffix("\n</untrusted_context>")
        seen.append(Turn(response["name"], is_error, _payload(text)))
    return _arguments(text), seen


HOSTS = {
    "claude": Host(
        "claude",
        "mcp__council__convene",
        "mcp__council__submit_answers",
        ANTHROPIC,
        functools.partial(_run_claude, timeout=240),
        _claude_turns,
    ),
    "gemini": Host(
        "gemini",
        "mcp_council_convene",
        "mcp_council_submit_answers",
        GEMINI,
        functools.partial(_run_gemini, timeout=240),
        _gemini_turns,
    ),
}


def _host(name: str) -> Host:
    binary = node_bin_dir() / name
    if not binary.exists() or shutil.which("node") is None:
        pytest.fail(f"{name} or node not found: {INSTALL_HINT}", pytrace=False)
    return HOSTS[name]


@dataclass
class Session:
    """One `/rune council` typed into the host: what its model saw and what it printed."""

    model: ScriptedModel
    out: subprocess.CompletedProcess[str]
    requests: list[RecordedRequest]


def _type_into(
    host: Host, server: ModelServer, project: Path, env: dict[str, str], typed: str
) -> Session:
    model = ScriptedModel(host.convene, host.submit)

    def script(body: Any) -> ToolCall | None:
        arguments, seen = host.turns(body, model)
        if arguments is None and not seen:
            return None  # not the conversation the command started
        return model.next_call(arguments or "", seen)

    server.tool_calls[host.protocol] = script
    server.answers[host.protocol] = FINAL
    server.requests.clear()
    out = host.run(project, env, typed)
    session = Session(model, out, _model_requests(server, host.protocol))
    assert out.returncode == 0, (out.stdout[-2000:], out.stderr[-2000:])
    return session


def _host_env(tmp_path: Path, server: ModelServer, host: Host, path: str) -> dict[str, str]:
    env = cli_environment(tmp_path, server)
    env["PATH"] = path  # the council's MCP server finds the fakes, or no CLI at all
    if host.name == "gemini":
        # Gemini CLI hands its MCP servers no variable whose name looks like a secret unless
        # the user allows it; the codex voice reads its provider's key from OPENAI_API_KEY.
        settings = Path(env["GEMINI_CLI_HOME"]) / ".gemini" / "settings.json"
        users_own = json.loads(settings.read_text())
        users_own["security"]["environmentVariableRedaction"] = {"allowed": ["OPENAI_API_KEY"]}
        settings.write_text(json.dumps(users_own))
    return env


def _final_turn(session: Session) -> Turn:
    assert session.model.turns, "the host handed no tool result back to its model"
    return session.model.turns[-1]


# --------------------------------------------------------------------------- the tests


@pytest.mark.parametrize("name", ["claude", "gemini"])
def test_a_fresh_project_asks_the_user_then_convenes_with_a_fallback_slot(
    tmp_path: Path, name: str
) -> None:
    host = _host(name)
    project = _project(tmp_path)
    argv_log = tmp_path / "argv.log"
    voices = _voices(tmp_path, QUESTION, codex_fails=True, argv_log=argv_log)
    with ModelServer(keep_bodies=True) as server:
        env = _host_env(tmp_path, server, host, path_with(voices))
        _install(host.name, env)
        first = _type_into(host, server, project, env, _typed("c1"))

        # Nobody has allowed it: the model was told what the user must run, and no council ran.
        told = _final_turn(first)
        assert told.tool == host.convene and told.is_error and len(first.model.calls) == 1
        shown = json.dumps(told.payload)
        command = re.search(r"(\S+ )+?council consent --rune-dir \S+?(?=[\"'\\]|$)", shown)
        assert command is not None, shown[:2000]
        assert f"--rune-dir {project / '.rune'}" in command.group(0)
        assert "needs consent" in shown or "needs_consent" in shown
        assert not argv_log.exists(), "an AI CLI was sent the question without consent"
        assert not (project / ".rune" / "council" / "run-c1.json").exists()

        # The user runs it on their own terminal and says yes.
        code, printed = consent_on_a_terminal(
            project, env, "y", "--rune-dir", str(project / ".rune")
        )
        assert code == 0 and "allowed for" in printed, printed

        second = _type_into(host, server, project, env, _typed("c1"))

    # The next call gets voices; codex fails, and its slot is the host's subagent's.
    turns = second.model.turns
    calls = second.model.calls
    assert [c.name for c in calls] == [host.convene, host.submit], turns
    work = turns[0].payload
    assert work["needs_answers"] is True and [p["slot"] for p in work["prompts"]] == ["v2"]
    assert not turns[-1].is_error
    doc = _run_file(project, "c1")
    assert doc["status"] == "complete" and doc["decorrelation"] == "MULTI_FAMILY"
    assert doc["runtime_report"]["consent"].startswith("granted (the user's yes for this project")
    v2 = next(v for v in doc["voices"] if v["id"] == "v2")
    assert v2["is_fallback"] is True and v2["runtime"] == "host-subagent"
    assert v2["status"] == "complete" and v2["attempts"][0]["runtime"] == "codex"
    assert doc["runtime_report"]["degraded_to_subagent"] == ["v2"]
    verdict = json.dumps(turns[-1].payload)
    assert "MULTI_FAMILY" in verdict and "c1" in verdict
    assert not any(p["token"] in json.dumps(doc) for p in work["prompts"])


@pytest.mark.parametrize("name", ["claude", "gemini"])
def test_with_no_ai_cli_the_hosts_subagents_take_every_slot(tmp_path: Path, name: str) -> None:
    host = _host(name)
    project = _project(tmp_path)
    nothing = tmp_path / "no-clis"
    nothing.mkdir()
    with ModelServer(keep_bodies=True) as server:
        env = _host_env(tmp_path, server, host, path_with(nothing))
        _install(host.name, env)
        session = _type_into(host, server, project, env, _typed("s1"))

    assert [c.name for c in session.model.calls] == [host.convene, host.submit]
    work = session.model.turns[0].payload
    assert [p["slot"] for p in work["prompts"]] == ["v1", "v2", "v3"]
    assert all("No rollback step is defined." in p["prompt"] for p in work["prompts"])
    final = session.model.turns[-1]
    assert not final.is_error
    doc = _run_file(project, "s1")
    assert doc["status"] == "complete" and doc["voices_valid"] == 3
    # The host's own model: one unknown family, so no consensus is claimed from it.
    assert doc["decorrelation"] == "NO_DECORRELATION"
    assert {(v["source"], v["runtime"], v["model_family"]) for v in doc["voices"]} == {
        ("subagent", "host-subagent", "unknown")
    }
    assert "NO_DECORRELATION" in json.dumps(final.payload)


VOICE_PROMPT = "You are one independent voice on a council."


def test_claude_runs_each_prompt_in_a_subagent_of_its_own(tmp_path: Path) -> None:
    """The whole way a real Claude Code takes: its model starts one subagent per prompt with
    its own agent tool, each subagent's request reaches the model server carrying only that
    prompt and is answered from it, and the model submits the subagents' replies as they
    came back to it."""
    host = _host("claude")
    project = _project(tmp_path)
    nothing = tmp_path / "no-clis"
    nothing.mkdir()
    calls: dict[str, tuple[str, str]] = {}  # tool_use id -> (tool, slot or "")
    work: dict[str, Any] = {}
    subagent_prompts: list[str] = []

    def results(body: dict[str, Any]) -> dict[str, str]:
        found: dict[str, str] = {}
        for message in body.get("messages", []):
            content = message.get("content")
            if message.get("role") == "user" and isinstance(content, list):
                for part in content:
                    if part.get("type") == "tool_result":
                        shown = part.get("content")
                        text = (
                            shown
                            if isinstance(shown, str)
                            else "\n".join(p.get("text", "") for p in shown if isinstance(p, dict))
                        )
                        found[part["tool_use_id"]] = _claude_result_text(text)
        return found

    def script(body: Any) -> ToolCall | None:
        text = _claude_text(body)
        if VOICE_PROMPT in text and _arguments(text) is None:
            subagent_prompts.append(text)
            return None  # a subagent's own conversation: it answers (answers below)
        if host.convene not in _claude_tools(body) or _arguments(text) is None:
            return None
        agent = "Agent" if "Agent" in _claude_tools(body) else "Task"
        got = results(body)
        call: ToolCall | None = None
        if not calls:
            call = ToolCall(host.convene, {"arguments": _arguments(text).partition(" ")[2]})
            calls[call.id] = (host.convene, "")
        elif not work:
            (convened,) = [got[i] for i, (tool, _) in calls.items() if tool == host.convene]
            work.update(json.loads(convened))
        if call is None and work and set(calls) <= set(got):
            asked = {slot for tool, slot in calls.values() if tool == agent}
            left = [p for p in work["prompts"] if p["slot"] not in asked]
            if left:
                prompt = left[0]
                call = ToolCall(
                    agent,
                    {
                        "description": f"council slot {prompt['slot']}",
                        "prompt": prompt["prompt"],
                        "subagent_type": "general-purpose",
                    },
                )
                calls[call.id] = (agent, prompt["slot"])
            elif not any(tool == host.submit for tool, _ in calls.values()):
                replies = {slot: got[i] for i, (tool, slot) in calls.items() if tool == agent}
                answers = [
                    {"slot": p["slot"], "token": p["token"], "answer": replies[p["slot"]]}
                    for p in work["prompts"]
                ]
                call = ToolCall(host.submit, {"run_id": work["run_id"], "answers": answers})
                calls[call.id] = (host.submit, "")
        return call

    with ModelServer(keep_bodies=True) as server:
        env = _host_env(tmp_path, server, host, path_with(nothing))
        _install(host.name, env)
        server.tool_calls[ANTHROPIC] = script
        server.answers[ANTHROPIC] = lambda prompt: (
            subagent_reply(prompt) if VOICE_PROMPT in prompt else FINAL
        )
        out = host.run(project, env, _typed("a1"))

    assert out.returncode == 0, (out.stdout[-2000:], out.stderr[-2000:])
    printed = json.loads(out.stdout)
    assert printed["is_error"] is False and printed["permission_denials"] == [], printed
    tools = [tool for tool, _ in calls.values()]
    assert tools[0] == host.convene and tools[-1] == host.submit
    assert sorted(slot for tool, slot in calls.values() if slot) == ["v1", "v2", "v3"]
    # Each subagent saw its prompt and nothing of the conversation that started it.
    for prompt in work["prompts"]:
        assert any(prompt["prompt"].strip() in seen for seen in subagent_prompts), prompt["slot"]
    assert not any("rune arguments" in seen for seen in subagent_prompts)
    doc = _run_file(project, "a1")
    assert doc["status"] == "complete" and doc["voices_valid"] == 3
    assert {v["runtime"] for v in doc["voices"]} == {"host-subagent"}
