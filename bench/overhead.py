"""How much time the council adds on top of the voices it waits for.

Run: .venv/bin/python bench/overhead.py [--repeat N]

Every voice is a fake CLI (tests/fakes) under the real names claude/codex/gemini on a private
PATH, so the figures measure rune-council itself: process spawn, detection, run-file writes,
gating and arbitration. Figures are printed, never asserted: the machine is noisy, and a
threshold here would only produce flaky failures. See bench/README.md for what each row means.
"""

from __future__ import annotations

import argparse
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
# The fakes and answer builders live in the test tree, which is not an installed package.
sys.path.insert(0, str(ROOT))

from rune_council import CouncilOptions, convene  # noqa: E402
from rune_council.recorder import RunRecorder  # noqa: E402
from tests.fakes.bin import install_fake, path_with  # noqa: E402
from tests.helpers import answer, claim  # noqa: E402

N_VOICES = 5
VOICE_S = 1.0
QUESTION = "Should we shard the orders table?"
NAMES = ("claude", "codex", "gemini")
# The venv's own `rune` sits beside its interpreter; timing that one rules out an older rune
# found first on the user's PATH.
VENV_BIN = Path(sys.executable).parent


def ms(seconds: float) -> float:
    return seconds * 1000.0


class Sample:
    """Timings of one figure across repeats, in seconds."""

    def __init__(self) -> None:
        self.values: list[float] = []
        self.failure: str | None = None

    def add(self, seconds: float) -> None:
        self.values.append(seconds)

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def min(self) -> float:
        return min(self.values)


class World:
    """One temp dir for the whole bench: two fake bins and their warm rune dirs."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.home.mkdir()
        self._runs = 0
        body = answer(QUESTION, "NO, not yet", [claim("The plan has no rollback step")])
        self.bins: dict[float, Path] = {}
        for sleep_s in (VOICE_S, 0.0):
            bin_dir = root / f"bin-{sleep_s:g}s"
            for name in NAMES:
                install_fake(bin_dir, name, answer=body, sleep_s=sleep_s)
            self.bins[sleep_s] = bin_dir
        # The detect cache stores the path of each CLI it found, so a rune dir warmed against
        # the 1 s fakes would send a "0 s" council to the 1 s fakes: one warm dir per bin.
        self.warm_dirs = {s: root / f"rune-warm-{s:g}s" for s in self.bins}

    def run_id(self, kind: str) -> str:
        self._runs += 1
        return f"bench-{kind}-{self._runs}"

    def fresh_rune_dir(self) -> Path:
        self._runs += 1
        return self.root / f"rune-cold-{self._runs}"

    def voice_env(self, sleep_s: float) -> dict[str, str]:
        # HOME points into the temp dir so no real CLI config (e.g. ~/.codex) is read.
        return {
            "PATH": path_with(self.bins[sleep_s]),
            "HOME": str(self.home),
            "RUNE_COUNCIL_ALLOW_EXTERNAL": "1",  # consent for external dispatch
        }

    def process_env(self, sleep_s: float) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("RUNE_COUNCIL_DIR", None)
        env.update(self.voice_env(sleep_s))
        return env


class Phases:
    """Splits one in-process council into phases using the run's own events."""

    def __init__(self) -> None:
        self.dispatched: float | None = None
        self.last_voice: float | None = None
        self.result: float | None = None

    def on_event(self, _result: Any, event: Any) -> None:
        now = time.perf_counter()
        if event.kind == "council.dispatched":
            self.dispatched = now
        elif event.kind == "voice.status":
            self.last_voice = now
        elif event.kind == "council.result":
            self.result = now


class WriteMeter:
    """Accumulates time spent in run-file writes (each one is an fsynced atomic rename)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.count = 0
        self._original = RunRecorder.write

    def __enter__(self) -> WriteMeter:
        meter, original = self, self._original

        def timed(recorder: RunRecorder, result: Any) -> None:
            t = time.perf_counter()
            try:
                original(recorder, result)
            finally:
                meter.seconds += time.perf_counter() - t
                meter.count += 1

        RunRecorder.write = timed  # type: ignore[method-assign, assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        RunRecorder.write = self._original  # type: ignore[method-assign]


def in_process(
    world: World, sleep_s: float, rune_dir: Path, phases: dict[str, Sample] | None = None
) -> tuple[float, int]:
    """Wall time of one convene() and how many voices came back valid."""
    request = {"id": world.run_id("inproc"), "question": QUESTION, "n": N_VOICES}
    tracker = Phases()
    with WriteMeter() as writes:
        started = time.perf_counter()
        result = convene(
            request,
            CouncilOptions(
                rune_dir=rune_dir,
                env=world.voice_env(sleep_s),
                on_event=tracker.on_event,
            ),
        )
        elapsed = time.perf_counter() - started
    if phases is not None and tracker.dispatched and tracker.last_voice and tracker.result:
        phases["setup"].add(tracker.dispatched - started)
        phases["voices"].add(tracker.last_voice - tracker.dispatched)
        phases["finish"].add(tracker.result - tracker.last_voice)
        phases["teardown"].add(started + elapsed - tracker.result)
        phases["writes"].add(writes.seconds)
        phases["n_writes"].add(writes.count)
    return elapsed, result.voices_valid


def run_timed(
    argv: list[str], env: dict[str, str] | None, cwd: Path
) -> tuple[float, int, str, str]:
    started = time.perf_counter()
    proc = subprocess.run(
        argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, check=False
    )
    elapsed = time.perf_counter() - started
    return (
        elapsed,
        proc.returncode,
        proc.stdout.decode(errors="replace"),
        proc.stderr.decode(errors="replace"),
    )


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:120] if lines else "(no output)"


def cli_council(world: World, rune_dir: Path, sample: Sample) -> None:
    # `python -m rune_council.cli` rather than a `rune` found on PATH: PATH holds only the fakes.
    argv = [
        sys.executable,
        "-m",
        "rune_council.cli",
        "council",
        QUESTION,
        "--json",
        "--n",
        str(N_VOICES),
        "--rune-dir",
        str(rune_dir),
        "--id",
        world.run_id("cli"),
    ]
    elapsed, code, out, err = run_timed(argv, world.process_env(0.0), world.root)
    if code != 0:
        sample.failure = f"exit {code}: {last_line(err or out)}"
        return
    try:
        valid = json.loads(out)["voices_valid"]
    except (ValueError, KeyError):
        # Exit 0 with no JSON would mean the module ran without calling main().
        sample.failure = f"exit 0 but no CouncilResult JSON: {last_line(out or err)}"
        return
    if valid != N_VOICES:
        sample.failure = f"only {valid}/{N_VOICES} voices valid"
    sample.add(elapsed)


def help_command() -> list[str]:
    script = VENV_BIN / "rune"
    return (
        [str(script), "--help"]
        if script.exists()
        else [sys.executable, "-m", "rune_council.cli", "--help"]
    )


def cli_help(world: World, sample: Sample, env: dict[str, str] | None = None) -> None:
    elapsed, code, out, err = run_timed(help_command(), env, world.root)
    if code != 0:
        sample.failure = f"exit {code}: {last_line(err or out)}"
        return
    sample.add(elapsed)


def parallel(argvs: list[list[str]], stdin: bytes) -> float:
    """Start all at once, feed each the same stdin, wait for the last: the spawn floor."""
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            a,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={"PATH": "/usr/bin:/bin"},
        )
        for a in argvs
    ]
    for p in procs:
        p.communicate(stdin)
    return time.perf_counter() - started


ImportRow = tuple[int, int, int, str]  # cumulative us, self us, depth, module


def import_rows(code: str, tries: int = 3) -> tuple[list[ImportRow], str | None]:
    """The quickest of a few `-X importtime` runs of ``code``, and why it failed, if it did."""
    best: list[ImportRow] | None = None
    failure = None
    for _ in range(tries):
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", code],
            capture_output=True,
            text=True,
            check=False,
            cwd=ROOT,
        )
        rows: list[ImportRow] = []
        for line in proc.stderr.splitlines():
            if not line.startswith("import time:"):
                continue
            parts = line[len("import time:") :].split("|")
            if len(parts) != 3 or not parts[1].strip().isdigit():
                continue  # the header line
            name = parts[2].rstrip()
            depth = (len(name) - len(name.lstrip())) // 2
            rows.append((int(parts[1]), int(parts[0]), depth, name.strip()))
        if proc.returncode != 0:
            failure = last_line(proc.stderr)
        # Noise only ever adds time, so the fastest run is the truest picture.
        if rows and (best is None or sum(r[1] for r in rows) < sum(r[1] for r in best)):
            best = rows
    return best or [], failure


def by_package(rows: list[ImportRow]) -> list[tuple[int, str]]:
    """Self time summed per top-level package: who owns the start-up, whoever imported it."""
    totals: dict[str, int] = {}
    for _cum, self_us, _depth, name in rows:
        top = name.split(".")[0]
        totals[top] = totals.get(top, 0) + self_us
    return sorted(((us, name) for name, us in totals.items()), reverse=True)


def fmt_row(label: str, sample: Sample, note: str = "") -> str:
    if not sample.values:
        return f"  {label:<46} {'-':>8} {'-':>8}   FAILED {sample.failure or ''}"
    if sample.failure:
        note = f"{note}  (some runs failed: {sample.failure})".strip()
    return f"  {label:<46} {ms(sample.median):>6.0f}ms {ms(sample.min):>6.0f}ms   {note}"


def measure(repeats: int) -> None:
    with tempfile.TemporaryDirectory(prefix="rune-bench-") as tmp:
        world = World(Path(tmp))
        keys = [
            "s1_warm",
            "s0_warm",
            "s0_cold",
            "cli_warm",
            "cli_cold",
            "help",
            "help_plain",
            "pass",
            "par_pass",
            "par_fake",
        ]
        s = {k: Sample() for k in keys}
        ph_warm = {k: Sample() for k in ("setup", "voices", "finish", "teardown", "writes")}
        ph_warm["n_writes"] = Sample()
        ph_cold = {k: Sample() for k in ph_warm}
        invalid: list[str] = []

        # The first call pays one-off costs (lazy imports, pydantic serializer warm-up) and
        # fills both warm caches; it is reported alone so it does not skew the medians.
        first, _ = in_process(world, 0.0, world.warm_dirs[0.0])
        in_process(world, VOICE_S, world.warm_dirs[VOICE_S])

        prompt = b"x" * 4000  # about the size of a composed voice prompt
        fakes = [[str(world.bins[0.0] / NAMES[i % 3])] for i in range(N_VOICES)]
        trivial = [[sys.executable, "-c", "pass"]] * N_VOICES

        for i in range(repeats):
            print(f"  repeat {i + 1}/{repeats} ...", file=sys.stderr, flush=True)
            # Interleaved so that a burst of noise from other processes hits every figure
            # a little rather than one figure a lot.
            t, valid = in_process(world, VOICE_S, world.warm_dirs[VOICE_S])
            s["s1_warm"].add(t)
            if valid != N_VOICES:
                invalid.append(f"1 s council: {valid}/{N_VOICES} valid")
            for key, rune_dir, phases in (
                ("s0_warm", world.warm_dirs[0.0], ph_warm),
                ("s0_cold", world.fresh_rune_dir(), ph_cold),
            ):
                t, valid = in_process(world, 0.0, rune_dir, phases)
                s[key].add(t)
                if valid != N_VOICES:
                    invalid.append(f"0 s council ({key}): {valid}/{N_VOICES} valid")
            cli_council(world, world.warm_dirs[0.0], s["cli_warm"])
            cli_council(world, world.fresh_rune_dir(), s["cli_cold"])
            cli_help(world, s["help"])
            # Typer renders help through rich unless told not to; the gap between these two
            # rows is what rich costs a user who only asked for --help.
            cli_help(world, s["help_plain"], {**os.environ, "TYPER_USE_RICH": "0"})
            s["pass"].add(run_timed([sys.executable, "-c", "pass"], None, world.root)[0])
            s["par_pass"].add(parallel(trivial, b""))
            s["par_fake"].add(parallel(fakes, prompt))

        cli_imports, cli_failure = import_rows("import rune_council.cli")
        run_imports, run_failure = import_rows("import rune_council.cli, rune_council.council")

    floor = VOICE_S
    over = s["s1_warm"]
    print()
    print(
        f"rune-council overhead  (python {sys.version.split()[0]}, {os.cpu_count()} cpus, "
        f"{repeats} repeats, n={N_VOICES} fake voices)"
    )
    print(f"  {'figure':<46} {'median':>8} {'min':>8}   note")
    print("  1. in-process convene(), voices take 1.0 s")
    print(
        fmt_row(
            "council, warm detect cache",
            over,
            f"x{over.median / floor:.2f} of the 1.0 s floor, +{ms(over.median - floor):.0f} ms "
            f"(min +{ms(over.min - floor):.0f} ms)",
        )
    )
    print("  2. in-process convene(), voices answer at once")
    print(fmt_row("council, warm detect cache", s["s0_warm"], "pure overhead"))
    print(
        fmt_row(
            "council, cold cache (runs DETECT)",
            s["s0_cold"],
            # The setup phase isolates detection; whole-run medians bury it in spawn noise.
            f"DETECT adds ~{ms(ph_cold['setup'].median - ph_warm['setup'].median):.0f} ms "
            "(setup phase, cold minus warm)"
            if ph_cold["setup"].values and ph_warm["setup"].values
            else "",
        )
    )
    print(
        f"  {'first convene() in this process, cold cache':<46} {ms(first):>6.0f}ms {'':>8}   "
        "one sample: one-off warm-up included"
    )
    for label, ph in (("warm", ph_warm), ("cold", ph_cold)):
        if ph["setup"].values:
            print(
                f"    where it goes ({label}, medians): setup+detect {ms(ph['setup'].median):.0f}"
                f" | voices {ms(ph['voices'].median):.0f} | gate+arbitrate "
                f"{ms(ph['finish'].median):.0f} | loop teardown {ms(ph['teardown'].median):.0f} ms;"
                f" {ph['n_writes'].median:.0f} run-file writes = {ms(ph['writes'].median):.0f} ms"
            )
    print("  3. whole `rune council ... --json` process, voices answer at once")
    print(
        fmt_row(
            "python -m rune_council.cli, warm cache",
            s["cli_warm"],
            f"+{ms(s['cli_warm'].median - s['s0_warm'].median):.0f} ms over in-process "
            "(interpreter, imports)"
            if s["cli_warm"].values
            else "",
        )
    )
    print(fmt_row("python -m rune_council.cli, cold cache", s["cli_cold"], "runs DETECT too"))
    print("  4. process start-up")
    print(
        fmt_row(
            f"{Path(help_command()[0]).name} --help",
            s["help"],
            "slow: see import breakdown"
            if s["help"].values and s["help"].median > 0.3
            else "cold start, as shipped",
        )
    )
    print(
        fmt_row(
            f"{Path(help_command()[0]).name} --help, TYPER_USE_RICH=0",
            s["help_plain"],
            f"rich disabled: {ms(s['help'].median - s['help_plain'].median):+.0f} ms vs shipped"
            if s["help"].values and s["help_plain"].values
            else "",
        )
    )
    print(fmt_row("python -c pass", s["pass"], "interpreter + site (venv .pth files)"))
    print(fmt_row(f"{N_VOICES} x python -c pass in parallel", s["par_pass"]))
    print(
        fmt_row(
            f"{N_VOICES} x fake CLI in parallel (sh + python -S)",
            s["par_fake"],
            "the floor for the 0 s council",
        )
    )
    print("  5. python -X importtime -c 'import rune_council.cli'  (rendering --help adds rich)")
    if cli_failure:
        print(f"     import FAILED: {cli_failure} (rows stop at the failure)")
    for cumulative, _self, depth, name in sorted(cli_imports, reverse=True)[:8]:
        print(f"     {cumulative / 1000:>7.1f} ms  {'  ' * depth}{name}")
    total = sum(r[1] for r in run_imports) / 1000
    print(
        f"     ... and with rune_council.council (what `rune council` loads): {total:.0f} ms, "
        "self time by package:"
    )
    if run_failure:
        print(f"     import FAILED: {run_failure}")
    print(
        "     "
        + ", ".join(f"{name} {us / 1000:.0f}" for us, name in by_package(run_imports)[:8])
        + " ms"
    )
    for problem in invalid:
        print(f"  warning: {problem}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="repeats per figure (default 7)")
    args = parser.parse_args(argv)
    measure(max(1, args.repeat))


if __name__ == "__main__":
    main()
