"""What an artifact costs a whole council: bytes written to the run directory and wall time.

    python bench/artifact_cost.py              # 7 repeats of none / 1 MB / 20 MB, interleaved
    python bench/artifact_cost.py --quick      # 3 repeats, none / 1 MB only
    python bench/artifact_cost.py --repeat 5 --sizes 0,1,20

Each sample is a whole Python process that calls ``convene()`` with three instant fake CLIs
(tests/fakes, real subprocesses under the names claude/codex/gemini on a private PATH), each
answering with a claim whose quote is a line of the artifact, so GATE checks it there. The
artifact is handed in inline (a path is read only up to 2 MB). The figure compared is the
process's wall time from spawn to exit; beside it, the bytes every file write into
``.rune/council`` put on disk (the run file's versions and the artifact's sidecar, counted
by wrapping the one function the recorder writes with) and how many writes that took.

Samples are interleaved (none, 1 MB, 20 MB, then again, the order rotated each repeat), so
a burst of load on a shared machine falls on every size alike. Each figure is a median with
its spread (min-max). Targets: the run directory receives O(artifact + answers) bytes, not
O(artifact x writes), and a 1 MB artifact costs at most 1.05x the wall of a council with
none. CPU is the process's own and its voices' (user + system), printed beside the wall
because it moves less with the load of a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

QUESTION = "Should we shard the orders table?"
NAMES = ("claude", "codex", "gemini")
MB = 1_000_000
TARGET_1MB = 1.05

# The child: one council, its run-directory writes counted, one JSON line on stdout.
CHILD = r"""
import json, sys, time
from pathlib import Path
started = time.perf_counter()
import rune_council.recorder as recorder
from rune_council import CouncilOptions, convene

rune_dir, run_id, artifact_file = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
council = rune_dir / "council"
counted = {"bytes": 0, "writes": 0}
original = recorder.atomic_write_bytes

def counting(path, payload, **kw):
    if Path(path).parent == council:
        counted["bytes"] += len(payload)
        counted["writes"] += 1
    return original(path, payload, **kw)

recorder.atomic_write_bytes = counting
request = {"id": run_id, "question": sys.argv[4], "n": 3}
if artifact_file != "-":
    request["artifact"] = {"name": "plan.md", "text": Path(artifact_file).read_text("utf-8")}
env = json.loads(sys.argv[5])
result = convene(request, CouncilOptions(rune_dir=rune_dir, env=env))
print(json.dumps({
    "valid": result.voices_valid,
    "bytes": counted["bytes"],
    "writes": counted["writes"],
    "convene_s": time.perf_counter() - started,
    "kept": result.artifact_text is not None and len(result.artifact_text),
}))
"""


def artifact_text(size: int) -> str:
    """``size`` bytes of a numbered plan; line 3 is the one every voice quotes."""
    line = "Step {n}: move shard {s} to the new cluster and compare the row counts.\n"
    out: list[str] = []
    total = 0
    n = 1
    while total < size:
        text = line.format(n=n, s=n % 8)
        out.append(text)
        total += len(text)
        n += 1
    return "".join(out)[:size]


def quoted_line() -> str:
    return artifact_text(4 * MB // 1000).splitlines()[2]


class World:
    def __init__(self, root: Path) -> None:
        from tests.fakes.bin import install_fake, path_with
        from tests.helpers import answer, claim

        self.root = root
        self.home = root / "home"
        self.home.mkdir()
        self.bin = root / "bin"
        body = answer(
            QUESTION,
            "NO, not yet",
            [
                claim(
                    "Step 3 moves a shard with no way back",
                    ref="plan.md:3",
                    quote=quoted_line(),
                )
            ],
        )
        for name in NAMES:
            install_fake(self.bin, name, answer=body)
        self.env = {
            "PATH": path_with(self.bin),
            "HOME": str(self.home),
            "RUNE_COUNCIL_ALLOW_EXTERNAL": "1",
        }
        self.files: dict[int, Path] = {}
        self.runs = 0
        # One rune dir for every sample: detection is cached after the first council, as a
        # user's second council finds it.
        self.rune_dir = root / "rune"

    def artifact(self, size: int) -> str:
        if size == 0:
            return "-"
        if size not in self.files:
            path = self.root / f"artifact-{size}.md"
            path.write_text(artifact_text(size), encoding="utf-8")
            self.files[size] = path
        return str(self.files[size])

    def council(self, size: int) -> tuple[float, dict[str, float]]:
        self.runs += 1
        run_id = f"bench-{size}-{self.runs}"
        env = dict(os.environ)
        env.pop("RUNE_COUNCIL_DIR", None)
        env["PYTHONPATH"] = str(ROOT)
        argv = [
            sys.executable,
            "-c",
            CHILD,
            str(self.rune_dir),
            run_id,
            self.artifact(size),
            QUESTION,
            json.dumps(self.env),
        ]
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        proc = subprocess.run(argv, env=env, cwd=self.root, capture_output=True, check=False)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        # The process and the voices it waited for: steadier than wall on a loaded machine.
        cpu = (after.ru_utime - used.ru_utime) + (after.ru_stime - used.ru_stime)
        if proc.returncode != 0:
            tail = proc.stderr.decode(errors="replace").strip().splitlines()[-3:]
            raise SystemExit(f"council with a {size} B artifact failed: {' | '.join(tail)}")
        data: dict[str, float] = json.loads(proc.stdout.decode().strip().splitlines()[-1])
        data["cpu_s"] = cpu
        if data["valid"] != len(NAMES):
            raise SystemExit(f"only {data['valid']}/{len(NAMES)} voices valid at {size} B")
        if size and data["kept"] != size:
            raise SystemExit("the returned CouncilResult does not carry the artifact")
        # The run's files are removed between samples so the directory stays small.
        for leftover in (self.rune_dir / "council").glob(f"run-{run_id}.*"):
            leftover.unlink()
        return wall, data


def spread(values: list[float], scale: float = 1.0, unit: str = "") -> str:
    med = statistics.median(values) * scale
    return f"{med:.0f}{unit} ({min(values) * scale:.0f}-{max(values) * scale:.0f})"


def label(size: int) -> str:
    return "none" if size == 0 else f"{size // MB} MB"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="3 repeats, no 20 MB artifact")
    parser.add_argument("--sizes", default=None, help="artifact sizes in MB, e.g. 0,1,20")
    args = parser.parse_args()
    repeat = 3 if args.quick else args.repeat
    sizes_mb = args.sizes or ("0,1" if args.quick else "0,1,20")
    sizes = [int(float(s) * MB) for s in sizes_mb.split(",")]

    walls: dict[int, list[float]] = {s: [] for s in sizes}
    inner: dict[int, list[float]] = {s: [] for s in sizes}
    cpu: dict[int, list[float]] = {s: [] for s in sizes}
    written: dict[int, list[float]] = {s: [] for s in sizes}
    writes: dict[int, list[float]] = {s: [] for s in sizes}
    with tempfile.TemporaryDirectory(prefix="rune-artifact-bench-") as tmp:
        world = World(Path(tmp))
        world.council(0)  # warms the detection cache; not counted
        for r in range(repeat):
            order = sizes[r % len(sizes) :] + sizes[: r % len(sizes)]
            for size in order:
                wall, data = world.council(size)
                walls[size].append(wall)
                inner[size].append(data["convene_s"])
                cpu[size].append(data["cpu_s"])
                written[size].append(data["bytes"])
                writes[size].append(data["writes"])

    print(
        f"artifact cost: 3 instant fake CLI voices, whole process per council, {repeat} "
        "interleaved repeats; median (min-max)"
    )
    floor = statistics.median(walls[sizes[0]]) if sizes[0] == 0 else None
    cpu_floor = statistics.median(cpu[sizes[0]]) if sizes[0] == 0 else None
    for size in sizes:
        ratio = ""
        if floor is not None and cpu_floor is not None and size:
            x = statistics.median(walls[size]) / floor
            c = statistics.median(cpu[size]) / cpu_floor
            target = f", target <= {TARGET_1MB:.2f}x" if size == MB else ""
            verdict = (" ok" if x <= TARGET_1MB else " MISSED") if size == MB else ""
            ratio = f"  = {x:.3f}x the wall of none{target}{verdict} (CPU {c:.3f}x)"
        per_mb = ""
        if size:
            over = statistics.median(written[size]) - statistics.median(written[sizes[0]])
            per_mb = f", {over / size:.2f} bytes written per artifact byte"
        print(
            f"  artifact {label(size):>6}: wall {spread(walls[size], 1000, ' ms')}, "
            f"CPU {spread(cpu[size], 1000, ' ms')}, "
            f"convene() {spread(inner[size], 1000, ' ms')}; run dir received "
            f"{spread(written[size], 1 / 1024, ' KiB')} in "
            f"{statistics.median(writes[size]):.0f} writes{per_mb}{ratio}"
        )
    print(
        "  target: bytes written O(artifact + answers) (about 1 byte per artifact byte, "
        "not one copy per write)"
    )


if __name__ == "__main__":
    main()
