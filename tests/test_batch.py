"""Batches through the library door: results, resume, retry, cancel, bad input, bounds."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from rune_council import runlock
from rune_council.batch import BadItems, Batch, BatchOptions, batch_door, read_rows, run_batch
from rune_council.batch.items import MAX_LINE_BYTES
from rune_council.core.runtime import RuntimeReply
from rune_council.council.intake import AskDefaults, Door
from rune_council.runs import load
from rune_council.testing import AnswerEcho, ScriptedRuntime, claim_on

PLAN = "1. Drain the old nodes.\n2. Switch traffic in one step.\n3. No rollback step is defined.\n"
RISK = claim_on(PLAN, 3, "The rollout has no rollback step", name="plan.md", severity="MUST")


def voices(delay_s: float = 0.0) -> list[ScriptedRuntime]:
    """Three families that agree on one anchored claim, for any question."""
    return [
        ScriptedRuntime(AnswerEcho("NO", (RISK,)), family=f, delay_s=delay_s, name=f"{f}-cli")
        for f in ("anthropic", "openai", "google")
    ]


def door(tmp: Path, **changes: Any) -> Door:
    """The batch's door: its lines are not the operator, their artifacts resolve under the
    items file's folder."""
    return batch_door(rune_dir=tmp / ".rune", env={"PATH": os.defpath, "HOME": str(tmp)}, **changes)


def options(
    tmp: Path, runtimes: list[Any], door_changes: dict[str, Any] | None = None, **extra: Any
) -> BatchOptions:
    return BatchOptions(
        door=door(tmp, **(door_changes or {})),
        runtimes=runtimes,
        results=tmp / "results.jsonl",
        **extra,
    )


def write_items(path: Path, rows: list[dict[str, Any] | str]) -> Path:
    (path.parent / "plan.md").write_text(PLAN, encoding="utf-8")
    lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def questions(k: int) -> list[dict[str, Any]]:
    return [
        {"id": f"q{i}", "question": f"Should service {i} ship on Friday?", "artifact": "plan.md"}
        for i in range(k)
    ]


def run(path: Path, opts: BatchOptions) -> Any:
    return asyncio.run(run_batch(path, opts))


def asked(runtimes: list[ScriptedRuntime]) -> int:
    return sum(len(r.prompts) for r in runtimes)


def test_every_item_gets_a_run_file_and_a_row_matching_it(tmp_path: Path) -> None:
    items = write_items(tmp_path / "items.jsonl", questions(5))
    tally = run(items, options(tmp_path, voices(), concurrency=2))
    rows = read_rows(tmp_path / "results.jsonl")
    assert sorted(r.id for r in rows if r.id) == [f"q{i}" for i in range(5)]
    assert tally.by_status["complete"] == 5 and tally.all_complete
    for row in rows:
        doc = json.loads(Path(row.run_file or "").read_text())
        assert doc["status"] == "complete" and doc["id"] == row.id
        assert row.stamp == doc["decorrelation"] == "MULTI_FAMILY"
        assert row.consensus == len(doc["agreement"]["consensus_claims"]) >= 1
        assert row.needs_decision == doc["needs_decision"]
        assert row.duration_s is not None and row.duration_s >= 0
        assert doc["question"] == f"Should service {row.id[1:]} ship on Friday?"


def test_a_rerun_keeps_finished_items_and_asks_no_voice(tmp_path: Path) -> None:
    items = write_items(tmp_path / "items.jsonl", questions(3))
    runtimes = voices()
    run(items, options(tmp_path, runtimes))
    before = asked(runtimes)
    tally = run(items, options(tmp_path, runtimes))
    assert asked(runtimes) == before
    rows = read_rows(tmp_path / "results.jsonl")
    assert len(rows) == 3 and all(r.status == "complete" and r.resumed for r in rows)
    assert tally.resumed == 3


def test_an_item_changed_since_its_run_runs_again(tmp_path: Path) -> None:
    items = write_items(tmp_path / "items.jsonl", questions(2))
    runtimes = voices()
    run(items, options(tmp_path, runtimes))
    changed = questions(2)
    changed[1]["question"] = "Should service 1 ship on Monday instead?"
    write_items(items, changed)
    run(items, options(tmp_path, runtimes))
    rows = {r.id: r for r in read_rows(tmp_path / "results.jsonl")}
    assert rows["q0"].resumed and not rows["q1"].resumed
    doc = json.loads((tmp_path / ".rune" / "council" / "run-q1.json").read_text())
    assert doc["question"] == "Should service 1 ship on Monday instead?"


class Flaky(ScriptedRuntime):
    """Raises (the council fails) while ``broken`` is set."""

    broken = True

    async def ask(self, prompt: str, **kw: Any) -> RuntimeReply:
        if Flaky.broken and "service 1 " in prompt:
            raise RuntimeError("the runtime broke")
        return await super().ask(prompt, **kw)


def test_failed_items_stay_failed_until_retry_failed(tmp_path: Path) -> None:
    items = write_items(tmp_path / "items.jsonl", questions(3))
    runtimes = [
        Flaky(AnswerEcho("NO", (RISK,)), family="anthropic", name="flaky"),
        *voices()[1:],
    ]
    Flaky.broken = True
    tally = run(items, options(tmp_path, runtimes))
    assert tally.by_status == {"complete": 2, "failed": 1}
    failed = next(r for r in read_rows(tmp_path / "results.jsonl") if r.status == "failed")
    assert failed.id == "q1" and "the runtime broke" in (failed.error or "")
    assert json.loads(Path(failed.run_file or "").read_text())["status"] == "failed"

    Flaky.broken = False
    before = asked(runtimes)
    run(items, options(tmp_path, runtimes))
    rows = {r.id: r for r in read_rows(tmp_path / "results.jsonl")}
    assert rows["q1"].status == "failed" and rows["q1"].resumed
    assert asked(runtimes) == before  # nothing ran: the failure was kept

    tally = run(items, options(tmp_path, runtimes, retry_failed=True))
    rows = {r.id: r for r in read_rows(tmp_path / "results.jsonl")}
    assert rows["q1"].status == "complete" and not rows["q1"].resumed
    assert rows["q0"].resumed and tally.all_complete


def test_a_forged_run_file_does_not_count_as_done(tmp_path: Path) -> None:
    items = write_items(tmp_path / "items.jsonl", questions(1))
    runtimes = voices()
    run(items, options(tmp_path, runtimes))
    run_file = tmp_path / ".rune" / "council" / "run-q0.json"
    doc = json.loads(run_file.read_text())
    doc["needs_decision"] = not doc["needs_decision"]
    run_file.write_text(json.dumps(doc))
    run(items, options(tmp_path, runtimes))
    row = read_rows(tmp_path / "results.jsonl")[0]
    assert row.status == "failed" and "does not verify" in (row.error or "")
    run(items, options(tmp_path, runtimes, retry_failed=True))
    row = read_rows(tmp_path / "results.jsonl")[0]
    assert row.status == "complete" and not row.resumed


def test_concurrency_bounds_the_councils_running_at_once(tmp_path: Path) -> None:
    in_flight: set[str] = set()
    peak = [0]

    class Counting(ScriptedRuntime):
        async def ask(self, prompt: str, **kw: Any) -> RuntimeReply:
            key = prompt.split("Question:\n", 1)[1][:30]
            in_flight.add(key)
            peak[0] = max(peak[0], len(in_flight))
            try:
                return await super().ask(prompt, **kw)
            finally:
                in_flight.discard(key)

    runtimes = [
        Counting(AnswerEcho("NO", (RISK,)), family=f, delay_s=0.05) for f in ("a", "b", "c")
    ]
    items = write_items(tmp_path / "items.jsonl", questions(8))
    run(items, options(tmp_path, runtimes, concurrency=3))
    assert peak[0] == 3  # never more, and it did run three at once


def test_stopping_a_batch_cancels_running_councils_and_the_next_run_picks_up(
    tmp_path: Path,
) -> None:
    items = write_items(tmp_path / "items.jsonl", questions(6))
    slow = voices(delay_s=0.4)

    async def stop_midway() -> Batch:
        batch = Batch(items, options(tmp_path, slow, concurrency=2))
        task = asyncio.ensure_future(batch.run())
        while batch.tally.total < 2:  # two done, two running
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return batch

    batch = asyncio.run(stop_midway())
    rows = read_rows(tmp_path / "results.jsonl")
    cancelled = [r for r in rows if r.status == "cancelled"]
    assert len(cancelled) == 2 and len(rows) == batch.tally.total
    for row in cancelled:
        doc = json.loads((tmp_path / ".rune" / "council" / f"run-{row.id}.json").read_text())
        assert doc["status"] == "cancelled"
    finished = {r.id for r in rows if r.status == "complete"}

    tally = run(items, options(tmp_path, voices()))
    rows = read_rows(tmp_path / "results.jsonl")
    assert tally.all_complete and len(rows) == 6
    assert {r.id for r in rows if r.resumed} == finished


def test_an_item_whose_id_another_council_holds_is_busy_not_run(tmp_path: Path) -> None:
    items = write_items(tmp_path / "items.jsonl", questions(2))
    held = tmp_path / ".rune" / "council" / "run-q1.json"
    with runlock.claim(held):
        run(items, options(tmp_path, voices()))
    rows = {r.id: r for r in read_rows(tmp_path / "results.jsonl")}
    assert rows["q1"].status == "busy" and "in use" in (rows["q1"].error or "")
    assert rows["q0"].status == "complete"


HOSTILE = [
    '{"id": "ok1", "question": "Is the cache warm enough?"}',
    '{"id": "../../x", "question": "Escape?"}',
    '{"id": "bad", "question": "Broken JSON"',
    "[1, 2, 3]",
    '{"id": "k1", "question": "Unknown key?", "questoin": "typo"}',
    '{"id": "p1", "question": "Outside?", "artifact": "../outside.txt"}',
    '{"id": "p2", "question": "Absolute?", "artifact": "/etc/passwd"}',
    '{"id": "p3", "question": "Via a link?", "artifact": "link.txt"}',
    '{"id": "n1", "question": "Bad count?", "n": "many"}',
    '{"id": "g1", "question": "Generate?", "mode": "generate"}',
    '{"question": ""}',
    '{"id": "deep", "question": ' + "[" * 500 + "]" * 500 + "}",
    '{"id": "ok2", "question": "Is the index fresh?", "artifact": "plan.md"}',
]


def hostile_items(tmp: Path) -> Path:
    work = tmp / "work"
    work.mkdir()
    (tmp / "outside.txt").write_text("secret")
    (work / "link.txt").symlink_to(tmp / "outside.txt")
    (work / "plan.md").write_text("1. warm the cache\n2. ship\n")
    path = work / "items.jsonl"
    huge = json.dumps({"id": "huge", "question": "x" * (MAX_LINE_BYTES + 10)})
    with path.open("wb") as fh:
        fh.write(("\n".join(HOSTILE) + "\n").encode())
        fh.write(huge.encode() + b"\n")
        fh.write(b'{"id": "bin", "question": "\xff\xfe"}\n')
    return path


def test_bad_lines_are_reported_by_number_and_the_rest_runs(tmp_path: Path) -> None:
    path = hostile_items(tmp_path)
    tally = run(path, options(tmp_path, voices()))
    rows = read_rows(tmp_path / "results.jsonl")
    bad = {r.line: r.error or "" for r in rows if r.status == "invalid"}
    assert sorted(bad) == [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 15]
    assert "not a safe file name" in bad[2]
    assert "not JSON" in bad[3]
    assert "not a JSON object" in bad[4]
    assert "questoin: unknown key 'questoin' (closest valid key: 'question')" in bad[5]
    assert "outside" in bad[6] and "outside" in bad[7] and "outside" in bad[8]
    assert bad[9].startswith("n: Input should be a valid integer")
    assert "generate" in bad[10]
    assert "blank" in bad[11] or "question" in bad[11]
    assert "deep" in bad[12] or "nest" in bad[12]
    assert "longer than" in bad[14]
    assert "UTF-8" in bad[15]
    assert {r.id for r in rows if r.status == "complete"} == {"ok1", "ok2"}
    assert tally.by_status["invalid"] == 13
    assert not (tmp_path / "x.json").exists()
    run_dir = tmp_path / ".rune" / "council"
    assert sorted(p.name for p in run_dir.glob("run-*.json")) == ["run-ok1.json", "run-ok2.json"]
    # The artifact is kept beside the run file (contract 2.8); a reader puts it back.
    kept = load(run_dir / "run-ok2.json").artifact_text
    assert kept is not None and kept.startswith("1. warm the cache")
    assert "secret" not in (run_dir / "run-ok1.json").read_text()


def test_strict_refuses_to_start_and_lists_every_bad_line(tmp_path: Path) -> None:
    path = hostile_items(tmp_path)
    with pytest.raises(BadItems) as caught:
        run(path, options(tmp_path, voices(), strict=True))
    assert [b.line for b in caught.value.bad] == [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 15]
    assert not (tmp_path / ".rune" / "council").exists()
    assert not (tmp_path / "results.jsonl").exists()


def test_a_repeated_id_is_an_error_before_anything_runs(tmp_path: Path) -> None:
    rows = [*questions(3), {"id": "q1", "question": "Again?"}]
    items = write_items(tmp_path / "items.jsonl", rows)
    runtimes = voices()
    with pytest.raises(BadItems, match=r"'q1' on lines 2, 4"):
        run(items, options(tmp_path, runtimes))
    assert asked(runtimes) == 0 and not (tmp_path / ".rune" / "council").exists()


def test_items_without_ids_get_stable_ones_and_a_rerun_finds_them(tmp_path: Path) -> None:
    items = write_items(
        tmp_path / "items.jsonl", [{"question": "Is A ready?"}, {"question": "Is B ready?"}]
    )
    runtimes = voices()
    run(items, options(tmp_path, runtimes))
    first = sorted(r.id or "" for r in read_rows(tmp_path / "results.jsonl"))
    run(items, options(tmp_path, runtimes))
    rows = read_rows(tmp_path / "results.jsonl")
    assert sorted(r.id or "" for r in rows) == first and all(r.resumed for r in rows)


def test_csv_items_run_like_jsonl_with_defaults_and_overrides(tmp_path: Path) -> None:
    (tmp_path / "plan.md").write_text("1. migrate\n2. no rollback\n")
    path = tmp_path / "items.csv"
    path.write_text(
        "id,question,mode,n,prefer,artifact\n"
        'c1,"Is the plan, as written, safe?",review,2,openai;google,plan.md\n'
        "c2,Is it cheap?,,,,\n"
        'c3,"unterminated\n',
        encoding="utf-8",
    )
    opts = options(tmp_path, voices(), {"defaults": AskDefaults(mode="critique", n=3)})
    run(path, opts)
    rows = {r.line: r for r in read_rows(tmp_path / "results.jsonl")}
    assert rows[2].status == "complete" and rows[3].status == "complete"
    assert rows[4].status == "invalid"
    c1 = json.loads((tmp_path / ".rune" / "council" / "run-c1.json").read_text())
    assert c1["question"] == "Is the plan, as written, safe?"
    assert c1["mode"] == "review" and c1["voices_requested"] == 2
    assert c1["request"]["diversity"]["prefer_model_families"] == ["openai", "google"]
    assert c1["request"]["artifact"]["name"] == "plan.md"
    c2 = json.loads((tmp_path / ".rune" / "council" / "run-c2.json").read_text())
    assert c2["mode"] == "critique" and c2["voices_requested"] == 3


def test_a_csv_header_with_an_unknown_column_refuses_the_file(tmp_path: Path) -> None:
    path = tmp_path / "items.csv"
    path.write_text("id,question,secret_flag\na,b,c\n")
    with pytest.raises(
        BadItems.__mro__[1], match=r"unknown key 'secret_flag' \(closest valid key: '"
    ):
        run(path, options(tmp_path, voices()))


def test_an_unreadable_artifact_fails_its_item_only(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("text\n")
    items = write_items(
        tmp_path / "items.jsonl",
        [{"id": "a", "question": "Q a?", "artifact": "a.md"}, *questions(1)],
    )
    batch = Batch(items, options(tmp_path, voices()))
    batch.check()
    (tmp_path / "a.md").unlink()  # gone between the scan and its turn
    asyncio.run(batch.run())
    rows = {r.line: r for r in read_rows(tmp_path / "results.jsonl")}
    assert rows[1].status == "invalid" and "'a.md': not a file" in (rows[1].error or "")
    assert rows[2].status == "complete" and len(rows) == 2


def test_a_template_fills_what_items_and_flags_leave_open_and_a_rerun_resumes(
    tmp_path: Path,
) -> None:
    from rune_council.config import load_config

    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "council.toml").write_text(
        '[templates.quick]\ndescription = "two voices, review"\nmode = "review"\nn = 2\n'
    )
    config = load_config(tmp_path / ".rune", {"RUNE_COUNCIL_CONFIG_DIR": str(conf)})
    rows = questions(2)
    rows[1]["mode"] = "critique"  # the item's own word beats the template
    items = write_items(tmp_path / "items.jsonl", rows)
    opts = options(
        tmp_path, voices(), {"defaults": AskDefaults(template="quick"), "config": config}
    )
    run(items, opts)
    docs = {
        i: json.loads((tmp_path / ".rune" / "council" / f"run-q{i}.json").read_text())
        for i in (0, 1)
    }
    assert docs[0]["mode"] == "review" and docs[0]["voices_requested"] == 2
    assert docs[1]["mode"] == "critique" and docs[1]["voices_requested"] == 2
    tally = run(items, opts)
    assert tally.resumed == 2
