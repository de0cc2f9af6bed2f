"""The host flow over MCP, with the SDK's own client and the server a real subprocess: consent
that only the user can give, and the host's own subagents taking the slots no external voice
may take, their answers bound to the run, the slot and a one-time token.

Voices are the fake CLIs of tests/fakes run as real processes; the "subagents" are this test
answering each prompt the server hands out, as a host's subagent would from the prompt alone.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from mcp import types

from tests.fakes.bin import install_fake
from tests.helpers import PLAN, QUESTION, ROLLBACK, SHARDS, UNDO, answer
from tests.host_flow import consent_on_a_terminal, subagent_reply
from tests.mcp_client import connect, server_env, text_of

pytestmark = pytest.mark.timeout(180)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def run_file(tmp: Path, run_id: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(
        (tmp / ".rune" / "council" / f"run-{run_id}.json").read_text(encoding="utf-8")
    )
    return doc


def no_clis(tmp: Path) -> None:
    """A fresh project on a machine with no AI CLI: nothing external may answer."""
    (tmp / "bin").mkdir(parents=True, exist_ok=True)
    (tmp / "plan.md").write_text(PLAN, encoding="utf-8")


def three_clis(tmp: Path, **codex: Any) -> None:
    install_fake(tmp / "bin", "claude", answer=answer(QUESTION, "NO", [ROLLBACK]))
    install_fake(tmp / "bin", "codex", answer=answer(QUESTION, "NO", [UNDO]), **codex)
    install_fake(tmp / "bin", "gemini", answer=answer(QUESTION, "YES", [SHARDS]))
    (tmp / "plan.md").write_text(PLAN, encoding="utf-8")


def answers_for(work: dict[str, Any], reply: Any = subagent_reply) -> list[dict[str, str]]:
    return [
        {"slot": p["slot"], "token": p["token"], "answer": reply(p["prompt"])}
        for p in work["prompts"]
    ]


def waiting(result: types.CallToolResult) -> dict[str, Any]:
    """The structured part of a "needs answers" reply, checked to be one."""
    assert not result.is_error, text_of(result)
    work = result.structured_content
    assert work is not None and work.get("needs_answers") is True, text_of(result)[:2000]
    assert work["verdict"] is None and work["prompts"]
    return work


def refused(result: types.CallToolResult, fragment: str) -> None:
    text = text_of(result)
    assert result.is_error, text
    assert fragment in text, text
    assert text.startswith("rune council: ") and "Traceback" not in text


# --------------------------------------------------------------------------- the subagent path


def test_with_no_external_voice_the_hosts_subagents_take_every_slot(tmp_path: Path) -> None:
    no_clis(tmp_path)

    async def scenario() -> tuple[dict[str, Any], types.CallToolResult]:
        async with connect(tmp_path) as session:
            work = waiting(
                await session.call_tool(
                    "convene",
                    {"question": QUESTION, "artifact": "plan.md", "mode": "critique", "id": "h1"},
                )
            )
            done = await session.call_tool(
                "submit_answers", {"run_id": work["run_id"], "answers": answers_for(work)}
            )
            return work, done

    work, done = run(scenario())
    assert work["run_id"] == "h1"
    assert [p["slot"] for p in work["prompts"]] == ["v1", "v2", "v3"]
    assert [p["role"] for p in work["prompts"]] == ["standard", "perturbation", "devils_advocate"]
    # Each prompt is the whole voice prompt: the question and the artifact, nothing else.
    for prompt in work["prompts"]:
        assert QUESTION in prompt["prompt"] and "No rollback step is defined." in prompt["prompt"]
        assert prompt["expires_in_s"] > 100  # the default per-voice timeout, 180 s
    assert not done.is_error, text_of(done)
    result = done.structured_content
    assert result is not None and result["voices_valid"] == 3
    doc = run_file(tmp_path, "h1")
    assert doc["status"] == "complete" and doc["decorrelation"] == "NO_DECORRELATION"
    for voice in doc["voices"]:
        # The host's model, of no family the council can confirm: never a second family.
        assert voice["source"] == "subagent" and voice["runtime"] == "host-subagent"
        assert voice["model_family"] == "unknown" and voice["status"] == "complete"
        assert voice["validity"] == {"well_formed": "pass", "on_topic": "pass"}
    # The tokens lived in the server's memory only.
    raw = (tmp_path / ".rune" / "council" / "run-h1.json").read_text(encoding="utf-8")
    assert not any(p["token"] in raw for p in work["prompts"])


def test_a_slot_a_failed_cli_left_goes_to_the_host_and_is_stamped_fallback(
    tmp_path: Path,
) -> None:
    three_clis(tmp_path, mode="crash")

    async def scenario() -> tuple[dict[str, Any], types.CallToolResult]:
        async with connect(tmp_path, "--yes") as session:
            work = waiting(await session.call_tool("convene", {"question": QUESTION, "id": "f1"}))
            done = await session.call_tool(
                "submit_answers", {"run_id": "f1", "answers": answers_for(work)}
            )
            return work, done

    work, done = run(scenario())
    assert [p["slot"] for p in work["prompts"]] == ["v2"]  # codex's slot only
    assert not done.is_error, text_of(done)
    doc = run_file(tmp_path, "f1")
    by_id = {v["id"]: v for v in doc["voices"]}
    taken = by_id["v2"]
    assert taken["is_fallback"] is True and taken["runtime"] == "host-subagent"
    assert taken["status"] == "complete" and taken["source"] == "subagent"
    assert taken["attempts"][0]["runtime"] == "codex"  # the failure that handed it over
    assert doc["runtime_report"]["degraded_to_subagent"] == ["v2"]
    # claude and gemini make it MULTI_FAMILY; the host's answer adds no family to that.
    assert doc["decorrelation"] == "MULTI_FAMILY"


def test_answers_are_gated_like_any_voice(tmp_path: Path) -> None:
    no_clis(tmp_path)
    replies = iter(["not an answer at all", answer("Another question?", "NO", []), ""])

    async def scenario() -> types.CallToolResult:
        async with connect(tmp_path) as session:
            work = waiting(await session.call_tool("convene", {"question": QUESTION, "id": "g1"}))
            return await session.call_tool(
                "submit_answers",
                {"run_id": "g1", "answers": answers_for(work, lambda _: next(replies))},
            )

    done = run(scenario())
    # No voice left: no verdict, and the tool says so as an error, not as a result.
    assert done.is_error
    assert "NO VERDICT" in text_of(done)
    assert done.structured_content is not None and done.structured_content["voices_valid"] == 0
    voices = {v["id"]: v for v in run_file(tmp_path, "g1")["voices"]}
    assert voices["v1"]["dropped_by"] == "council.gate"  # malformed
    assert voices["v2"]["dropped_by"] == "council.gate"  # off topic
    assert voices["v2"]["validity"]["on_topic"] == "fail"
    assert voices["v3"]["dropped_by"] == "council.dispatch"  # the host gave it up
    assert "gave this slot up" in voices["v3"]["drop_reason"]


def test_later_rounds_hand_the_host_their_prompts_too(tmp_path: Path) -> None:
    no_clis(tmp_path)
    rounds: list[dict[str, Any]] = []

    async def scenario() -> types.CallToolResult:
        async with connect(tmp_path) as session:
            result = await session.call_tool(
                "convene",
                {
                    "question": QUESTION,
                    "id": "r2",
                    "n": 2,
                    "multi_round": {"max_rounds": 2, "convergence_threshold": 1},
                },
            )
            while result.structured_content and result.structured_content.get("needs_answers"):
                work = waiting(result)
                rounds.append(work)
                result = await session.call_tool(
                    "submit_answers", {"run_id": "r2", "answers": answers_for(work)}
                )
            return result

    done = run(scenario())
    assert not done.is_error, text_of(done)
    handed = [[(p["slot"], p["role"]) for p in w["prompts"]] for w in rounds]
    # Round 1's answers, each member's ranking of the others, round 2's answers, rankings.
    assert handed == [
        [("v1", "standard"), ("v2", "perturbation")],
        [("ballot.1", "ballot"), ("ballot.2", "ballot")],
        [("v1.2", "standard"), ("v2.2", "perturbation")],
        [("ballot.3", "ballot"), ("ballot.4", "ballot")],
    ]
    assert "Reply with one RANK line" in rounds[1]["prompts"][0]["prompt"]
    doc = run_file(tmp_path, "r2")
    assert len(doc["deliberation"]["rounds"]) == 2 and doc["status"] == "complete"
    assert doc["voices_valid"] == 2


def test_answers_given_in_calls_side_by_side_end_in_one_verdict(tmp_path: Path) -> None:
    no_clis(tmp_path)

    async def scenario() -> list[types.CallToolResult]:
        async with connect(tmp_path) as session:
            work = waiting(await session.call_tool("convene", {"question": QUESTION, "id": "p1"}))
            calls = [
                session.call_tool("submit_answers", {"run_id": "p1", "answers": [one]})
                for one in answers_for(work)
            ]
            return list(await asyncio.gather(*calls))

    out = run(scenario())
    assert not any(r.is_error for r in out), [text_of(r) for r in out]
    verdicts = [r for r in out if r.structured_content and "decorrelation" in r.structured_content]
    assert len(verdicts) == 1  # the call that completed the set waited for the council
    for other in out:
        if other is not verdicts[0]:
            assert other.structured_content is not None
            assert other.structured_content["needs_answers"] is True
            assert text_of(other).startswith("Taken: v")
    assert run_file(tmp_path, "p1")["voices_valid"] == 3


# --------------------------------------------------------------------------- token binding


def test_an_answer_is_taken_only_with_its_runs_slot_and_token_once(tmp_path: Path) -> None:
    no_clis(tmp_path)

    async def scenario() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with connect(tmp_path) as session:
            a = waiting(await session.call_tool("convene", {"question": QUESTION, "id": "a"}))
            b = waiting(await session.call_tool("convene", {"question": QUESTION, "id": "b"}))
            a1, b1 = answers_for(a)[0], answers_for(b)[0]

            async def submit(run_id: str, *answers: dict[str, str]) -> types.CallToolResult:
                return await session.call_tool(
                    "submit_answers", {"run_id": run_id, "answers": list(answers)}
                )

            out["wrong token"] = await submit("a", {**a1, "token": "x" * len(a1["token"])})
            out["other run's token"] = await submit("a", {**a1, "token": b1["token"]})
            out["for another run"] = await submit("b", a1)
            out["wrong slot"] = await submit("a", {**a1, "slot": "v9"})
            out["unknown run"] = await submit("c", a1)
            out["twice in a call"] = await submit("a", a1, a1)
            # One refusal refuses the whole call: the good answer beside it is not taken.
            out["mixed"] = await submit("a", a1, {**answers_for(a)[1], "token": b1["token"]})
            out["taken"] = await submit("a", a1)
            out["reused"] = await submit("a", a1)
            out["the rest"] = await submit("a", *answers_for(a)[1:])
            out["after the end"] = await submit("a", answers_for(a)[2])
            out["b still fine"] = await submit("b", *answers_for(b))
        return out

    out = run(scenario())
    refused(out["wrong token"], "the token given for slot v1 of run a is not its")
    refused(out["other run's token"], "the token given for slot v1 of run a is not its")
    refused(out["for another run"], "the token given for slot v1 of run b is not its")
    refused(out["wrong slot"], "run a is not waiting for slot v9 (waiting for: v1, v2, v3)")
    refused(out["unknown run"], "no council run 'c' is waiting for subagent answers")
    refused(out["twice in a call"], "slot v1 is answered twice in one call")
    refused(out["mixed"], "the token given for slot v2 of run a is not its")
    assert text_of(out["taken"]).startswith("Taken: v1. ")
    assert [p["slot"] for p in waiting(out["taken"])["prompts"]] == ["v2", "v3"]
    refused(out["reused"], "slot v1 of run a was answered already")
    assert not out["the rest"].is_error, text_of(out["the rest"])
    refused(out["after the end"], "no council run 'a' is waiting for subagent answers")
    assert not out["b still fine"].is_error, text_of(out["b still fine"])
    assert run_file(tmp_path, "a")["voices_valid"] == 3
    assert run_file(tmp_path, "b")["voices_valid"] == 3


def test_a_token_expires_with_its_slot(tmp_path: Path) -> None:
    no_clis(tmp_path)

    async def scenario() -> tuple[dict[str, Any], types.CallToolResult]:
        async with connect(tmp_path) as session:
            work = waiting(
                await session.call_tool(
                    "convene", {"question": QUESTION, "id": "t1", "n": 2, "timeout": 2}
                )
            )
            for _ in range(100):  # the council stops waiting, drops both slots and ends
                listed = await session.call_tool("list_runs", {})
                if listed.structured_content["runs"][0]["status"] != "running":
                    break
                await asyncio.sleep(0.1)
            late = await session.call_tool(
                "submit_answers", {"run_id": "t1", "answers": answers_for(work)[:1]}
            )
            return work, late

    work, late = run(scenario())
    assert work["prompts"][0]["expires_in_s"] <= 2
    refused(late, "no council run 't1' is waiting for subagent answers")
    doc = run_file(tmp_path, "t1")
    assert doc["voices_valid"] == 0
    assert all("gave no answer within 2 s" in v["drop_reason"] for v in doc["voices"])


# --------------------------------------------------------------------------- the consent path


def test_consent_comes_from_the_users_terminal_then_the_next_call_gets_voices(
    tmp_path: Path,
) -> None:
    argv_log = tmp_path / "argv.log"
    three_clis(tmp_path, argv_log=str(argv_log))
    env = server_env(tmp_path)

    async def ask() -> types.CallToolResult:
        async with connect(tmp_path, env=env) as session:
            return await session.call_tool("convene", {"question": QUESTION, "id": "c1"})

    first = run(ask())
    assert first.is_error
    needs = first.structured_content
    assert needs is not None and needs["needs_consent"] is True
    assert needs["verdict"] is None and "decorrelation" not in needs
    assert not argv_log.exists() and not (tmp_path / ".rune" / "council" / "run-c1.json").exists()

    # The command the tool named, run the way the user runs it: on their terminal, saying y.
    words = needs["command"].split()
    assert words[-4:] == ["council", "consent", "--rune-dir", str(tmp_path / ".rune")]
    code, shown = consent_on_a_terminal(tmp_path, env, "y", *words[-2:])
    assert code == 0, shown
    assert "claude" in shown and "codex" in shown and "gemini" in shown
    assert "allowed for" in shown

    second = run(ask())
    assert not second.is_error, text_of(second)
    doc = run_file(tmp_path, "c1")
    assert doc["decorrelation"] == "MULTI_FAMILY" and doc["voices_valid"] == 3
    consent = doc["runtime_report"]["consent"]
    assert consent.startswith("granted (the user's yes for this project on ")
    assert argv_log.exists()


def test_the_consent_command_takes_no_answer_but_the_users(tmp_path: Path) -> None:
    import subprocess
    import sys

    three_clis(tmp_path)
    env = server_env(tmp_path)
    rune_dir = tmp_path / ".rune"
    # An agent's shell tool: no terminal, or a "y" piped in. Neither can say yes.
    for given in (subprocess.DEVNULL, None):
        out = subprocess.run(
            [sys.executable, "-m", "rune_council.cli", "council", "consent"],
            cwd=tmp_path,
            env=env,
            stdin=given,
            input="y\n" if given is None else None,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 2 and "run this there yourself" in out.stderr
    assert not (rune_dir / "consent.json").exists()
    # The user's no changes nothing either.
    code, shown = consent_on_a_terminal(tmp_path, env, "n")
    assert code == 1 and "nothing was changed" in shown, shown
    assert not (rune_dir / "consent.json").exists()
    # A standing no in the environment wins over a yes here, and it says so.
    code, shown = consent_on_a_terminal(tmp_path, {**env, "RUNE_COUNCIL_ALLOW_EXTERNAL": "0"}, "y")
    assert code == 2 and "RUNE_COUNCIL_ALLOW_EXTERNAL=0" in shown, shown
    assert not (rune_dir / "consent.json").exists()


@pytest.mark.parametrize(
    "capabilities",
    [{}, {"elicitation": {"url": {}}}],
    ids=["no elicitation", "url elicitation only"],
)
def test_a_host_that_cannot_show_a_form_is_never_sent_one(
    tmp_path: Path, capabilities: dict[str, Any]
) -> None:
    """Raw JSON-RPC, so every message the server sends is seen: no elicitation request
    reaches a client that did not declare form elicitation; the call says needs-consent."""
    import subprocess
    import sys

    three_clis(tmp_path)
    init = {
        "protocolVersion": "2025-11-25",
        "capabilities": capabilities,
        "clientInfo": {"name": "t", "version": "0"},
    }
    call = {"name": "convene", "arguments": {"question": QUESTION, "id": "e0"}}
    frames = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call},
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "rune_council.cli", "council", "mcp"],
        cwd=tmp_path,
        env=server_env(tmp_path),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        for frame in frames:
            proc.stdin.write(json.dumps(frame) + "\n")
        proc.stdin.flush()
        seen: list[dict[str, Any]] = []
        while not any(m.get("id") == 2 and "result" in m for m in seen):
            line = proc.stdout.readline()
            assert line, "the server closed its output before answering"
            seen.append(json.loads(line))
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert not [m for m in seen if m.get("method") == "elicitation/create"]
    (answered,) = [m["result"] for m in seen if m.get("id") == 2]
    assert answered["isError"] is True
    assert answered["structuredContent"]["needs_consent"] is True
