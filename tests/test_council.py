"""The whole council against fake CLIs that run as real subprocesses under their real names."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from pathlib import Path
from typing import Any

import jsonschema
import psutil
import pytest

from rune_council import (
    CouncilOptions,
    FunctionRuntime,
    PerspectiveRequest,
    aconvene,
    convene,
)
from rune_council.core.contract import CouncilResult
from tests.fakes.bin import install_fake, path_with
from tests.helpers import (
    PLAN,
    QUESTION,
    ROLLBACK,
    SHARDS,
    UNDO,
    answer,
    claim,
    council_result_schema,
)

SCHEMA = council_result_schema()
Q = QUESTION


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Any]:
    (tmp_path / "plan.md").write_text(PLAN, encoding="utf-8")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    return {
        "tmp": tmp_path,
        "bin": bin_dir,
        # Consent for external dispatch, as a non-interactive caller must give it.
        "env": {
            "PATH": path_with(bin_dir),
            "HOME": str(tmp_path),
            "RUNE_COUNCIL_ALLOW_EXTERNAL": "1",
        },
        "rune": tmp_path / ".rune",
    }


def request(run_id: str = "r1", **extra: Any) -> dict[str, Any]:
    return {"id": run_id, "question": Q, "artifact": {"name": "plan.md", "text": PLAN}, **extra}


def three_honest_clis(bin_dir: Path, **codex: Any) -> None:
    install_fake(bin_dir, "claude", answer=answer(Q, "NO, not yet", [ROLLBACK]))
    install_fake(bin_dir, "codex", answer=answer(Q, "NO", [UNDO]), **codex)
    install_fake(bin_dir, "gemini", answer=answer(Q, "YES", [SHARDS]))


def test_three_families_reach_verified_consensus_and_keep_dissent(world: dict[str, Any]) -> None:
    three_honest_clis(world["bin"])
    result = convene(request(), CouncilOptions(rune_dir=world["rune"], env=world["env"]))
    assert result.status == "complete"
    assert result.decorrelation == "MULTI_FAMILY"
    assert result.distinct_families == ["anthropic", "google", "openai"]
    [consensus] = result.agreement.consensus_claims
    assert consensus.families == ["anthropic", "openai"]
    assert {d.label for d in result.agreement.dissent} >= {"single-voice", "disagreement"}
    assert [v.slot_role for v in result.voices] == ["standard", "perturbation", "devils_advocate"]
    on_disk = json.loads((world["rune"] / "council" / "run-r1.json").read_text())
    jsonschema.validate(on_disk, SCHEMA)
    assert on_disk["decorrelation"] == "MULTI_FAMILY"
    assert all(v["status"] in ("complete", "dropped") for v in on_disk["voices"])
    assert on_disk["voices"][0]["raw"]["text"].startswith("Here is my answer")


def test_failed_cli_falls_back_to_the_subagent_and_is_not_counted(world: dict[str, Any]) -> None:
    three_honest_clis(world["bin"], mode="crash")
    calls: list[str] = []

    def host(prompt: str) -> str:
        calls.append(prompt)
        return answer(Q, "NO", [UNDO])

    result = convene(
        request(),
        CouncilOptions(rune_dir=world["rune"], env=world["env"], subagent=host),
    )
    codex = result.voices[1]
    assert codex.is_fallback and codex.status == "complete" and codex.runtime == "internal"
    assert [a.outcome for a in codex.attempts] == ["exit_nonzero", "ok"]
    assert codex.attempts[0].runtime == "codex"
    assert result.runtime_report.degraded_to_subagent == ["v2"]
    assert codex.persona and codex.persona in calls[0]
    # Only claude and gemini count; the fallback's agreement with claude is not consensus.
    assert result.distinct_families == ["anthropic", "google"]
    assert result.agreement.consensus_claims == []


def test_timeout_kills_the_voice_and_without_a_subagent_the_slot_is_dropped(
    world: dict[str, Any],
) -> None:
    pid_file = world["tmp"] / "pids"
    three_honest_clis(world["bin"], mode="fork_grandchild", sleep_s=60, pid_file=pid_file)
    started = time.monotonic()
    result = convene(
        request(budget={"per_voice_timeout_s": 1.5}),
        CouncilOptions(rune_dir=world["rune"], env=world["env"]),
    )
    assert time.monotonic() - started < 20
    codex = result.voices[1]
    assert codex.status == "dropped" and codex.dropped_by == "council.dispatch"
    assert codex.attempts[0].outcome == "timeout"
    assert "no subagent configured" in (codex.drop_reason or "")
    assert [d.voice_id for d in result.voices_dropped] == ["v2"]
    pids = [int(line.split()[1]) for line in pid_file.read_text().splitlines()]
    assert len(pids) == 2
    assert not [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]


def test_malformed_and_off_topic_voices_are_dropped_by_the_gate(world: dict[str, Any]) -> None:
    install_fake(world["bin"], "claude", answer=answer(Q, "NO", [ROLLBACK]))
    install_fake(world["bin"], "codex", answer="I would not shard. Hope that helps!")
    install_fake(world["bin"], "gemini", answer=answer("Is Python faster than Go?", "NO", []))
    result = convene(request(), CouncilOptions(rune_dir=world["rune"], env=world["env"]))
    reasons = {d.voice_id: d.reason for d in result.voices_dropped}
    assert reasons["v2"].startswith("malformed") and reasons["v3"].startswith("off-topic")
    assert all(d.dropped_by == "council.gate" for d in result.voices_dropped)
    assert result.voices_valid == 1
    assert result.decorrelation == "NO_DECORRELATION"
    assert result.agreement.consensus_claims == []


def test_no_cli_and_no_subagent_gathers_nothing_but_records_why(world: dict[str, Any]) -> None:
    result = convene(request(n=2), CouncilOptions(rune_dir=world["rune"], env=world["env"]))
    assert result.voices_valid == 0 and result.decorrelation == "NO_DECORRELATION"
    assert len(result.voices_dropped) == 2
    assert all("no subagent configured" in d.reason for d in result.voices_dropped)


def test_subagent_only_council_is_honest_about_no_decorrelation(world: dict[str, Any]) -> None:
    result = convene(
        request(),
        CouncilOptions(
            rune_dir=world["rune"],
            env=world["env"],
            subagent=lambda prompt: answer(Q, "NO", [ROLLBACK]),
        ),
    )
    assert result.voices_valid == 3
    assert {v.source for v in result.voices} == {"subagent"}
    assert not any(v.is_fallback for v in result.voices)
    assert result.decorrelation == "NO_DECORRELATION"
    assert result.agreement.consensus_claims == []


def test_the_prompt_never_appears_in_a_childs_argv(world: dict[str, Any]) -> None:
    marker = "zebra-quartz-4417"
    question = f"{Q} ({marker})"
    pid_file = world["tmp"] / "pids"
    for name in ("claude", "codex", "gemini"):
        install_fake(
            world["bin"], name, answer=answer(question, "NO", []), sleep_s=1.5, pid_file=pid_file
        )
    seen: list[str] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            if pid_file.exists():
                for line in pid_file.read_text().splitlines():
                    with contextlib.suppress(OSError):
                        seen.append(Path(f"/proc/{line.split()[1]}/cmdline").read_text())
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result = convene(
            {"id": "argv", "question": question},
            CouncilOptions(rune_dir=world["rune"], env=world["env"]),
        )
    finally:
        stop.set()
        watcher.join()
    assert result.voices_valid == 3
    assert seen, "never saw a child's command line"
    assert not [c for c in seen if marker in c]


def test_secrets_never_reach_the_run_file(world: dict[str, Any]) -> None:
    secret = "sk-ant-planted-5f0c1d9e8b7a"
    leaky = answer(Q, "NO", [claim(f"my key is {secret}")])
    install_fake(world["bin"], "claude", answer=leaky)
    install_fake(world["bin"], "codex", answer=leaky)
    env = {**world["env"], "ANTHROPIC_API_KEY": secret, "OPENAI_API_KEY": secret}
    result = convene(request(n=2), CouncilOptions(rune_dir=world["rune"], env=env))
    text = (world["rune"] / "council" / "run-r1.json").read_text()
    assert secret not in text
    assert secret not in result.model_dump_json()
    assert "[redacted]" in text


def test_a_concurrent_reader_sees_every_transition_in_order_and_never_a_torn_file(
    world: dict[str, Any],
) -> None:
    install_fake(world["bin"], "claude", answer=answer(Q, "NO", [ROLLBACK]), sleep_s=0.3)
    install_fake(world["bin"], "codex", answer=answer(Q, "NO", [UNDO]), sleep_s=0.8)
    install_fake(world["bin"], "gemini", answer="not json at all", sleep_s=1.2)
    path = world["rune"] / "council" / "run-live.json"
    snapshots: list[dict[str, Any]] = []
    errors: list[str] = []
    done = threading.Event()

    validator = jsonschema.Draft202012Validator(SCHEMA)

    def reader() -> None:
        last = b""
        while True:
            finished = done.is_set()  # one more read after the writer is done
            try:
                raw = path.read_bytes()
            except FileNotFoundError:
                if finished:
                    return
                continue
            if raw != last:
                last = raw
                try:
                    doc = json.loads(raw)
                    validator.validate(doc)
                except (ValueError, jsonschema.ValidationError) as exc:
                    errors.append(str(exc)[:200])
                    continue
                snapshots.append(doc)
            if finished:
                return
            time.sleep(0.002)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        convene(request("live"), CouncilOptions(rune_dir=world["rune"], env=world["env"]))
    finally:
        done.set()
        thread.join()
    assert not errors
    first, last = snapshots[0], snapshots[-1]
    order = {"queued": 0, "running": 1, "complete": 2, "dropped": 3}
    assert first["status"] == "running"
    # The skeleton (every slot queued) is replaced within a millisecond by the first
    # dispatch, so a busy machine may not schedule the reader in between; what it must see
    # first is a run where no voice has finished (the quickest takes 0.3 s).
    assert {v["status"] for v in first["voices"]} <= {"queued", "running"}
    assert last["status"] == "complete"
    for index in range(3):
        states = [s["voices"][index]["status"] for s in snapshots]
        ranks = [order[s] for s in states]
        assert ranks == sorted(ranks), states
        assert "running" in states
    # Polling can miss a state that lasts microseconds; the event log in the file cannot.
    gemini_events = [e["status"] for e in last["events"] if e["voice_id"] == "v3"]
    assert gemini_events[-2:] == ["complete", "dropped"]
    assert snapshots[-1]["voices"][2]["status"] == "dropped"
    seqs = [e["seq"] for e in last["events"]]
    assert seqs == sorted(seqs) and len(seqs) >= 8


def test_cancelling_a_run_kills_children_and_records_what_finished(
    world: dict[str, Any],
) -> None:
    pid_file = world["tmp"] / "pids"
    install_fake(world["bin"], "claude", answer=answer(Q, "NO", [ROLLBACK]))
    install_fake(
        world["bin"], "codex", answer=answer(Q, "NO", []), mode="ignore_sigterm", pid_file=pid_file
    )

    async def scenario() -> None:
        task = asyncio.ensure_future(
            aconvene(request("cx", n=2), CouncilOptions(rune_dir=world["rune"], env=world["env"]))
        )
        await asyncio.sleep(1.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    doc = CouncilResult.model_validate_json(
        (world["rune"] / "council" / "run-cx.json").read_bytes()
    )
    assert doc.status == "cancelled"
    assert doc.voices[0].status == "complete"
    assert doc.voices[1].status == "dropped" and "cancelled" in (doc.voices[1].drop_reason or "")
    pid = int(pid_file.read_text().split()[1])
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"


def test_reusing_a_run_id_is_refused_and_keeps_the_first_run(world: dict[str, Any]) -> None:
    from rune_council import RequestError

    convene(
        request("same"),
        CouncilOptions(
            rune_dir=world["rune"],
            env=world["env"],
            subagent=lambda p: answer(Q, "NO", []),
        ),
    )
    before = (world["rune"] / "council" / "run-same.json").read_bytes()
    with pytest.raises(RequestError, match="already used"):
        convene(request("same"), CouncilOptions(rune_dir=world["rune"], env=world["env"]))
    assert (world["rune"] / "council" / "run-same.json").read_bytes() == before


def test_a_symlinked_run_file_is_not_followed(world: dict[str, Any]) -> None:
    from rune_council import RunFileError

    target = world["tmp"] / "elsewhere.json"
    target.write_text("precious")
    council_dir = world["rune"] / "council"
    council_dir.mkdir(parents=True)
    (council_dir / "run-link.json").symlink_to(target)
    with pytest.raises(RunFileError, match="symlink"):
        convene(
            request("link"),
            CouncilOptions(rune_dir=world["rune"], env=world["env"], overwrite=True),
        )
    assert target.read_text() == "precious"


def test_caller_supplied_runtimes_replace_detection(world: dict[str, Any]) -> None:
    voices = [
        FunctionRuntime(
            lambda p: answer(Q, "NO", [ROLLBACK]),
            name="alpha",
            model_family="mistral",
            family_confidence="confirmed",
            source="external-cli",
        ),
        FunctionRuntime(
            lambda p: answer(Q, "NO", [UNDO]),
            name="beta",
            model_family="meta",
            family_confidence="confirmed",
            source="external-cli",
        ),
    ]
    result = asyncio.run(
        aconvene(
            PerspectiveRequest.model_validate(request(n=2)),
            CouncilOptions(runtimes=voices, rune_dir=world["rune"]),
        )
    )
    assert result.decorrelation == "MULTI_FAMILY"
    assert [c.families for c in result.agreement.consensus_claims] == [["meta", "mistral"]]
