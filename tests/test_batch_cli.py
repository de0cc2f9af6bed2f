"""`rune council batch` as a user runs it: fake AI CLIs as real processes, exit codes, Ctrl-C."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import psutil

from rune_council.batch import read_rows
from rune_council.testing import answer_for, claim_on
from tests.fakes.bin import install_fake, path_with
from tests.helpers import ctrl_c_once_running, run_rune

PLAN = "1. Drain the old nodes.\n2. Switch traffic in one step.\n3. No rollback step is defined.\n"
RISK = claim_on(PLAN, 3, "The rollout has no rollback step", name="plan.md", severity="MUST")


def fakes(tmp: Path, **settings: str | float) -> None:
    for name in ("claude", "codex", "gemini"):
        install_fake(
            tmp / "bin",
            name,
            answer=answer_for("__QUESTION__", "NO", [RISK]),
            mode="answer_question",
            **settings,
        )


def items(tmp: Path, k: int, extra: list[str] | None = None) -> Path:
    (tmp / "plan.md").write_text(PLAN)
    lines = [
        json.dumps({"id": f"b{i}", "question": f"Is change {i} safe?", "artifact": "plan.md"})
        for i in range(k)
    ]
    path = tmp / "items.jsonl"
    path.write_text("\n".join(lines + (extra or [])) + "\n")
    return path


def env(tmp: Path) -> dict[str, str]:
    return {
        "PATH": path_with(tmp / "bin"),
        "HOME": str(tmp),
        "LANG": "C.UTF-8",
        "RUNE_COUNCIL_ALLOW_EXTERNAL": "1",
    }


def rune(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_rune(tmp, env(tmp), "council", "batch", *args, timeout=180)


def results(tmp: Path) -> Path:
    return tmp / ".rune" / "batch" / "items.results.jsonl"


def test_batch_runs_every_line_reports_bad_ones_and_prints_a_summary(tmp_path: Path) -> None:
    fakes(tmp_path)
    path = items(tmp_path, 3, ['{"id": "../../etc/x", "question": "Escape?"}'])
    out = rune(tmp_path, str(path), "--concurrency", "2")
    assert out.returncode == 1, out.stderr  # one line was not an item
    assert "skipped line 4:" in out.stderr and "not a safe file name" in out.stderr
    assert "batch: 3/3 done" in out.stderr  # plain progress off a terminal
    assert "complete        3" in out.stdout and "invalid         1" in out.stdout
    rows = read_rows(results(tmp_path))
    assert sorted(r.id or "-" for r in rows) == ["-", "b0", "b1", "b2"]
    for row in rows:
        if row.status == "complete":
            doc = json.loads(Path(row.run_file or "").read_text())
            assert doc["decorrelation"] == row.stamp == "MULTI_FAMILY"
            assert {v["runtime"] for v in doc["voices"]} == {"claude", "codex", "gemini"}
    assert not (tmp_path.parent / "etc").exists()


def test_json_prints_only_the_rows(tmp_path: Path) -> None:
    fakes(tmp_path)
    path = items(tmp_path, 2)
    out = rune(tmp_path, str(path), "--json")
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    printed = [json.loads(line) for line in out.stdout.splitlines()]
    assert sorted(r["id"] for r in printed) == ["b0", "b1"]
    assert printed == [json.loads(line) for line in results(tmp_path).read_text().splitlines()]
    again = rune(tmp_path, str(path), "--json")
    assert all(json.loads(line)["resumed"] for line in again.stdout.splitlines())


def test_strict_lists_every_bad_line_and_runs_nothing(tmp_path: Path) -> None:
    fakes(tmp_path)
    path = items(tmp_path, 2, ["{not json", '{"question": "x", "n": "lots"}'])
    out = rune(tmp_path, str(path), "--strict")
    assert out.returncode == 2
    assert "line 3: not JSON" in out.stderr
    assert "line 4: n: Input should be a valid integer" in out.stderr
    assert "2 bad line(s); nothing was run" in out.stderr
    assert not (tmp_path / ".rune" / "council").exists()


def test_a_duplicate_id_refuses_the_batch(tmp_path: Path) -> None:
    fakes(tmp_path)
    path = items(tmp_path, 2, ['{"id": "b0", "question": "Again?"}'])
    out = rune(tmp_path, str(path))
    assert out.returncode == 2 and "'b0' on lines 1, 3" in out.stderr
    assert not (tmp_path / ".rune" / "council").exists()


def test_ctrl_c_cancels_running_councils_and_a_rerun_finishes_the_batch(tmp_path: Path) -> None:
    fakes(tmp_path, sleep_s=120, pid_file=tmp_path / "pids")
    path = items(tmp_path, 5)
    # Stopped once two councils, three voices each, have all started.
    args = ("council", "batch", str(path), "-c", "2")
    code, out, err = ctrl_c_once_running(tmp_path, env(tmp_path), args, tmp_path / "pids", 12)
    assert code == 130, err
    assert "Traceback" not in err and "batch stopped" in err
    assert "cancelled" in out
    rows = read_rows(results(tmp_path))
    assert len(rows) == 2 and {r.status for r in rows} == {"cancelled"}
    for row in rows:
        doc = json.loads((tmp_path / ".rune" / "council" / f"run-{row.id}.json").read_text())
        assert doc["status"] == "cancelled"
    for pid in [int(p) for p in (tmp_path / "pids").read_text().split() if p.isdigit()]:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"

    fakes(tmp_path)  # the voices answer at once now
    again = rune(tmp_path, str(path), "--concurrency", "3")
    assert again.returncode == 0, again.stderr
    rows = read_rows(results(tmp_path))
    assert len(rows) == 5 and {r.status for r in rows} == {"complete"}
