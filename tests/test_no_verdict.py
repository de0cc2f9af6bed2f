"""A council no voice answered decided nothing, and every reader says so: the run file's
status is ``no_verdict`` (never ``complete``), and ``list``, ``show``, ``watch``,
``verify``, ``stats`` and a batch tell it apart, each command exiting 1 where it follows
such a run. A file written before 2.7, which called such a council ``complete``, reads the
same way."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from rune_council import CouncilOptions, convene
from tests.helpers import bare_machine_env, run_rune

Q = "Should we shard the orders table?"


def env_of(tmp: Path) -> dict[str, str]:
    # No AI CLI on PATH, no endpoint, no subagent: nothing can answer.
    return bare_machine_env(tmp)


def rune(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_rune(tmp, env_of(tmp), "council", *args)


def run_file(tmp: Path, run_id: str) -> Path:
    return tmp / ".rune" / "council" / f"run-{run_id}.json"


def listed(tmp: Path) -> dict[str, dict[str, Any]]:
    out = rune(tmp, "list", "--json")
    assert out.returncode == 0, out.stderr
    return {row["id"]: row for row in json.loads(out.stdout)}


def test_a_council_no_voice_answered_is_no_verdict_in_every_reader(tmp_path: Path) -> None:
    asked = rune(tmp_path, Q, "--id", "empty")
    assert asked.returncode == 1, asked.stderr
    assert "no verdict" in asked.stderr
    doc = json.loads(run_file(tmp_path, "empty").read_text())
    assert (doc["status"], doc["voices_valid"]) == ("no_verdict", 0)

    assert listed(tmp_path)["empty"]["status"] == "no_verdict"
    table = rune(tmp_path, "list").stdout
    assert "no_verdict" in table and " complete " not in table

    shown = rune(tmp_path, "show", "empty")
    assert "- **Status**: no_verdict (no voice produced a usable answer" in shown.stdout
    assert "- **Verification**: reproduced" in shown.stdout

    watched = rune(tmp_path, "watch", "empty", "--json")
    assert watched.returncode == 1
    finished = json.loads(watched.stdout.splitlines()[-1])
    assert (finished["status"], finished["exit_code"]) == ("no_verdict", 1)

    # verify still re-derives such a run, and its status with it.
    checked = rune(tmp_path, "verify", "empty", "--json")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    report = json.loads(checked.stdout)
    assert report["reproduced"] and "status" in report["checked"]


def test_a_library_caller_reads_no_verdict_off_the_result(tmp_path: Path) -> None:
    result = convene({"id": "lib", "question": Q}, CouncilOptions(rune_dir=tmp_path, runtimes=[]))
    assert (result.status, result.voices_valid) == ("no_verdict", 0)


def test_an_edited_status_does_not_verify(tmp_path: Path) -> None:
    assert rune(tmp_path, "demo", "--pace", "0", "--id", "d1", "--json").returncode == 0
    path = run_file(tmp_path, "d1")
    doc = json.loads(path.read_text())
    assert doc["status"] == "complete" and doc["voices_valid"] > 0
    doc["status"] = "no_verdict"
    path.write_text(json.dumps(doc))
    checked = rune(tmp_path, "verify", "d1", "--json")
    assert checked.returncode == 1
    fields = [d["field"] for d in json.loads(checked.stdout)["differences"]]
    assert fields == ["status"]


def _as_written_before_2_7(path: Path) -> None:
    doc = json.loads(path.read_text())
    doc["status"], doc["schema_version"] = "complete", "2.6"
    path.write_text(json.dumps(doc))


def test_an_older_file_that_called_an_empty_council_complete_reads_as_no_verdict(
    tmp_path: Path,
) -> None:
    assert rune(tmp_path, Q, "--id", "old").returncode == 1
    _as_written_before_2_7(run_file(tmp_path, "old"))

    assert listed(tmp_path)["old"]["status"] == "no_verdict"
    assert "- **Status**: no_verdict" in rune(tmp_path, "show", "old").stdout
    assert rune(tmp_path, "watch", "old").returncode == 1
    checked = rune(tmp_path, "verify", "old")
    assert checked.returncode == 0, checked.stdout


def test_stats_counts_empty_councils_apart_and_leaves_them_out_of_the_rates(
    tmp_path: Path,
) -> None:
    # One council with a verdict (the demo's four simulated voices), one no voice answered,
    # and one such council in a file written before 2.7.
    assert rune(tmp_path, "demo", "--pace", "0", "--id", "d1", "--json").returncode == 0
    assert rune(tmp_path, Q, "--id", "e1").returncode == 1
    assert rune(tmp_path, Q, "--id", "e2").returncode == 1
    _as_written_before_2_7(run_file(tmp_path, "e2"))

    out = rune(tmp_path, "stats", "--json")
    assert out.returncode == 0, out.stderr
    totals = json.loads(out.stdout)["totals"]
    assert (totals["runs"], totals["complete"], totals["no_verdict"]) == (3, 1, 2)
    assert totals["by_status"] == {"complete": 1, "no_verdict": 2}
    # Rates are over the one council that decided something.
    assert totals["needs_decision_rate"] == (1.0 if totals["needs_decision"] else 0.0)
    assert totals["consensus_rate"] == (1.0 if totals["consensus"] else 0.0)
    assert sum(totals["stamps"].values()) == 1

    table = rune(tmp_path, "stats").stdout
    assert "no verdict" in table


def test_a_batch_of_empty_councils_is_not_complete(tmp_path: Path) -> None:
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"id": "b1", "question": Q}) + "\n")
    out = rune(tmp_path, "batch", str(items))
    assert out.returncode == 1, out.stdout + out.stderr
    results = tmp_path / ".rune" / "batch" / "items.results.jsonl"
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert [(r["id"], r["status"]) for r in rows] == [("b1", "no_verdict")]
    assert "no_verdict" in out.stdout and "no voice produced a usable answer" in out.stdout
