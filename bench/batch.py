"""Batch throughput, per-council overhead and memory: ``python bench/batch.py``.

Councils of three scripted voices that each take 0.5 s (in-process, so the figures are the
batch machinery's and not a CLI's start-up):

- councils per minute for 200 items, locally at concurrency 1, 4 and 16, and as Ray tasks
  on a local Ray cluster (2 CPUs) at concurrency 16;
- the overhead per council of the batch at concurrency 1 over calling ``convene()`` in a
  loop on the same items;
- the peak of Python allocations (tracemalloc) for 200 and for 2,000 items of instant
  voices: a batch that kept every result would grow ten-fold.

``--items N`` and ``--skip-ray`` shorten a run. Nothing leaves the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rune_council.batch import BatchOptions, batch_door, run_batch
from rune_council.core.runtime import RuntimeReply
from rune_council.council import CouncilOptions, convene
from rune_council.testing import AnswerEcho, ScriptedRuntime, claim_on

PLAN = "1. Drain the old nodes.\n2. Switch traffic in one step.\n3. No rollback step is defined.\n"
RISK = claim_on(PLAN, 3, "The rollout has no rollback step", name="plan.md", severity="MUST")


class Voice(ScriptedRuntime):
    """A scripted voice that forgets each prompt once answered (the test double keeps
    them all, which would be the voice's memory, not the batch's)."""

    async def ask(self, prompt: str, **kw: Any) -> RuntimeReply:
        try:
            return await super().ask(prompt, **kw)
        finally:
            self.prompts.clear()


def voices(delay_s: float) -> list[ScriptedRuntime]:
    return [
        Voice(AnswerEcho("NO", (RISK,)), family=f, delay_s=delay_s, name=f"{f}-voice")
        for f in ("anthropic", "openai", "google")
    ]


def write_items(folder: Path, count: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "plan.md").write_text(PLAN)
    path = folder / "items.jsonl"
    with path.open("w") as fh:
        for i in range(count):
            item = {"id": f"i{i}", "question": f"Is rollout {i} safe?", "artifact": "plan.md"}
            fh.write(json.dumps(item) + "\n")
    return path


def options(folder: Path, delay_s: float, concurrency: int, **extra: object) -> BatchOptions:
    door = batch_door(rune_dir=folder / ".rune", env={"PATH": os.defpath, "HOME": str(folder)})
    return BatchOptions(
        door=door,
        runtimes=voices(delay_s),
        concurrency=concurrency,
        results=folder / "results.jsonl",
        **extra,  # type: ignore[arg-type]
    )


def timed_batch(
    folder: Path, count: int, concurrency: int, delay_s: float, **extra: object
) -> float:
    path = write_items(folder, count)
    started = time.perf_counter()
    tally = asyncio.run(run_batch(path, options(folder, delay_s, concurrency, **extra)))
    elapsed = time.perf_counter() - started
    assert tally.all_complete, tally.by_status
    return elapsed


def loop_of_convene(folder: Path, count: int, delay_s: float) -> float:
    (folder / "plan.md").parent.mkdir(parents=True, exist_ok=True)
    (folder / "plan.md").write_text(PLAN)
    opts = CouncilOptions(
        runtimes=voices(delay_s), rune_dir=folder / ".rune", env={"PATH": os.defpath}
    )
    started = time.perf_counter()
    for i in range(count):
        request = {
            "id": f"c{i}",
            "question": f"Is rollout {i} safe?",
            "artifact": {"name": "plan.md", "text": PLAN},
        }
        convene(request, opts)
    return time.perf_counter() - started


def peak_memory(folder: Path, count: int) -> float:
    path = write_items(folder, count)
    tracemalloc.start()
    asyncio.run(run_batch(path, options(folder, 0.0, 16)))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--memory-items", type=int, default=2000)
    parser.add_argument("--skip-ray", action="store_true")
    args = parser.parse_args()
    n = args.items
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        print(f"{n} items, 3 voices of 0.5 s each (in-process)")
        print(f"{'runner':<22} {'concurrency':>11} {'seconds':>8} {'councils/min':>13}")
        for k in (1, 4, 16):
            s = timed_batch(root / f"local{k}", n, k, 0.5)
            print(f"{'local (asyncio)':<22} {k:>11} {s:>8.1f} {n * 60 / s:>13.0f}")
        if not args.skip_ray:
            import ray

            ray.init(
                num_cpus=2,
                include_dashboard=False,
                log_to_driver=False,
                _node_ip_address="127.0.0.1",
            )
            try:
                timed_batch(root / "ray-warm", 8, 8, 0.5, ray=True)  # workers started
                s = timed_batch(root / "ray", n, 16, 0.5, ray=True)
                print(f"{'local Ray (2 CPUs)':<22} {16:>11} {s:>8.1f} {n * 60 / s:>13.0f}")
            finally:
                ray.shutdown()

        m = min(n, 50)
        loop = loop_of_convene(root / "loop", m, 0.5)
        batch = timed_batch(root / "one", m, 1, 0.5)
        print(
            f"\noverhead per council, batch at concurrency 1 over a convene() loop "
            f"({m} councils): {(batch - loop) / m * 1000:+.1f} ms "
            f"(loop {loop / m * 1000:.0f} ms, batch {batch / m * 1000:.0f} ms per council)"
        )

        small = peak_memory(root / "mem-small", args.memory_items // 10)
        large = peak_memory(root / "mem-large", args.memory_items)
        print(
            f"peak Python allocations: {small:.1f} MB for {args.memory_items // 10} items, "
            f"{large:.1f} MB for {args.memory_items} items (instant voices, concurrency 16)"
        )


if __name__ == "__main__":
    main()
