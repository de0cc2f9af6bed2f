"""What a rank council adds over the time its voices take, across rounds.

    python bench/rank_rounds.py               # 9 repeats, about half a minute
    python bench/rank_rounds.py --repeat 25   # a steadier median
    python bench/rank_rounds.py --quick       # 3 repeats, a smoke run
    python bench/rank_rounds.py --baseline REV   # REV's council beside this one's

Five fake CLI voices (tests/fakes, real subprocesses under the names claude, codex and
gemini) each sleep a known time, then answer with a JSON answer and a RANK line; the council
is ``deliberation.method = rank`` over 3 rounds (``convergence_threshold`` 1.0, so no round
closes it early), through ``convene()`` in a process of its own that runs one council after
another, warmed by a first one. Each round asks every member twice: its answer, then its
ballot over the others' answers.

The floor is the voices' own time, measured in the same run, interleaved (what goes first
turns from repeat to repeat, so a drift in the machine's load falls on every side): for each
stage the council ran, the same five fake processes started together with a prompt on stdin
and waited for. The overhead is the council's wall time less that floor, taken pair by pair
(target: 100 ms); the median and the spread of those pairs are printed.

Where it goes, per stage: each voice's call (``CliRuntime.ask``) is stamped, so a council
stage runs from the end of the stage before (the start of the council for the first) to the
end of its last voice, and its overhead is that span less the same repeat's floor stage. The
council's start (to the first voice) and its end (from the last voice to the result) are
overhead whole. The time spent writing the run file (``RunRecorder.write``, on the council's
own thread) and the tallies' are printed beside them.

With ``--baseline REV`` the package as it was at REV (``git archive``) runs the same councils
in a process of its own, in turn with this checkout's and the floor, and every figure is
printed for both: a change's before and after, measured in one sitting.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

VOICES = 5
ROUNDS = 3
STAGES = 2 * ROUNDS
SLEEP_S = 0.2
QUESTION = "Should we shard the orders table?"
NAMES = ("claude", "codex", "gemini")


class Meter:
    """Seconds spent in one function, by wrapping it for the duration of a council; with
    ``spans``, also when each call started and ended."""

    def __init__(self, owner: Any, name: str, *, spans: bool = False) -> None:
        self.owner, self.name = owner, name
        self.seconds = 0.0
        self.spans: list[tuple[float, float]] | None = [] if spans else None
        self.original = getattr(owner, name, None)

    def __enter__(self) -> Meter:
        original, meter = self.original, self
        if original is None:  # a revision without it: nothing to meter
            return self
        if self.spans is not None:

            async def timed_async(*args: Any, **kwargs: Any) -> Any:
                started = time.perf_counter()
                try:
                    return await original(*args, **kwargs)
                finally:
                    ended = time.perf_counter()
                    meter.seconds += ended - started
                    assert meter.spans is not None
                    meter.spans.append((started, ended))

            setattr(self.owner, self.name, timed_async)
            return self

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                meter.seconds += time.perf_counter() - started

        setattr(self.owner, self.name, timed)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.original is not None:
            setattr(self.owner, self.name, self.original)


class Sample:
    """One council: its wall time and, split at its stages, where that time went."""

    def __init__(
        self, wall: float, writes: float, tallies: float, parts: list[float], gc_s: float
    ) -> None:
        self.wall, self.writes, self.tallies, self.gc = wall, writes, tallies, gc_s
        # [start -> first voice, stage 1 .. stage 6 spans, last voice -> result]
        self.parts = parts


class _GcMeter:
    """Seconds the garbage collector ran during a council: a full collection of a heap this
    size takes tens of milliseconds, and lands wherever it lands."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._at = 0.0

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._at = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._at

    def __enter__(self) -> _GcMeter:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)


def council(root: Path, env: dict[str, str], run: int) -> Sample:
    """One council in this process (a worker's), stamped."""
    from rune_council import CouncilOptions, convene
    from rune_council.deliberation import tally as tally_module
    from rune_council.recorder import RunRecorder
    from rune_council.runtimes.cli import CliRuntime

    request = {
        "id": f"bench-rank-{run}",
        "question": QUESTION,
        "n": VOICES,
        "deliberation": {
            "method": "rank",
            "rounds": {"max_rounds": ROUNDS, "convergence_threshold": 1.0},
        },
    }
    collected = _GcMeter()
    with (
        collected,
        Meter(RunRecorder, "write") as writes,
        # Versions asked for in one pass of the loop are made once it is done (the recorder's
        # own call_soon): metered too, so the writes' figure is everything the run file cost
        # the council's thread.
        Meter(RunRecorder, "_write_pending") as pending,
        Meter(tally_module, "tally_parts") as tallies,
        Meter(CliRuntime, "ask", spans=True) as asks,
    ):
        started = time.perf_counter()
        result = convene(request, CouncilOptions(rune_dir=root, env=env))
        ended = time.perf_counter()
    d = result.deliberation
    rounds = len(d.rounds) if d else 0
    spans = sorted(asks.spans or [])
    if result.voices_valid != VOICES or rounds != ROUNDS or len(spans) != STAGES * VOICES:
        raise SystemExit(
            f"the council did not run as planned: {result.status}, {rounds} rounds, "
            f"{len(spans)} voice calls"
        )
    parts = [spans[0][0] - started]
    mark = started
    for k in range(STAGES):
        stage_end = max(e for _, e in spans[k * VOICES : (k + 1) * VOICES])
        parts.append(stage_end - mark)
        mark = stage_end
    parts.append(ended - mark)
    return Sample(
        ended - started, writes.seconds + pending.seconds, tallies.seconds, parts, collected.seconds
    )


def worker(rune_dir: Path, env: dict[str, str]) -> None:
    """Run a council for each line on stdin and print each one's figures as a JSON line."""
    for line in sys.stdin:
        s = council(rune_dir, env, int(line))
        print(json.dumps([s.wall, s.writes, s.tallies, s.parts, s.gc]), flush=True)


class Worker:
    """A process of its own running councils of one checkout (``package``: where its
    ``rune_council`` is), one per ``run`` call."""

    def __init__(self, package: Path, rune_dir: Path, env: dict[str, str]) -> None:
        # The package first, then this checkout for the fakes and helpers under tests/.
        paths = [str(package), str(ROOT)]
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--worker", str(rune_dir), json.dumps(env)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)},
            text=True,
        )
        self.run(0)  # warm: detection cache, imports

    def run(self, n: int) -> Sample:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit("a council process stopped")
        wall, writes, tallies, parts, gc_s = json.loads(line)
        return Sample(wall, writes, tallies, parts, gc_s)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


def floor(bin_dir: Path, env: dict[str, str]) -> list[float]:
    """The voices' own time, stage by stage: the same fakes, five at a time."""
    # The environment the council hands its voices is filtered from ``env``, never this
    # process's own; the floor's voices get ``env`` too, so both start the same interpreter.
    full = dict(env)
    stages: list[float] = []
    for _ in range(STAGES):
        started = time.perf_counter()
        procs = []
        for i in range(VOICES):
            p = subprocess.Popen(
                [str(bin_dir / NAMES[i % len(NAMES)])],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=full,
                # Each voice leads a session of its own, as the council starts them: where
                # the kernel schedules by session (autogroup), that decides its CPU share.
                start_new_session=True,
            )
            # Each prompt goes in as its voice starts, as the council's do (a pipe's worth
            # is in before the child runs): the floor waits on nothing the voices do not.
            assert p.stdin is not None
            p.stdin.write(QUESTION.encode())
            p.stdin.close()
            procs.append(p)
        for p in procs:
            assert p.stdout is not None
            p.stdout.read()
            p.wait()
        stages.append(time.perf_counter() - started)
    return stages


def spread(samples: list[float]) -> str:
    """Median, middle half and extremes, in ms."""
    values = sorted(s * 1000 for s in samples)
    if len(values) >= 4:
        q = statistics.quantiles(values, n=4)
        middle = f"; middle half {q[0]:.0f} to {q[2]:.0f}"
    else:
        middle = ""
    return (
        f"median {statistics.median(values):6.0f} ms "
        f"(range {values[0]:.0f} to {values[-1]:.0f}{middle})"
    )


def report(
    name: str, samples: list[Sample], floors: list[list[float]], indent: str = "   "
) -> None:
    walls = [s.wall for s in samples]
    overheads = [s.wall - sum(f) for s, f in zip(samples, floors, strict=True)]
    print(f"{indent}{name}")
    print(f"{indent}   council wall                {spread(walls)}")
    print(f"{indent}   overhead (wall - floor)     {spread(overheads)}  target 100 ms")
    print(f"{indent}     of which run-file writes  {spread([s.writes for s in samples])}")
    print(f"{indent}     of which the tallies      {spread([s.tallies for s in samples])}")
    print(f"{indent}     garbage collection        {spread([s.gc for s in samples])}")
    print(f"{indent}   overhead by stage (council span - floor stage, same repeat), median ms:")
    kinds = ["answers", "ballots"]
    rows = [("start -> first voice", [s.parts[0] for s in samples])]
    for k in range(STAGES):
        label = f"round {k // 2 + 1} {kinds[k % 2]}"
        rows.append((label, [s.parts[k + 1] - f[k] for s, f in zip(samples, floors, strict=True)]))
    rows.append(("last voice -> result", [s.parts[-1] for s in samples]))
    for label, values in rows:
        ms = sorted(v * 1000 for v in values)
        print(
            f"{indent}     {label:<22} {statistics.median(ms):6.1f}  ({ms[0]:.1f} to {ms[-1]:.1f})"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--quick", action="store_true", help="3 repeats")
    parser.add_argument(
        "--baseline", metavar="REV", help="also run this revision's councils, interleaved"
    )
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(Path(args.worker[0]), json.loads(args.worker[1]))
        return
    # Not for a worker: one running a baseline must import the package from its PYTHONPATH.
    sys.path.insert(0, str(ROOT))  # the fakes live in the test tree
    from bench.baseline import checkout
    from tests.fakes.bin import install_fake, path_with
    from tests.helpers import answer, claim

    repeat = 3 if args.quick else max(1, args.repeat)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        body = answer(QUESTION, "NO, not yet", [claim("The plan has no rollback step")])
        # One reply serves both asks: the answer reader takes the JSON, the ballot reader
        # the RANK line (four letters: each member sees the four others' answers).
        body += "\nRANK A>B>C>D conf=0.8\n"
        bin_dir = root / "bin"
        for name in NAMES:
            install_fake(bin_dir, name, answer=body, sleep_s=SLEEP_S)
        env = {
            "PATH": path_with(bin_dir),
            "HOME": str(root),
            "RUNE_COUNCIL_ALLOW_EXTERNAL": "1",
        }
        sides = {"this checkout": Worker(ROOT, root / "rune", env)}
        if args.baseline is not None:
            package = checkout(args.baseline, root / "baseline")
            sides[args.baseline] = Worker(package, root / "rune-baseline", env)
        floor(bin_dir, env)  # warm
        samples: dict[str, list[Sample]] = {name: [] for name in sides}
        floors: list[list[float]] = []
        order = [*sides, "floor"]
        for run in range(1, repeat + 1):
            # Each side goes first, second and last in turn.
            shift = run % len(order)
            for what in order[shift:] + order[:shift]:
                if what == "floor":
                    floors.append(floor(bin_dir, env))
                else:
                    samples[what].append(sides[what].run(run))
        for side in sides.values():
            side.close()
    print(
        f"rank council, {VOICES} fake CLI voices sleeping {SLEEP_S:g} s, {ROUNDS} rounds "
        f"({STAGES} stages), convene() in a process of its own, {repeat} repeat(s); "
        f"1-min load {load_before:.2f} before, {os.getloadavg()[0]:.2f} after"
    )
    print(f"   voices' own time (floor)    {spread([sum(f) for f in floors])}")
    stage_floor = sorted(x * 1000 for f in floors for x in f)
    print(
        f"   one floor stage             median {statistics.median(stage_floor):6.0f} ms "
        f"(range {stage_floor[0]:.0f} to {stage_floor[-1]:.0f})"
    )
    for name, got in samples.items():
        report(name, got, floors)


if __name__ == "__main__":
    main()
