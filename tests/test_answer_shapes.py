"""The corpus of answer shapes (tests/fixtures/answer_shapes) and the bench that counts it.

Each shape is held to the outcome its index records, so the yield the bench prints is the
yield these tests pass with; the bench itself runs as a user runs it, on the corpus and on
a directory of extra answers (raw texts and run files).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rune_council.core.contract import PerspectiveRequest, RawOutput, Voice
from rune_council.stages.gate import gate

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "fixtures" / "answer_shapes"
INDEX: dict[str, Any] = json.loads((CORPUS / "index.json").read_text(encoding="utf-8"))
BENCH = ROOT / "bench" / "answer_yield.py"


def test_every_file_of_the_corpus_is_indexed_with_where_it_was_seen() -> None:
    listed = [s["file"] for s in INDEX["shapes"]]
    assert sorted(listed) == sorted(str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*.txt"))
    assert all(s["seen"].strip() for s in INDEX["shapes"])


@pytest.mark.parametrize("shape", INDEX["shapes"], ids=lambda s: s["file"])
def test_each_shape_reaches_the_outcome_its_index_records(shape: dict[str, Any]) -> None:
    voice = Voice(
        id="v1",
        source="external-cli",
        runtime="claude",
        status="complete",
        raw=RawOutput(text=(CORPUS / shape["file"]).read_text(encoding="utf-8")),
    )
    request = PerspectiveRequest(id="t", question=shape.get("question", INDEX["question"]))
    named = shape.get("artifact", INDEX["artifact"])
    artifact = None if named is None else (CORPUS / named).read_text(encoding="utf-8")
    dropped = gate(voice, request, artifact)
    if shape["outcome"] == "kept":
        assert dropped is None, dropped
        assert sorted({r.kind for r in voice.repairs}) == shape["repairs"]
    else:
        assert dropped is not None
        assert dropped.reason.startswith(shape["reason"]), dropped.reason
        assert "Field required" not in dropped.reason


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_the_bench_counts_the_corpus_as_the_index_says() -> None:
    ran = bench("--json")
    assert ran.returncode == 0, ran.stderr
    counts = json.loads(ran.stdout)
    shapes = INDEX["shapes"]
    kept = [s for s in shapes if s["outcome"] == "kept"]
    assert counts["answers"] == len(shapes)
    assert counts["parsed_as_written"] == sum(1 for s in kept if not s["repairs"])
    assert counts["parsed_with_repairs"] == sum(1 for s in kept if s["repairs"])
    assert counts["dropped"] == len(shapes) - len(kept)
    assert counts["repairs"]["unwrapped"] == sum(1 for s in kept if "unwrapped" in s["repairs"])
    assert counts["drop_reasons"]["ambiguous"] == 1
    assert counts["drop_reasons"]["truncated"] == 1


def test_the_bench_reads_extra_answers_and_run_files(tmp_path: Path) -> None:
    extra = tmp_path / "recorded"
    extra.mkdir()
    (extra / "question.txt").write_text("Is the cache key stable?\n", encoding="utf-8")
    (extra / "a.txt").write_text(
        '{"answer": {"question_echo": "Is the cache key stable?", "stance": "YES", "claims": [],}}',
        encoding="utf-8",
    )
    (extra / "b.txt").write_text("It is stable, yes.", encoding="utf-8")
    run = ROOT / ".rune-example" / "council" / "run-orders-shard-critique.json"
    shutil.copy(run, extra / run.name)
    voices = json.loads(run.read_text())["voices"]
    answered = sum(1 for v in voices if v.get("raw") or v.get("dropped_by") == "council.dispatch")

    ran = bench("--json", "--extra", str(extra))
    assert ran.returncode == 0, ran.stderr
    counts = json.loads(ran.stdout)
    assert counts["sources"][str(extra)] == 2 + answered
    assert counts["answers"] == len(INDEX["shapes"]) + 2 + answered

    shown = bench("--show", "--extra", str(extra))
    assert shown.returncode == 0, shown.stderr
    assert f"{extra / 'a.txt'}" in shown.stdout
    line = next(x for x in shown.stdout.splitlines() if x.strip().startswith(str(extra / "a.txt")))
    assert line.rstrip().endswith("kept [trailing_comma, unwrapped]")
    assert "run-orders-shard-critique.json:v1" in shown.stdout


def test_the_bench_refuses_a_missing_directory_with_one_line(tmp_path: Path) -> None:
    ran = bench("--extra", str(tmp_path / "nope"))
    assert ran.returncode == 2
    assert "not a directory" in ran.stderr and "Traceback" not in ran.stderr


def test_a_run_files_voice_lost_before_gate_counts_as_dropped_by_dispatch(tmp_path: Path) -> None:
    run = json.loads(
        (ROOT / ".rune-example" / "council" / "run-orders-shard-critique.json").read_text()
    )
    voice = run["voices"][0]
    voice.update(status="dropped", dropped_by="council.dispatch", raw=None, drop_reason="cut")
    voice["attempts"][-1]["outcome"] = "truncated"
    (tmp_path / "run-cut.json").write_text(json.dumps(run), encoding="utf-8")

    ran = bench("--json", "--extra", str(tmp_path))
    assert ran.returncode == 0, ran.stderr
    counts = json.loads(ran.stdout)
    assert counts["drop_reasons"]["dispatch: truncated"] == 1
    assert counts["sources"][str(tmp_path)] == len(run["voices"])
