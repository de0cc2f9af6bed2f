"""``rune council mcp`` through the MCP SDK's own stdio client, the server a real subprocess.

Voices are the fake CLIs of tests/fakes installed under their real names, run as real
processes by the council the server convenes.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from mcp import types

from rune_council.core.contract import CouncilResult
from rune_council.council.intake import ask_schema
from tests.fakes.bin import install_fake
from tests.helpers import (
    PLAN,
    QUESTION,
    ROLLBACK,
    SHARDS,
    UNDO,
    answer,
    council_result_schema,
    running,
)
from tests.mcp_client import connect, server_env, text_of

pytestmark = pytest.mark.timeout(180)

TOOLS = {"convene", "submit_answers", "detect", "list_runs", "show_run", "verify_run", "tally"}
# Borda over three proposals: A 2+1+2 = 5, B 1+2+0 = 3, C 0+0+1 = 1 (counted by hand).
TRANSCRIPT = "\n".join(
    [
        "@phase propose",
        'PROPOSE A "shard by customer"',
        'PROPOSE B "read replicas first"',
        'PROPOSE C "do nothing"',
        "@phase rank",
        "m1 RANK A>B>C",
        "m2 RANK B>A>C",
        "m3 RANK A>C>B",
    ]
)


def fakes(tmp: Path, **settings: Any) -> None:
    install_fake(tmp / "bin", "claude", answer=answer(QUESTION, "NO", [ROLLBACK]), **settings)
    install_fake(tmp / "bin", "codex", answer=answer(QUESTION, "NO", [UNDO]), **settings)
    install_fake(tmp / "bin", "gemini", answer=answer(QUESTION, "YES", [SHARDS]), **settings)
    (tmp / "plan.md").write_text(PLAN, encoding="utf-8")


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def run_file(tmp: Path, run_id: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(
        (tmp / ".rune" / "council" / f"run-{run_id}.json").read_text(encoding="utf-8")
    )
    return doc


def test_tools_carry_schemas_generated_from_the_contract(tmp_path: Path) -> None:
    async def scenario() -> list[types.Tool]:
        async with connect(tmp_path, "--yes") as session:
            return (await session.list_tools()).tools

    tools = {t.name: t for t in run(scenario())}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description and len(tool.description) > 60, tool.name
        assert "$ref" not in json.dumps(tool.input_schema), tool.name
        assert tool.input_schema.get("additionalProperties") is False, tool.name
    convene = tools["convene"].input_schema
    # The intake's own ask, as a caller who is not the operator may send it, and the line
    # a host's /rune command was given.
    asked = ask_schema(trusted_caller=False, nested=False)
    assert set(convene["properties"]) == {*asked["properties"], "arguments", "subagents_only"}
    assert "required" not in convene  # a question, or arguments holding one
    mode = convene["properties"]["mode"]["anyOf"][0]
    assert mode["enum"] == ["critique", "review", "judge", "generate"]
    # The contract's bounds, not restated: at least two voices; more is capped, not refused.
    n = convene["properties"]["n"]["anyOf"][0]
    assert n["minimum"] == 2 and "maximum" not in n
    rounds = convene["properties"]["multi_round"]["anyOf"][0]["properties"]["max_rounds"]
    assert rounds["anyOf"][0]["maximum"] == 10
    for flag in ("--template", "--rounds", "--chain", "--council-type"):
        assert flag in convene["properties"]["arguments"]["description"], flag
    # No way to ask for consent, or to run a program, in a call: nothing in the schema names it.
    for key in ("yes", "subagent_cmd", "orchestrator_cmd", "key_env", "request"):
        assert key not in convene["properties"], key
    assert not any("allow" in key for key in convene["properties"])
    # A verdict is the contract's CouncilResult; the other branch is a council waiting for
    # the host's subagents, which no CouncilResult can be mistaken for.
    out = tools["convene"].output_schema
    assert out is not None and out["type"] == "object"
    assert tools["submit_answers"].output_schema == out
    result = CouncilResult.model_json_schema(mode="serialization")
    result.pop("$defs")
    assert out["anyOf"][0] == result
    waiting = {"needs_answers": True, "run_id": "r", "prompts": [], "instructions": "wait"}
    jsonschema.validate(waiting, out)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"needs_answers": True, "decorrelation": "MULTI_FAMILY"}, out)


def test_convene_returns_the_result_with_one_progress_note_per_voice_transition(
    tmp_path: Path,
) -> None:
    fakes(tmp_path, stdin_copy=str(tmp_path / "prompt.txt"))
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async def scenario() -> types.CallToolResult:
        async with connect(tmp_path, "--yes") as session:
            return await session.call_tool(
                "convene",
                {"question": QUESTION, "artifact": "plan.md", "id": "m1", "mode": "critique"},
                progress_callback=on_progress,
            )

    result = run(scenario())
    assert not result.is_error, text_of(result)
    text = text_of(result)
    assert text.startswith("## Council Result: m1\n- **Decorrelation**: MULTI_FAMILY")
    assert "The plan has no rollback step" in text
    structured = result.structured_content
    assert structured is not None
    jsonschema.validate(structured, council_result_schema())
    recorded = run_file(tmp_path, "m1")
    assert structured["decorrelation"] == recorded["decorrelation"] == "MULTI_FAMILY"
    assert structured["agreement"] == recorded["agreement"]
    assert "No rollback step is defined." in (tmp_path / "prompt.txt").read_text()

    transitions = [e for e in recorded["events"] if e["kind"] == "voice.status"]
    voice_notes = [m for _, _, m in progress if m and re.match(r"v\d ", m)]
    assert len(voice_notes) == len(transitions) >= 6, voice_notes
    for message, event in zip(voice_notes, transitions, strict=True):
        assert re.fullmatch(r"v\d \w+ (running|complete|dropped) [0-3]/3", message), message
        assert message.startswith(f"{event['voice_id']} ") and f" {event['status']} " in message
    # Against a total known from the start, growing each time, reaching it with the verdict.
    values = [v for v, _, _ in progress]
    assert values == sorted(set(values))
    assert {t for _, t, _ in progress} == {100.0}
    assert progress[-1] == (100.0, 100.0, "verdict: MULTI_FAMILY, 3 valid")
    assert all(v < 100.0 for v in values[:-1])


def test_progress_keeps_moving_through_deliberation_and_rounds(tmp_path: Path) -> None:
    fakes(tmp_path)
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async def scenario() -> types.CallToolResult:
        async with connect(tmp_path, "--yes") as session:
            return await session.call_tool(
                "convene",
                {
                    "question": QUESTION,
                    "id": "p2",
                    "deliberation": "vote",
                    "multi_round": {"max_rounds": 2, "convergence_threshold": 1},
                },
                progress_callback=on_progress,
            )

    result = run(scenario())
    assert not result.is_error, text_of(result)
    assert len(run_file(tmp_path, "p2")["deliberation"]["rounds"]) == 2
    values = [v for v, _, _ in progress]
    messages = [m or "" for _, _, m in progress]
    assert values == sorted(set(values)) and {t for _, t, _ in progress} == {100.0}
    # Each stage is heard from, in order, and the bar is not full before the verdict.
    first_done = next(i for i, m in enumerate(messages) if m.startswith("round 1 done"))
    second = next(i for i, m in enumerate(messages) if m.startswith("round 2: dispatching"))
    vote = next(i for i, m in enumerate(messages) if m.startswith("vote:"))
    assert vote < first_done < second
    assert 40 <= values[first_done] <= 60  # one round of two is half the council
    assert any(re.match(r"v\d \w+ complete", m) for m in messages[second:])
    assert messages[-1].startswith("verdict: ") and values[-1] == 100.0
    assert values[-2] < 100.0


def test_n_above_the_cap_is_capped_with_the_note_every_door_gives(tmp_path: Path) -> None:
    fakes(tmp_path)

    async def scenario() -> types.CallToolResult:
        async with connect(tmp_path, "--yes") as session:
            return await session.call_tool("convene", {"question": QUESTION, "n": 9, "id": "n9"})

    result = run(scenario())
    assert not result.is_error, text_of(result)
    note = "n=9 requested; capped at 5 voices"
    assert note in run_file(tmp_path, "n9")["notes"]
    assert text_of(result).count(note) == 1


def test_a_chain_runs_every_step_and_links_each_run(tmp_path: Path) -> None:
    fakes(tmp_path)
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async def scenario() -> tuple[types.CallToolResult, str]:
        async with connect(tmp_path, "--yes") as session:
            result = await session.call_tool(
                "convene",
                {"question": QUESTION, "chain": "red-team-first", "n": 2, "id": "ch1"},
                progress_callback=on_progress,
            )
            first = await session.read_resource("rune://runs/ch1.red-team")
            (content,) = first.contents
            assert isinstance(content, types.TextResourceContents)
            return result, content.text

    result, first_run = run(scenario())
    assert not result.is_error, text_of(result)
    links = [c for c in result.content if isinstance(c, types.ResourceLink)]
    assert [str(link.uri) for link in links] == ["rune://runs/ch1.red-team", "rune://runs/ch1"]
    assert "- ch1.red-team (red-team): rune://runs/ch1.red-team" in text_of(result)
    # The result is the chain's last council, told what the red team found.
    assert result.structured_content is not None
    assert result.structured_content["id"] == "ch1"
    assert result.structured_content["request"]["chain"]["step"] == 2
    assert json.loads(first_run)["request"]["deliberation"]["council_type"] == "red_team"
    # Two councils, one total from the start: the first ends halfway.
    assert {t for _, t, _ in progress} == {200.0}
    ends = [v for v, _, m in progress if (m or "").startswith("ch1.red-team: verdict: ")]
    assert ends == [100.0]
    value, _, message = progress[-1]
    assert value == 200.0 and (message or "").startswith("ch1: verdict: ")


def test_every_other_tool_and_the_resources(tmp_path: Path) -> None:
    fakes(tmp_path)

    async def scenario() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with connect(tmp_path, "--yes") as session:
            first = await session.call_tool("convene", {"question": QUESTION, "id": "r1", "n": 2})
            assert not first.is_error, text_of(first)
            for name, args in [
                ("detect", {}),
                ("list_runs", {"limit": 5}),
                ("show_run", {"run_id": "r1"}),
                ("verify_run", {"run_id": "r1"}),
                ("tally", {"transcript": TRANSCRIPT}),
            ]:
                out[name] = await session.call_tool(name, args)
            out["resources"] = (await session.list_resources()).resources
            out["templates"] = (await session.list_resource_templates()).resource_templates
            out["run"] = await session.read_resource("rune://runs/r1")
            out["contract"] = await session.read_resource("rune://contract/council-result")
        return out

    out = run(scenario())
    for name in ("detect", "list_runs", "show_run", "verify_run", "tally"):
        assert not out[name].is_error, (name, text_of(out[name]))

    detected = {d["runtime"]: d for d in out["detect"].structured_content["detected"]}
    assert detected["claude"]["status"] == "available"
    assert detected["claude"]["model_family"] == "anthropic"
    assert "- codex: available, family openai" in text_of(out["detect"])

    rows = out["list_runs"].structured_content["runs"]
    assert [(r["id"], r["status"], r["uri"]) for r in rows] == [
        ("r1", "complete", "rune://runs/r1")
    ]

    shown = out["show_run"].structured_content
    assert shown == run_file(tmp_path, "r1")
    assert text_of(out["show_run"]).startswith("## Council Result: r1")

    verified = out["verify_run"].structured_content
    assert verified["reproduced"] is True and verified["differences"] == []
    assert "reproduced" in text_of(out["verify_run"])

    tally = out["tally"].structured_content
    assert tally["winner"] == "A"
    assert {s["label"]: s["score"] for s in tally["scores"]} == {"A": 5, "B": 3, "C": 1}
    assert "winner: A" in text_of(out["tally"])

    uris = {str(r.uri) for r in out["resources"]}
    assert uris == {"rune://runs/r1", "rune://contract/council-result"}
    assert [t.uri_template for t in out["templates"]] == ["rune://runs/{id}"]
    (content,) = out["run"].contents
    assert json.loads(content.text) == run_file(tmp_path, "r1")
    (schema,) = out["contract"].contents
    assert json.loads(schema.text)["$id"].startswith("rune-council/council-result/")
    jsonschema.validate(run_file(tmp_path, "r1"), json.loads(schema.text))


def test_a_host_cancelling_convene_cancels_the_council(tmp_path: Path) -> None:
    pids = tmp_path / "pids.txt"
    fakes(tmp_path, mode="sleep", sleep_s=120, pid_file=str(pids))
    progress: list[str] = []
    three_running = asyncio.Event()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")
        if sum(" running " in m for m in progress) == 3:
            three_running.set()

    async def scenario() -> tuple[BaseException | None, types.CallToolResult]:
        async with connect(tmp_path, "--yes") as session:
            call = asyncio.ensure_future(
                session.call_tool(
                    "convene",
                    {"question": QUESTION, "id": "c1", "timeout": 300},
                    progress_callback=on_progress,
                )
            )
            await asyncio.wait_for(three_running.wait(), 60)
            for _ in range(200):  # and each voice process has started
                if pids.exists() and len(pids.read_text().splitlines()) == 3:
                    break
                await asyncio.sleep(0.05)
            # The user pressed Esc: the host drops the call, and its client tells the server.
            call.cancel()
            outcome: BaseException | None = None
            try:
                await asyncio.wait_for(call, 30)
            except BaseException as exc:
                outcome = exc
            # The host has its answer at once; the server still serves, and its list says
            # "cancelled" as soon as the council has stopped its voices.
            for _ in range(100):
                after = await session.call_tool("list_runs", {})
                if after.structured_content["runs"][0]["status"] != "running":
                    break
                await asyncio.sleep(0.1)
            return outcome, after

    outcome, after = run(scenario())
    assert isinstance(outcome, asyncio.CancelledError)
    doc = run_file(tmp_path, "c1")
    assert doc["status"] == "cancelled"
    assert [r["status"] for r in after.structured_content["runs"]] == ["cancelled"]

    children = [int(line.split()[1]) for line in pids.read_text().splitlines()]
    assert len(children) == 3
    assert not [p for p in children if running(p)], "a voice outlived the cancel"


def test_without_consent_nothing_runs_until_the_user_allows_it_or_keeps_it_here(
    tmp_path: Path,
) -> None:
    argv_log = tmp_path / "argv.log"
    fakes(tmp_path, argv_log=str(argv_log))
    host = tmp_path / "host.py"
    host.write_text(
        "import sys, json\nsys.stdin.read()\n"
        f"print(json.dumps({{'question_echo': {QUESTION!r}, 'stance': 'NO', 'claims': []}}))\n"
    )
    sub = f"python3 {host}"

    async def scenario() -> dict[str, types.CallToolResult]:
        out: dict[str, types.CallToolResult] = {}
        async with connect(tmp_path, "--subagent-cmd", sub) as session:
            out["raised"] = await session.call_tool(
                "convene", {"question": QUESTION, "id": "x1", "allow_external": True}
            )
            for grant in (
                {"question": QUESTION, "yes": True},
                {"arguments": f"--yes --id x2 {QUESTION!r}"},
            ):
                granted = await session.call_tool("convene", grant)
                assert granted.is_error
                assert "only the operator of this MCP server sets this" in text_of(granted)
            out["asked"] = await session.call_tool("convene", {"question": QUESTION, "id": "s0"})
            out["here"] = await session.call_tool(
                "convene", {"question": QUESTION, "id": "s1", "subagents_only": True}
            )
        return out

    out = run(scenario())
    assert out["raised"].is_error
    assert "allow_external: unknown key 'allow_external'" in text_of(out["raised"])
    assert "AskError, CLI exit code 2" in text_of(out["raised"])
    # Nobody has said: no council, and the one command the user runs to say yes.
    asked = out["asked"]
    assert asked.is_error
    needs = asked.structured_content
    assert needs is not None and needs["needs_consent"] is True and needs["verdict"] is None
    assert set(needs["would_send_to"]) == {"claude", "codex", "gemini"}
    command = needs["command"]
    assert command.endswith(f"council consent --rune-dir {tmp_path / '.rune'}")
    assert command in text_of(asked)
    assert not (tmp_path / ".rune" / "council" / "run-s0.json").exists()
    # Kept here by the user's choice: the operator's subagent answers every slot.
    assert not out["here"].is_error, text_of(out["here"])
    doc = run_file(tmp_path, "s1")
    assert doc["runtime_report"]["consent"].startswith("not used (the user asked")
    assert {v["source"] for v in doc["voices"]} == {"subagent"}
    assert doc["voices_valid"] == 3
    assert not argv_log.exists(), "an external CLI was dispatched without consent"
    assert not list((tmp_path / ".rune" / "council").glob("run-x*.json"))


def _elicitation(answers: list[str], asked: list[str]) -> Any:
    """A host's prompt: each answer is "yes", "no" (declined) or "cancel" (dismissed, or a
    headless host answering by itself)."""

    async def respond(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        answer = answers.pop(0)
        if answer == "cancel":
            return types.ElicitResult(action="cancel")
        if answer == "no":
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"allow": True})

    return respond


@pytest.mark.parametrize("allow", [True, False])
def test_the_host_asks_the_user_once_per_connection(tmp_path: Path, allow: bool) -> None:
    argv_log = tmp_path / "argv.log"
    fakes(tmp_path, argv_log=str(argv_log))
    asked: list[str] = []
    answers = ["yes" if allow else "no"]
    seen: dict[str, types.CallToolResult] = {}

    async def scenario() -> None:
        async with connect(tmp_path, elicitation=_elicitation(answers, asked)) as session:
            for run_id in ("e1", "e2"):
                seen[run_id] = await session.call_tool(
                    "convene", {"question": QUESTION, "id": run_id}
                )
                assert not seen[run_id].is_error, text_of(seen[run_id])

    run(scenario())
    assert len(asked) == 1
    assert "claude" in asked[0] and "codex" in asked[0] and "gemini" in asked[0]
    for run_id in ("e1", "e2"):
        doc = run_file(tmp_path, run_id)
        used = doc["runtime_report"]["used"]
        structured = seen[run_id].structured_content
        assert structured is not None
        if allow:
            assert (
                doc["runtime_report"]["consent"] == "granted (by the user at the MCP host's prompt)"
            )
            assert set(used) == {"claude", "codex", "gemini"}
            assert structured["decorrelation"] == "MULTI_FAMILY"
        else:
            assert doc["runtime_report"]["consent"] == (
                "not granted (the user declined the MCP host's prompt)"
            )
            # A no is an answer: this host's own subagents are handed the slots instead.
            assert structured["needs_answers"] is True and len(structured["prompts"]) == 3
    assert argv_log.exists() is allow


def test_a_prompt_nobody_answered_is_not_taken_as_the_users_no(tmp_path: Path) -> None:
    """Claude Code in print mode declares elicitation and answers "cancel" by itself."""
    argv_log = tmp_path / "argv.log"
    fakes(tmp_path, argv_log=str(argv_log))
    asked: list[str] = []
    answers = ["cancel", "cancel", "yes"]
    seen: list[types.CallToolResult] = []

    async def scenario() -> None:
        async with connect(tmp_path, elicitation=_elicitation(answers, asked)) as session:
            for run_id in ("d1", "d2", "d3"):
                asked_for = {"question": QUESTION, "id": run_id}
                seen.append(await session.call_tool("convene", asked_for))

    run(scenario())
    assert len(asked) == 3  # asked again each time: a dismissal settles nothing
    for result in seen[:2]:
        assert result.is_error and result.structured_content is not None
        assert result.structured_content["needs_consent"] is True
    assert not (tmp_path / ".rune" / "council" / "run-d1.json").exists()
    assert not seen[2].is_error, text_of(seen[2])
    doc = run_file(tmp_path, "d3")
    assert doc["runtime_report"]["consent"] == "granted (by the user at the MCP host's prompt)"
    assert argv_log.exists()


def test_standing_consent_from_the_environment_needs_no_question(tmp_path: Path) -> None:
    fakes(tmp_path)
    asked: list[str] = []
    env = server_env(tmp_path, RUNE_COUNCIL_ALLOW_EXTERNAL="1")

    async def scenario() -> None:
        async with connect(tmp_path, env=env, elicitation=_elicitation([], asked)) as session:
            out = await session.call_tool("convene", {"question": QUESTION, "id": "k1", "n": 2})
            assert not out.is_error, text_of(out)

    run(scenario())
    assert asked == []
    doc = run_file(tmp_path, "k1")
    assert "RUNE_COUNCIL_ALLOW_EXTERNAL=1" in doc["runtime_report"]["consent"]
    assert doc["voices_valid"] == 2


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_host_that_quits_mid_council_leaves_no_voice_running(tmp_path: Path, signum: int) -> None:
    """Hosts stop their servers with SIGINT or SIGTERM, stdin still open."""
    pids = tmp_path / "pids.txt"
    fakes(tmp_path, mode="sleep", sleep_s=120, pid_file=str(pids))
    proc = subprocess.Popen(
        [sys.executable, "-m", "rune_council.cli", "council", "mcp", "--yes"],
        cwd=tmp_path,
        env=server_env(tmp_path),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None
    init = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    }
    for message in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "convene", "arguments": {"question": QUESTION, "id": "q1"}},
        },
    ):
        proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()
    try:
        for _ in range(400):
            if pids.exists() and len(pids.read_text().splitlines()) == 3:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the voices never started")
        started = time.monotonic()
        proc.send_signal(signum)
        code = proc.wait(timeout=20)
        took = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdin.close()
    assert code == 128 + signum and took < 15
    assert run_file(tmp_path, "q1")["status"] == "cancelled"
    children = [int(line.split()[1]) for line in pids.read_text().splitlines()]
    # A killed voice may stay a zombie a moment, until init reaps the server's orphans.
    assert not [p for p in children if running(p)], "a voice outlived the server"
