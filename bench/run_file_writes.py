"""What each rewrite of the run file costs as a council grows; prints size and time per write.

    python bench/run_file_writes.py            # 5 members, 5 rounds, 3 repeats
    python bench/run_file_writes.py --rounds 3 --repeat 1

A rank council of five scripted members (five families, in-process, instant) deliberates
for five rounds: the convergence threshold is out of reach and one member turns its ballot
around every round, so no round ends the council early. The chair answers with an open
SYNTH, which keeps the council going. Every run-file write goes through the real recorder
(``model_dump_json``, the URL-credential mask, the atomic write with its fsync and rename);
the bench only wraps it in a clock. For each write it prints the transition that caused it,
the file size, whether it was fsynced (a run's first and final versions are), the time of
the whole write and, measured apart, how much of it is serialising. Then the largest state,
as a running council would write it, is rewritten again and again, which gives a steadier
figure for the biggest write than single samples in the middle of a council.

The target is at most 2 ms per write at the largest. An fsync costs more than everything
else put together and depends on the file system the temp dir lives on, which the header
line names.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rune_council import CouncilOptions, FunctionRuntime, convene
from rune_council.core.contract import CouncilResult
from rune_council.core.safetext import mask_url_credentials
from rune_council.recorder import FINAL_STATUSES, RunRecorder
from rune_council.testing import ScriptedRuntime, answer_for, claim

QUESTION = "Should we shard the orders table?"
PLAN = "\n".join(
    f"{i}. Step {i} of the migration plan: move shard {i % 8} and check the row counts."
    for i in range(1, 41)
)
FAMILIES = ["anthropic", "openai", "google", "mistral", "meta"]
NAMES = ["claude", "codex", "gemini", "mistral", "llama"]


def member(index: int) -> ScriptedRuntime:
    """A member that answers with three cited claims and ranks the letters it is shown."""
    claims = [
        claim(
            f"Step {index * 3 + k} leaves no way back if the copy fails half way",
            severity=("MUST", "SHOULD", "MAY")[k],
            ref=f"plan.md:{index * 3 + k + 1}",
            quote=PLAN.splitlines()[index * 3 + k],
        )
        for k in range(3)
    ]
    rounds = {"n": 0}

    def reply(prompt: str) -> str:
        if "\nRANK " in prompt and "Answer " in prompt:
            letters = sorted(
                {line[7] for line in prompt.splitlines() if line.startswith("Answer ")}
            )
            rounds["n"] += 1
            if index == 0 and rounds["n"] % 2 == 0:
                letters.reverse()
            return f"RANK {'>'.join(letters)} conf=0.8"
        return answer_for(QUESTION, f"NO until step {index + 1} has a rollback", claims)

    return ScriptedRuntime(reply, name=NAMES[index], family=FAMILIES[index])


def council(home: Path, run_id: str, rounds: int) -> CouncilResult:
    request: dict[str, Any] = {
        "id": run_id,
        "question": QUESTION,
        "n": 5,
        "artifact": {"name": "plan.md", "text": PLAN},
        "deliberation": {
            "method": "rank",
            "rounds": {
                "max_rounds": rounds,
                "convergence_threshold": 1.0,
                "on_divergence": "continue",
            },
        },
    }
    chair = FunctionRuntime(lambda p: 'Draft verdict.\nSYNTH open=["who signs off?"]', name="chair")
    return convene(
        request,
        CouncilOptions(runtimes=[member(i) for i in range(5)], rune_dir=home, orchestrator=chair),
    )


def filesystem(path: Path) -> str:
    best, kind = "", "?"
    try:
        with open("/proc/mounts") as mounts:
            for line in mounts:
                parts = line.split()
                if len(parts) > 2 and str(path).startswith(parts[1]) and len(parts[1]) > len(best):
                    best, kind = parts[1], parts[2]
    except OSError:
        pass
    return f"{kind} at {best or '?'}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    samples: list[tuple[str, int, float, float, bool]] = []
    original = RunRecorder.write

    def timed_write(self: RunRecorder, result: CouncilResult) -> None:
        fsynced = result.status in FINAL_STATUSES or not self.path.exists()
        start = time.perf_counter()
        original(self, result)
        total = time.perf_counter() - start
        # Serialising again outside the clock splits the figure without changing it.
        start = time.perf_counter()
        mask_url_credentials(result.model_dump_json(indent=2))
        dump = time.perf_counter() - start
        # What the file holds: the artifact is kept in its sidecar, written once (2.8).
        size = self.path.stat().st_size
        kind = result.events[-1].kind if result.events else "start"
        samples.append((kind, size, dump, total, fsynced))

    RunRecorder.write = timed_write  # type: ignore[method-assign]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp)
            result = council(home, "writes", args.rounds)
            RunRecorder.write = original  # type: ignore[method-assign]
            d = result.deliberation
            print(
                f"council: 5 members, {len(d.rounds) if d else 0} rounds, "
                f"{len(samples)} run-file writes; temp dir on {filesystem(home)}"
            )
            print(
                f"{'#':>3}  {'transition':<22} {'bytes':>8} {'fsync':>5} {'total ms':>9}"
                f" {'of which dump':>14}"
            )
            for i, (kind, size, dump, total, fsynced) in enumerate(samples, start=1):
                print(
                    f"{i:>3}  {kind:<22} {size:>8} {'yes' if fsynced else 'no':>5}"
                    f" {total * 1000:>9.2f} {dump * 1000:>14.2f}"
                )
            transient = [t for _, _, _, t, fsynced in samples if not fsynced]
            synced = [t for _, _, _, t, fsynced in samples if fsynced]
            largest = max(samples, key=lambda s: s[1])
            print(
                f"largest file {largest[1]} bytes; a write without fsync: median "
                f"{statistics.median(transient) * 1000:.2f} ms, max {max(transient) * 1000:.2f} ms;"
                f" with fsync (first and final): {', '.join(f'{t * 1000:.2f}' for t in synced)} ms"
            )
            # The largest state again, as a running council writes it (the file exists).
            running = result.model_copy(update={"status": "running"})
            recorder = RunRecorder(home / "council" / "run-writes.json")
            again: list[float] = []
            for _ in range(args.repeat * 20):
                start = time.perf_counter()
                recorder.write(running)
                again.append(time.perf_counter() - start)
            dumps: list[float] = []
            for _ in range(args.repeat * 20):
                start = time.perf_counter()
                running.model_dump_json(indent=2)
                dumps.append(time.perf_counter() - start)
            print(
                f"largest state rewritten {len(again)} times: median "
                f"{statistics.median(again) * 1000:.2f} ms, min {min(again) * 1000:.2f} ms, "
                f"max {max(again) * 1000:.2f} ms (model_dump_json median "
                f"{statistics.median(dumps) * 1000:.2f} ms); target <= 2 ms"
            )
    finally:
        RunRecorder.write = original  # type: ignore[method-assign]


if __name__ == "__main__":
    main()
