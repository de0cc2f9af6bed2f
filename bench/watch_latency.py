"""How long after a run file changes does `rune council watch` print the transition?

    .venv/bin/python bench/watch_latency.py              # 200 transitions
    .venv/bin/python bench/watch_latency.py --transitions 50

This process plays the orchestrator: it writes a run file through the real recorder
(temp file, fsync, rename), one voice transition at a time, while `rune council watch --json`
follows it as a separate process. For each transition the clock starts when the rename has
returned and stops when the matching line arrives on watch's stdout, so a figure covers the
file-system notification, watch's debounce, reading and validating the file, and the pipe.
The next transition is written only after the previous one was seen, with a short random
pause, so every figure is one isolated change rather than a burst folded into one read.
Nothing is asserted; the figures are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rune_council.core.contract import (  # noqa: E402
    CouncilResult,
    Orchestrator,
    PerspectiveRequest,
    RunEvent,
    Voice,
)
from rune_council.recorder import RunRecorder  # noqa: E402

CYCLE = ("running", "complete", "running", "dropped")


def stamp() -> str:
    import datetime as dt

    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


def skeleton(run_id: str) -> CouncilResult:
    started = stamp()
    return CouncilResult(
        id=run_id,
        question="How quickly does watch see a change?",
        mode="judge",
        voices_requested=3,
        voices=[
            Voice(id=f"v{i}", source="subagent", runtime=f"bench-{i}", model_family="unknown")
            for i in (1, 2, 3)
        ],
        request=PerspectiveRequest(id=run_id, question="How quickly does watch see a change?"),
        orchestrator=Orchestrator(
            pid=os.getpid(), host=socket.gethostname(), started_at=started, heartbeat_at=started
        ),
        started_at=started,
    )


def reader(stream: object, lines: queue.Queue[tuple[float, str]]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        lines.put((time.perf_counter(), line))
    lines.put((time.perf_counter(), ""))


def expect(lines: queue.Queue[tuple[float, str]], seq: int, timeout: float = 10) -> float:
    """When watch printed event ``seq`` (skipping anything else it printed first)."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise SystemExit(f"watch did not print transition {seq} within {timeout} s")
        at, line = lines.get(timeout=left)
        if not line:
            raise SystemExit("watch exited early")
        record = json.loads(line)
        if record.get("type") == "event" and record.get("seq") == seq:
            return at
        if record.get("type") == "event":  # printed twice, or out of order
            raise SystemExit(f"watch printed transition {record.get('seq')} awaiting {seq}")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))
    return ordered[k]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transitions", type=int, default=200)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="rune-watch-bench-") as tmp:
        path = Path(tmp) / "council" / "run-bench.json"
        result = skeleton("bench")
        recorder = RunRecorder(path)
        recorder.write(result)

        watcher = subprocess.Popen(
            [sys.executable, "-m", "rune_council.cli", "council", "watch", str(path), "--json"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        lines: queue.Queue[tuple[float, str]] = queue.Queue()
        threading.Thread(target=reader, args=(watcher.stdout, lines), daemon=True).start()
        # Wait for watch to have read the skeleton before timing anything.
        _, first = lines.get(timeout=30)
        if json.loads(first).get("type") != "started":
            raise SystemExit(f"unexpected first line from watch: {first!r}")

        latencies_ms: list[float] = []
        write_ms: list[float] = []
        rng = random.Random(7)
        for seq in range(1, args.transitions + 1):
            voice = result.voices[seq % len(result.voices)]
            voice.status = CYCLE[(seq // len(result.voices)) % len(CYCLE)]  # type: ignore[assignment]
            result.events.append(
                RunEvent(
                    seq=seq,
                    at=stamp(),
                    kind="voice.status",
                    voice_id=voice.id,
                    status=voice.status,
                    detail=f"bench transition {seq}",
                )
            )
            assert result.orchestrator is not None
            result.orchestrator.heartbeat_at = stamp()
            before = time.perf_counter()
            recorder.write(result)
            written = time.perf_counter()
            seen = expect(lines, seq)
            # From the start of the write, so the figure cannot undercount when this
            # process is descheduled between the rename and reading the clock.
            latencies_ms.append((seen - before) * 1000)
            write_ms.append((written - before) * 1000)
            time.sleep(rng.uniform(0.02, 0.08))

        result.status = "complete"
        result.voices_valid = len(result.voices)
        result.finished_at = stamp()
        recorder.write(result)
        code = watcher.wait(timeout=30)

    n = len(latencies_ms)
    print(f"watch latency over {n} transitions (write → line printed by `rune council watch`)")
    print(f"  median  {statistics.median(latencies_ms):7.1f} ms")
    print(f"  p95     {percentile(latencies_ms, 0.95):7.1f} ms")
    print(f"  min     {min(latencies_ms):7.1f} ms")
    print(f"  max     {max(latencies_ms):7.1f} ms")
    print(
        f"  the run-file write itself (temp + fsync + rename): {statistics.median(write_ms):.1f} ms"
    )
    print(f"  watch exited with {code} when the run completed (expected 0)")


if __name__ == "__main__":
    main()
