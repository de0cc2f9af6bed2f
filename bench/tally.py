"""The tally's arithmetic at scale; prints the figures.

    python bench/tally.py                    # a few minutes
    python bench/tally.py --quick            # one repeat, no n = 400 baseline
    python bench/tally.py --baseline REV     # the revision the 100,000-line runs are set
                                             # beside (default 7ca697a)
    python bench/tally.py --only-processes   # section 2 alone (the whole processes)

Ballots are random but seeded (the same transcript every run): each ranker orders a random
subset of the proposals with occasional ties and a confidence.

1. 10,000 RANK moves over 50 proposals, in-process: parsing the transcript, the whole tally
   (Borda x conf, pruning, W, Spearman for dissent), W alone, and parse + tally together
   (target 0.5 s). Median and minimum of the repeats.
2. 100,000 RANK lines (12.6 MB) through a whole ``rune council tally FILE`` process, as text
   and as ``--json`` (about 40 MB and 90 MB printed, to /dev/null): wall time and peak memory
   (``wait4``), the printed report included. The floor is the same process of the baseline
   revision (``git archive`` into a temp dir, run with PYTHONPATH), interleaved with the
   current code in the same run. Target: at most 0.5 x the baseline's time, 200 MB. The
   command forks a copy that reads, counts and prints the second half of the lines; the
   peak printed beside the time is the larger of the two processes (``wait4``), and a run of
   its own samples each one's peak and both together (PSS). Then
   where the time goes: each step's processor time in-process (import, read, parse, tally,
   rendering the text lines, rendering the JSON chunks), both revisions, interleaved.
3. The rank stage's design (``@own``: every ranker's own proposal is unseen, so the rankings
   are incomplete) with 50 proposals and 250 to 2,000 rankers: the concordance (W for
   incomplete rankings and every ranker's mean Spearman) and the whole tally. Doubling the
   rankers should about double the time (target: 1,000 rankers within 1 s).
4. A sparse rank stage: n members each propose one answer (their own, ``@own``) and rank 10
   of the others, n = 200, 400, 1,000, 2,000; the whole tally in-process, and the exponent
   fitted to the growth (1 is linear; the baseline's was 3). The baseline revision's time at
   n = 200 (and 400) is printed beside it. Target: n = 1,000 within 2 s.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rune_council.deliberation import concordance
from rune_council.deliberation.dsl import parse
from rune_council.deliberation.tally import tally

RANKERS = 10_000
PROPOSALS = 50
REPEATS = 3


def transcript(seed: int = 7, rankers: int = RANKERS) -> str:
    rnd = random.Random(seed)
    labels = [f"p{i}" for i in range(1, PROPOSALS + 1)]
    lines = ["@phase propose", *(f'PROPOSE {p} "proposal {p}"' for p in labels), "@phase rank"]
    for r in range(rankers):
        chosen = rnd.sample(labels, rnd.randint(5, PROPOSALS))
        levels: list[list[str]] = []
        for label in chosen:
            if levels and rnd.random() < 0.1:
                levels[-1].append(label)
            else:
                levels.append([label])
        ballot = ">".join("=".join(level) for level in levels)
        lines.append(f"m{r} RANK {ballot} conf={rnd.choice([0.5, 0.7, 0.9, 1.0])}")
    return "\n".join(lines) + "\n"


def own_transcript(rankers: int, seed: int = 11) -> str:
    """Ranker r owns proposal r mod 50 and ranks all the others (no ties)."""
    rnd = random.Random(seed)
    labels = [f"p{i}" for i in range(1, PROPOSALS + 1)]
    lines = ["@phase propose", *(f'PROPOSE {p} "proposal {p}"' for p in labels), "@phase rank"]
    lines += [f"@own m{r} {labels[r % PROPOSALS]}" for r in range(rankers)]
    for r in range(rankers):
        others = [p for p in labels if p != labels[r % PROPOSALS]]
        rnd.shuffle(others)
        lines.append(f"m{r} RANK {'>'.join(others)} conf=0.8")
    return "\n".join(lines) + "\n"


def sparse_transcript(n: int, ballot: int = 10, seed: int = 5) -> str:
    """``n`` members, each proposing one answer (its own, never shown to it) and ranking
    ``ballot`` of the others."""
    rnd = random.Random(seed)
    labels = [f"p{i}" for i in range(1, n + 1)]
    lines = ["@phase propose", *(f'm{i} PROPOSE {labels[i]} "answer {i}"' for i in range(n))]
    lines += ["@phase rank", *(f"@own m{i} {labels[i]}" for i in range(n))]
    for i in range(n):
        others = rnd.sample([p for j, p in enumerate(labels) if j != i], min(ballot, n - 1))
        lines.append(f"m{i} RANK {'>'.join(others)} conf={rnd.choice([0.5, 0.8, 1.0])}")
    return "\n".join(lines) + "\n"


ROOT = Path(__file__).resolve().parents[1]


def checkout(rev: str, into: Path) -> Path:
    """The package as it was at ``rev``, extracted with ``git archive`` under ``into``."""
    archive = subprocess.run(
        ["git", "archive", rev, "rune_council"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def spread(samples: list[float]) -> str:
    return f"median {statistics.median(samples):5.2f} s ({min(samples):.2f}-{max(samples):.2f})"


def timed(fn: object, repeats: int = REPEATS) -> float:
    return figures(fn, repeats)[0]


def figures(fn: object, repeats: int = REPEATS) -> tuple[float, float]:
    """Median and minimum wall time of ``repeats`` calls, in seconds."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), min(samples)


def process(args: list[str], code: Path | None = None) -> tuple[float, int, int]:
    """Wall time, peak memory (MB) and exit code of ``python -m rune_council.cli ...``, of
    the package under ``code`` when given (the baseline), else of this checkout."""
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = str(code)
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "rune_council.cli", *args],
        stdout=subprocess.DEVNULL,
        cwd=code or ROOT,
        env=env,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    return wall, usage.ru_maxrss // 1024, os.waitstatus_to_exitcode(status)


def memory(args: list[str], code: Path | None = None) -> tuple[int, int, int] | None:
    """The peak resident memory (MB) of a ``rune council ...`` process and of the copy a long
    tally forks, and the peak of both together counted once (PSS: a page they share is
    split between them), sampled from /proc every 10 ms in a run of its own (sampling
    costs time); None where there is no /proc."""
    if not Path("/proc/self/smaps_rollup").exists():
        return None
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = str(code)
    proc = subprocess.Popen(
        [sys.executable, "-m", "rune_council.cli", *args],
        stdout=subprocess.DEVNULL,
        cwd=code or ROOT,
        env=env,
    )

    def kb(pid: int, name: str) -> int:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                return next((int(x.split()[1]) for x in f if x.startswith(name + ":")), 0)
        except OSError:
            return 0

    parent = copy = both = 0
    while proc.poll() is None:
        try:
            with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
                kids = [int(x) for x in f.read().split()]
        except OSError:
            kids = []
        parent = max(parent, kb(proc.pid, "Rss"))
        copy = max([copy, *(kb(k, "Rss") for k in kids)])
        both = max(both, kb(proc.pid, "Pss") + sum(kb(k, "Pss") for k in kids))
        time.sleep(0.01)
    return parent // 1024, copy // 1024, both // 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="one repeat, fewer baselines")
    parser.add_argument("--repeat", type=int, default=3, help="repeats of each process")
    parser.add_argument("--baseline", default="7ca697a", help="revision to compare with")
    parser.add_argument(
        "--only-processes", action="store_true", help="section 2 only: the whole processes"
    )
    args = parser.parse_args()
    repeat = 1 if args.quick else args.repeat
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "baseline").mkdir()
        old = checkout(args.baseline, Path(tmp) / "baseline")
        if args.only_processes:
            processes(repeat, args.baseline, old, Path(tmp))
        else:
            measure(args.quick, repeat, args.baseline, old, Path(tmp))


def measure(quick: bool, repeat: int, baseline: str, old: Path, tmp: Path) -> None:
    text = transcript()
    parsed = parse(text)
    report = tally(parsed)
    ballots = [[list(level) for level in m.ballot] for m in parsed.moves if m.verb == "RANK"]
    labels = [f"p{i}" for i in range(1, PROPOSALS + 1)]
    print(
        f"1. {RANKERS} RANK moves over {PROPOSALS} proposals, {len(text) / 1e6:.1f} MB, in-process"
    )
    rows = [
        ("parse", lambda: parse(text)),
        ("tally (all of it)", lambda: tally(parsed)),
        ("Kendall's W alone", lambda: concordance.kendall_w(ballots, labels)),
        ("parse + tally", lambda: tally(parse(text))),
    ]
    for name, fn in rows:
        median, best = figures(fn, 5)
        print(f"   {name:<20} median {median * 1000:6.0f} ms, min {best * 1000:6.0f} ms")
    print(
        f"   result: W = {report.consensus.w:.6f} ({report.consensus.label}), "
        f"winner {report.winner}, {len(report.dissenters)} dissenting ranker(s); target 500 ms"
    )

    processes(repeat, baseline, old, tmp)
    sections_3_and_4(quick, repeat, baseline, old, labels)


def processes(repeat: int, baseline: str, old: Path, tmp: Path) -> None:
    """Section 2: whole ``rune council tally`` processes, beside the baseline's."""
    big = tmp / "ranks.txt"
    big.write_text(transcript(rankers=100_000))
    size = big.stat().st_size / 1e6
    print(
        f"2. 100000 RANK lines ({size:.1f} MB), a whole `rune council tally` process, "
        f"{repeat} repeat(s) interleaved with {baseline}"
    )
    for extra in ([], ["--json"]):
        now: list[float] = []
        then: list[float] = []
        peaks: list[int] = []
        for _ in range(repeat):
            wall, _, _ = process(["council", "tally", str(big), *extra], old)
            then.append(wall)
            wall, peak, code = process(["council", "tally", str(big), *extra])
            now.append(wall)
            peaks.append(peak)
        ratio = statistics.median(now) / statistics.median(then)
        shown = " ".join(["rune council tally FILE", *extra])
        print(f"   {shown:<30} {spread(now)}, peak {max(peaks)} MB, exit {code}")
        print(f"   {'  ' + baseline:<30} {spread(then)}")
        print(f"   {'  ratio':<30} x{ratio:.2f} (target x0.50, peak 200 MB)")
        sampled = memory(["council", "tally", str(big), *extra])
        floor = memory(["council", "tally", str(big), *extra], old)
        if sampled is not None and floor is not None:
            parent, copy, both = sampled
            print(
                f"   {'  memory, sampled':<30} {parent} MB, the forked copy {copy} MB, "
                f"{both} MB together (PSS); {baseline} {floor[0]} MB"
            )

    print(
        "   where the time goes, in-process (processor seconds, the collector off as the "
        f"command runs it), medians of {repeat}:"
    )
    steps: dict[str, list[list[float]]] = {"this": [], baseline: []}
    for _ in range(repeat):
        steps[baseline].append(phases(big, old))
        steps["this"].append(phases(big, ROOT))
    for name, runs in steps.items():
        cells = [statistics.median(column) for column in zip(*runs, strict=True)]
        shown = ", ".join(f"{what} {v:.2f}" for what, v in zip(PHASES, cells, strict=True))
        print(f"   {name:<10} {shown}")


def sections_3_and_4(quick: bool, repeat: int, baseline: str, old: Path, labels: list[str]) -> None:
    print(f"3. @own (incomplete rankings), {PROPOSALS} proposals")
    for count in (250, 500, 1000, 2000):
        own = parse(own_transcript(count))
        full = tally(own)
        kept = [r for r in full.rankers]
        ballots_ = [[level.split("=") for level in r.ballot.split(">")] for r in kept]
        seen = [[p for p in labels if p not in own.own.get(r.ranker, set())] for r in kept]

        def concord(b: list[list[list[str]]] = ballots_, s: list[list[str]] = seen) -> None:
            concordance.incomplete_w(b, s, labels)
            concordance.incomplete_mean_spearman(b, s)

        conc = figures(concord, 1)[0]
        whole = figures(lambda o=own: tally(o), 1)[0]
        print(
            f"   {count:>5} rankers: concordance {conc:6.2f} s, whole tally {whole:6.2f} s"
            f" (W = {full.consensus.w})"
        )
    print("   target: 1,000 rankers within 1 s; doubling the rankers about doubles the time")
    # The floor: the baseline's whole tally of the same 1,000 rankers, interleaved.
    own = parse(own_transcript(1000))
    now, then = [], []
    for _ in range(max(repeat, 3)):
        now.append(figures(lambda o=own: tally(o), 1)[0])
        then.append(baseline_tally(old, "own_transcript(1000)"))
    print(f"   1000 rankers, whole tally, {'this':<8} {spread(now)}")
    print(f"   1000 rankers, whole tally, {baseline:<8} {spread(then)}")
    print(
        f"   1000 rankers, ratio x{statistics.median(now) / statistics.median(then):.2f}"
        " (target: at most x1.00, no slower than the baseline)"
    )

    print("4. sparse rank stage: n members, each owns one answer and ranks 10 of the others")
    sizes = (200, 400, 1000, 2000)
    times: list[float] = []
    for n in sizes:
        parsed = parse(sparse_transcript(n))
        times.append(figures(lambda p=parsed: tally(p), 1 if n > 1000 else repeat)[0])
    for n, seconds in zip(sizes, times, strict=True):
        print(f"   n = {n:>5}: whole tally {seconds:6.2f} s")
    xs = [math.log(n) for n in sizes]
    ys = [math.log(t) for t in times]
    mx, my = statistics.mean(xs), statistics.mean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )
    print(f"   growth: time ~ n^{slope:.2f} (1 is linear); target: n = 1,000 within 2 s")
    for n in (200,) if quick else (200, 400):
        seconds = baseline_tally(old, f"sparse_transcript({n})")
        print(f"   n = {n:>5}, {baseline}: whole tally {seconds:6.2f} s")


PHASES = ("import", "read", "parse", "tally", "text lines", "JSON chunks")
_PHASES_CODE = """
import gc, sys, time
clock = time.process_time
start = clock()
from rune_council.deliberation.dsl import parse
from rune_council.deliberation.tally import tally_parts
from rune_council.render import tally_json_chunks, tally_lines
gc.disable()
marks = [clock()]
raw = open(sys.argv[1], encoding="utf-8").read()
marks.append(clock())
transcript = parse(raw)
marks.append(clock())
parts = tally_parts(transcript)
marks.append(clock())
try:  # the counted ballots themselves where the revision renders them, else their details
    for _ in tally_lines(parts.report, "x", parts):
        pass
except TypeError:
    for _ in tally_lines(parts.report, "x", parts.rankers()):
        pass
marks.append(clock())
try:
    for _ in tally_json_chunks(parts.report, parts):
        pass
except TypeError:
    for _ in tally_json_chunks(parts.report, parts.rankers()):
        pass
marks.append(clock())
print(marks[0] - start, *(b - a for a, b in zip(marks, marks[1:])))
"""


def phases(transcript_file: Path, code: Path) -> list[float]:
    """The processor time of each step of a tally command, in-process, for the package under
    ``code``: where the time of section 2 goes (the printing itself not included)."""
    out = subprocess.run(
        [sys.executable, "-c", _PHASES_CODE, str(transcript_file)],
        env={**os.environ, "PYTHONPATH": str(code)},
        cwd=code,
        capture_output=True,
        text=True,
        check=True,
    )
    return [float(x) for x in out.stdout.split()]


def baseline_tally(old: Path, made: str) -> float:
    """The baseline revision's in-process time for the whole tally of ``made`` (a call of
    this script's transcript functions), in a process of its own on its own package."""
    code = (
        "import sys, time; sys.path.insert(0, sys.argv[1]); import tally as bench; "
        "from rune_council.deliberation.dsl import parse; "
        "from rune_council.deliberation.tally import tally; "
        f"p = parse(bench.{made}); t = time.perf_counter(); tally(p); "
        "print(time.perf_counter() - t)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(Path(__file__).parent)],
        env={**os.environ, "PYTHONPATH": str(old)},
        cwd=old,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout)


if __name__ == "__main__":
    main()
