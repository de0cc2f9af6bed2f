"""The listing's index: every door's list agrees with reading every file, however the files
change, and an index planted beside them is never believed over them."""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rune_council.core.paths import RuneDir
from rune_council.runs import LIST_INDEX_NAME, RunSummary, list_runs, summarise

EXAMPLES = Path(__file__).resolve().parents[1] / ".rune-example" / "council"
FINISHED = EXAMPLES / "run-orders-shard-critique.json"
SKELETON = EXAMPLES / "run-orders-shard-critique.skeleton.json"
RUNE = Path(sys.executable).with_name("rune")
HOUR_AGO = time.time() - 3600


def doc(path: Path, **changes: Any) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(path.read_text())
    out.update(changes)
    return out


def put(rune: Path, run_id: str, body: dict[str, Any], *, when: float = HOUR_AGO) -> Path:
    """A run file dated like one an earlier run wrote (no index trusts a fresh file)."""
    path = rune / "council" / f"run-{run_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(body))
    os.utime(path, (when, when))
    return path


def history(rune: Path, runs: int) -> None:
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    for i in range(runs):
        began = start + dt.timedelta(minutes=i)
        put(
            rune,
            f"r{i:05d}",
            doc(
                FINISHED,
                id=f"r{i:05d}",
                question=f"question {i}",
                started_at=began.isoformat(),
                finished_at=(began + dt.timedelta(seconds=7)).isoformat(),
            ),
        )


def full_read(rune: Path) -> list[RunSummary]:
    """What a listing must say: every file read and summarised afresh, no index."""
    rows = [summarise(p) for p in (rune / "council").glob("run-*.json")]
    return sorted(rows, key=lambda r: (r.problem is None, r.started_at), reverse=True)


def listed(rune: Path) -> list[RunSummary]:
    return list_runs(RuneDir.resolve(str(rune)))


def test_the_indexed_list_matches_a_full_read_after_adds_edits_deletes_and_plants(
    tmp_path: Path,
) -> None:
    rune = tmp_path / ".rune"
    history(rune, 30)
    assert listed(rune) == full_read(rune)
    assert (rune / LIST_INDEX_NAME).is_file()
    assert listed(rune) == full_read(rune)  # now from the index

    # Edited in place with the same size and modification time: only the change time tells.
    target = rune / "council" / "run-r00007.json"
    before = target.stat()
    text = target.read_text()
    assert '"question 7"' in text
    target.write_text(text.replace('"question 7"', '"QUESTION 7"'))
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert target.stat().st_size == before.st_size
    # A finished run turned into one no voice answered: no_verdict, as a full read says.
    put(
        rune,
        "r00003",
        doc(FINISHED, id="r00003", voices_valid=0, started_at="2026-01-01T00:03:00+00:00"),
    )
    (rune / "council" / "run-r00011.json").unlink()
    put(rune, "planted", doc(FINISHED, id="planted", question="came with a clone"))
    put(rune, "broken", {"not": "a run"})

    rows = listed(rune)
    assert rows == full_read(rune)
    by_id = {r.run_id: r for r in rows}
    assert by_id["r00007"].question == "QUESTION 7"
    assert by_id["r00003"].status == "no_verdict"
    assert "r00011" not in by_id
    assert by_id["planted"].question == "came with a clone"
    assert by_id["broken"].status == "unreadable"
    assert listed(rune) == full_read(rune)


def test_a_planted_index_with_forged_rows_is_not_believed(tmp_path: Path) -> None:
    rune = tmp_path / ".rune"
    history(rune, 3)
    files = sorted((rune / "council").glob("run-*.json"))
    # Rows that match each file's size and modification time, as a clone can arrange,
    # claiming a verdict and a question the files do not hold.
    forged = {
        "version": 1,
        "rows": {
            p.name: {
                "size": p.stat().st_size,
                "mtime_ns": p.stat().st_mtime_ns,
                "ino": p.stat().st_ino,
                "ctime_ns": 1,
                "question": "FORGED: run rm -rf ~",
                "status": "complete",
                "decorrelation": "MULTI_FAMILY",
                "voices_valid": 9,
                "voices_requested": 9,
            }
            for p in files
        },
    }
    (rune / LIST_INDEX_NAME).write_text(json.dumps(forged))
    rows = listed(rune)
    assert rows == full_read(rune)
    assert all("FORGED" not in r.question and r.voices_valid == 3 for r in rows)

    # A command's own output says the same, and the index was rebuilt from the files.
    out = subprocess.run(
        [str(RUNE), "council", "list", "--json", "--rune-dir", str(rune)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "FORGED" not in out
    assert "FORGED" not in (rune / LIST_INDEX_NAME).read_text()


def test_a_broken_or_symlinked_index_is_rebuilt_not_followed(tmp_path: Path) -> None:
    rune = tmp_path / ".rune"
    history(rune, 3)
    (rune / LIST_INDEX_NAME).write_text('{"version": 1, "rows": {"run-r00000.json": [')
    assert listed(rune) == full_read(rune)
    assert json.loads((rune / LIST_INDEX_NAME).read_text())["version"] == 1

    elsewhere = tmp_path / "someone-elses.json"
    elsewhere.write_text("do not touch")
    (rune / LIST_INDEX_NAME).unlink()
    (rune / LIST_INDEX_NAME).symlink_to(elsewhere)
    assert listed(rune) == full_read(rune)
    assert elsewhere.read_text() == "do not touch"


def test_a_running_run_is_judged_live_every_time_never_from_the_index(tmp_path: Path) -> None:
    rune = tmp_path / ".rune"
    history(rune, 2)
    writer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = doc(SKELETON, id="live")
        now = dt.datetime.now(dt.UTC).isoformat()
        live["orchestrator"].update(
            pid=writer.pid, host=socket.gethostname(), started_at=now, heartbeat_at=now
        )
        put(rune, "live", live)
        assert {r.run_id: r.status for r in listed(rune)}["live"] == "running"
        assert {r.run_id: r.status for r in listed(rune)}["live"] == "running"
    finally:
        writer.kill()
        writer.wait()
    # The file is unchanged; only its writer died. A cached row would still say running.
    assert {r.run_id: r.status for r in listed(rune)}["live"] == "abandoned"


def test_a_warm_list_of_four_thousand_runs_is_quick(tmp_path: Path) -> None:
    rune = tmp_path / ".rune"
    history(rune, 4000)
    command = [str(RUNE), "council", "list", "--limit", "20", "--rune-dir", str(rune)]
    subprocess.run(command, check=True, capture_output=True)
    began = time.perf_counter()
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    took = time.perf_counter() - began
    assert "r03999" in out.splitlines()[1]
    # Reading every file costs about 1.2 ms each (4.8 s here, more on a busy machine); the
    # bound is wide enough for a loaded two-core machine and still fails without the index.
    assert took < 3.0, f"warm list of 4,000 runs took {took:.2f} s"
