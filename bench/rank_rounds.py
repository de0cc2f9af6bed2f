"""What a rank council adds over the time its voices take, across rounds.

    python bench/rank_rounds.py               # 3 repeats, about a minute
    python bench/rank_rounds.py --repeat 1

Five fake CLI voices (tests/fakes, real subprocesses under the names claude, codex and
gemini) each sleep a known time, then answer with a JSON answer and a RANK line; the council
is ``deliberation.method = rank`` over 3 rounds (``convergence_threshold`` 1.0, so no round
closes it early), in-process through ``convene()``. Each round asks every member twice: its
answer, then its ballot over the others' answers.

The floor is the voices' own time, measured in the same run, interleaved: for each stage the
council ran, the same five fake processes started together with a prompt on stdin and waited
for. The overhead is the council's wall time less that floor (target: 100 ms). The time spent
writing the run file (``RunRecorder.write``) is printed beside it, as is the tally's share.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the fakes live in the test tree

from rune_council import CouncilOptions, convene  # noqa: E402
from rune_council.deliberation import tally as tally_module  # noqa: E402
from rune_council.recorder import RunRecorder  # noqa: E402
from tests.fakes.bin import install_fake, path_with  # noqa: E402
from tests.helpers import answer, claim  # noqa: E402

VOICES = 5
ROUNDS = 3
SLEEP_S = 0.2
QUESTION = "Should we shard the orders table?"
NAMES = ("claude", "codex", "gemini")


class Meter:
    """Seconds spent in one function, by wrapping it for the duration of a council."""

    def __init__(self, owner: Any, name: str) -> None:
        self.owner, self.name = owner, name
        self.seconds = 0.0
        self.original = getattr(owner, name)

    def __enter__(self) -> Meter:
        original, meter = self.original, self

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                meter.seconds += time.perf_counter() - started

        setattr(self.owner, self.name, timed)
        return self

    def __exit__(self, *exc: object) -> None:
        setattr(self.owner, self.name, self.original)


def council(root: Path, env: dict[str, str], run: int) -> tuple[float, int, float, float]:
    """Wall time, stages run, seconds in run-file writes and in the tally, of one council."""
    request = {
        "id": f"bench-rank-{run}",
        "question": QUESTION,
        "n": VOICES,
        "deliberation": {
            "method": "rank",
            "rounds": {"max_rounds": ROUNDS, "convergence_threshold": 1.0},
        },
    }
    with (
        Meter(RunRecorder, "write") as writes,
        Meter(tally_module, "tally_parts") as tallies,
    ):
        started = time.perf_counter()
        result = convene(request, CouncilOptions(rune_dir=root / "rune", env=env))
        wall = time.perf_counter() - started
    d = result.deliberation
    rounds = len(d.rounds) if d else 0
    if result.voices_valid != VOICES or rounds != ROUNDS:
        raise SystemExit(f"the council did not run as planned: {result.status}, {rounds} rounds")
    return wall, 2 * rounds, writes.seconds, tallies.seconds


def floor(bin_dir: Path, env: dict[str, str], stages: int) -> float:
    """The voices' own time: the same fakes, five at a time, once per stage."""
    started = time.perf_counter()
    # The environment the council hands its voices is filtered from ``env``, never this
    # process's own; the floor's voices get ``env`` too, so both start the same interpreter.
    full = dict(env)
    for _ in range(stages):
        procs = [
            subprocess.Popen(
                [str(bin_dir / NAMES[i % len(NAMES)])],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=full,
            )
            for i in range(VOICES)
        ]
        for p in procs:  # every prompt is in before any answer is awaited
            assert p.stdin is not None
            p.stdin.write(QUESTION.encode())
            p.stdin.close()
        for p in procs:
            assert p.stdout is not None
            p.stdout.read()
            p.wait()
    return time.perf_counter() - started


def ms(samples: list[float]) -> str:
    values = [s * 1000 for s in samples]
    return f"median {statistics.median(values):6.0f} ms ({min(values):.0f}-{max(values):.0f})"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
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
        council(root, env, 0)  # warm: detection cache, imports
        walls: list[float] = []
        floors: list[float] = []
        writes: list[float] = []
        tallies: list[float] = []
        overheads: list[float] = []
        for run in range(1, args.repeat + 1):
            wall, stages, written, tallied = council(root, env, run)
            base = floor(bin_dir, env, stages)
            walls.append(wall)
            floors.append(base)
            writes.append(written)
            tallies.append(tallied)
            overheads.append(wall - base)
    print(
        f"rank council, {VOICES} fake CLI voices sleeping {SLEEP_S:g} s, {ROUNDS} rounds "
        f"({2 * ROUNDS} stages), in-process convene(), {args.repeat} repeat(s)"
    )
    print(f"   council wall                {ms(walls)}")
    print(f"   voices' own time (floor)    {ms(floors)}")
    print(f"   overhead (wall - floor)     {ms(overheads)}  target 100 ms")
    print(f"     of which run-file writes  {ms(writes)}")
    print(f"     of which the tallies      {ms(tallies)}")


if __name__ == "__main__":
    main()
