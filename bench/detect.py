"""What DETECT costs, and how soon a slot recovers after a hung voice times out.

Run: .venv/bin/python bench/detect.py [--repeat N]

1. DETECT over every adapter at once against the slowest single probe. The probes run in
   parallel, so the whole detection should cost about the slowest one, not the sum. Done
   twice: with fake CLIs whose ``--version`` takes a known time (40-400 ms), and with the
   real pinned CLIs from tests/e2e when they are installed (tests/e2e/install.sh).
2. Fallback latency: a voice hangs, its timeout (1 s) expires, the process tree is killed
   and the slot goes to the subagent. The figure is the time from the timeout to the
   subagent's answer being recorded, for a voice that obeys SIGTERM and for one that
   ignores it (which costs the kill grace period, 0.5 s).

Figures are printed, never asserted. Medians and minimums over the repeats.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the fakes live in the test tree

from rune_council import CouncilOptions, convene  # noqa: E402
from rune_council.core.contract import CouncilResult, RunEvent  # noqa: E402
from rune_council.discovery.detect import detect_runtimes, probe  # noqa: E402
from rune_council.runtimes.clis import BUILTIN  # noqa: E402
from tests.fakes.bin import install_fake, path_with  # noqa: E402
from tests.helpers import answer, claim  # noqa: E402

Q = "Should we shard the orders table?"
TIMEOUT_S = 1.0


def fake_bin(where: Path) -> Path:
    """Every known CLI as a script whose --version takes 40 ms more than the one before."""
    where.mkdir(parents=True)
    for index, adapter in enumerate(BUILTIN.values()):
        delay = 0.04 * (index + 1)
        script = where / adapter.executable
        script.write_text(f'#!/bin/sh\nsleep {delay}\necho "{adapter.name} 1.{index}.0"\n')
        script.chmod(0o755)
    return where


def real_bin() -> Path | None:
    bins = [
        ROOT / "tests" / "e2e" / "node_modules" / ".bin",
        ROOT / ".e2e" / "aider-venv" / "bin",
    ]
    if not (bins[0] / "claude").exists():
        return None
    link_dir = Path(tempfile.mkdtemp(prefix="bench-detect-real-"))
    for name in BUILTIN:
        for b in bins:
            if (b / name).exists():
                (link_dir / name).symlink_to(b / name)
                break
    return link_dir


def time_detect(env: dict[str, str], repeat: int) -> tuple[list[float], dict[str, list[float]]]:
    whole: list[float] = []
    single: dict[str, list[float]] = {name: [] for name in BUILTIN}
    for _ in range(repeat):
        started = time.perf_counter()
        report = asyncio.run(detect_runtimes(env))
        whole.append(time.perf_counter() - started)
        assert any(d.status != "unavailable" for d in report.detected), report
        for name, adapter in BUILTIN.items():
            started = time.perf_counter()
            asyncio.run(probe(adapter, env))
            single[name].append(time.perf_counter() - started)
    return whole, single


def report_detect(title: str, env: dict[str, str], repeat: int) -> None:
    whole, single = time_detect(env, repeat)
    slowest_name = max(single, key=lambda n: statistics.median(single[n]))
    slowest = single[slowest_name]
    total = sum(statistics.median(v) for v in single.values())
    print(f"  {title}")
    print(f"    all {len(BUILTIN)} probes in parallel   median {ms(whole)}  min {ms(whole, min)}")
    print(
        f"    slowest single probe ({slowest_name:<8}) median {ms(slowest)}  min {ms(slowest, min)}"
    )
    ratio = statistics.median(whole) / statistics.median(slowest)
    print(
        f"    ratio all/slowest: {ratio:.2f}   (one after another would take {total * 1000:.0f} ms)"
    )


def ms(values: list[float], how: object = statistics.median) -> str:
    return f"{how(values) * 1000:7.0f} ms"  # type: ignore[operator]


def fallback_latency(tmp: Path, mode: str, repeat: int) -> list[float]:
    bin_dir = tmp / f"bin-{mode}"
    good = answer(Q, "NO", [claim("The plan has no rollback step")])
    install_fake(bin_dir, "claude", answer=good)
    install_fake(bin_dir, "codex", answer=good, mode=mode)
    env = {
        "PATH": path_with(bin_dir),
        "HOME": str(tmp),
        "RUNE_COUNCIL_LOGIN_SHELL": "0",
    }
    samples: list[float] = []
    for run in range(repeat):
        marks: dict[str, float] = {}

        def on_event(
            result: CouncilResult, event: RunEvent, marks: dict[str, float] = marks
        ) -> None:
            now = time.perf_counter()
            if event.voice_id != "v2":
                return
            if event.status == "running" and "dispatched" in event.detail:
                marks["dispatched"] = now
            elif event.status == "complete":
                marks["answered"] = now

        convene(
            {
                "id": f"fb-{mode}-{run}",
                "question": Q,
                "n": 2,
                "budget": {"per_voice_timeout_s": TIMEOUT_S},
            },
            CouncilOptions(
                rune_dir=tmp / f"rune-{mode}",
                env=env,
                allow_external=True,
                subagent=lambda prompt: good,
                on_event=on_event,
            ),
        )
        samples.append(marks["answered"] - marks["dispatched"] - TIMEOUT_S)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"bench/detect.py  ({os.cpu_count()} cores, {args.repeat} repeats)")
    with tempfile.TemporaryDirectory(prefix="bench-detect-") as scratch:
        tmp = Path(scratch)
        print("1. DETECT: every probe at once vs the slowest single probe")
        env = {
            "PATH": path_with(fake_bin(tmp / "fakes")),
            "HOME": str(tmp),
            "RUNE_COUNCIL_LOGIN_SHELL": "0",
        }
        report_detect("fake CLIs, --version takes 40..400 ms", env, args.repeat)
        real = real_bin()
        if real is None:
            print("  real pinned CLIs: not installed (tests/e2e/install.sh), skipped")
        else:
            env = {
                "PATH": f"{real}:/usr/bin:/bin",
                "HOME": str(tmp),
                "RUNE_COUNCIL_LOGIN_SHELL": "0",
            }
            report_detect(
                "real pinned CLIs (claude codex gemini qwen opencode cline aider)", env, args.repeat
            )
        print(
            f"2. fallback latency: a hung voice's {TIMEOUT_S:g} s timeout to the subagent's answer"
        )
        for mode, label in (
            ("sleep", "hung voice that obeys SIGTERM"),
            ("ignore_sigterm", "hung voice that ignores SIGTERM"),
        ):
            samples = fallback_latency(tmp, mode, args.repeat)
            print(f"  {label:<34} median {ms(samples)}  min {ms(samples, min)}")


if __name__ == "__main__":
    main()
