"""While the voices think, the judging step's modules are loaded; nothing a user sees changes.

Real ``rune council`` processes against a loopback endpoint whose models take a moment to
answer, each run once as it is and once with the warm-up taken out: the warm-up must have
loaded the judging modules before the council judged (and without it they must not be
there yet, or the check proves nothing), and the two must print the same ``--json`` and
write the same run file, apart from what differs between any two runs (times, the process).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.bin import path_with
from tests.helpers import QUESTION, ROLLBACK, answer
from tests.http_server import Behaviour, OpenAIServer

MODELS = ["meta/llama-3.3-70b-instruct", "mistralai/mistral-large-2-instruct"]

# Runs the command line as `rune` does, with the warm-up taken out when asked, and writes
# whether the judging step's module was already loaded when the council came to judge.
PROBE = """
import json, os, sys
from rune_council.council import pipeline
if os.environ["PROBE_WARMUP"] == "off":
    class Off:
        def start(self):
            return self
        def finish(self):
            pass
    pipeline.Warmup = Off
judge = pipeline._judge
def judging(*args):
    with open(os.environ["PROBE_OUT"], "w") as out:
        json.dump({"loaded": "rune_council.stages.verdict" in sys.modules}, out)
    return judge(*args)
pipeline._judge = judging
sys.argv = ["rune", *sys.argv[1:]]
from rune_council.cli import main
main()
"""

# What differs between any two runs of the same council: when things happened, how long
# they took, the process that ran it and the mark on its voices (a note quotes when the
# models were listed).
VOLATILE = (
    "started_at",
    "finished_at",
    "heartbeat_at",
    "at",
    "latency_ms",
    "duration_seconds",
    "pid",
    "started",
    "voice_marker",
)
_SCALAR = r'("(?:[^"\\]|\\.)*"|-?[0-9][0-9.eE+-]*|null)'
_VOLATILE_VALUE = re.compile(rf'"({"|".join(VOLATILE)})": ?{_SCALAR}')


_MOMENT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+(\+00:00|Z)?")


def steady(text: str) -> str:
    """``text`` with the value of every volatile key, and every moment quoted in a note,
    replaced; everything else as it is."""
    return _MOMENT.sub("<moment>", _VOLATILE_VALUE.sub(lambda m: f'"{m[1]}": "..."', text))


@pytest.fixture
def endpoint() -> Iterator[OpenAIServer]:
    text = answer(QUESTION, "NO", [ROLLBACK])
    # Slow enough for the event loop to sit waiting, apart enough to answer in one order.
    behaviours = {m: Behaviour("slow", text, delay_s=0.6 + 0.3 * i) for i, m in enumerate(MODELS)}
    with OpenAIServer(models=MODELS, behaviours=behaviours) as srv:
        yield srv


def council(tmp: Path, base_url: str, warmup: str) -> tuple[str, str, bool]:
    """(its --json, its run file, whether judging's module was loaded before it judged)."""
    rune = tmp / ".rune"
    run_file = rune / "council" / "run-warm.json"
    run_file.unlink(missing_ok=True)
    probe_out = tmp / f"probe-{warmup}.json"
    env = {
        "PATH": path_with(tmp / "bin"),
        "HOME": str(tmp),
        "LANG": "C.UTF-8",
        "RUNE_COUNCIL_ALLOW_EXTERNAL": "1",
        "PROBE_WARMUP": warmup,
        "PROBE_OUT": str(probe_out),
        **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"},
    }
    args = ["council", "--json", "--n", "2", "--endpoint", base_url, "--id", "warm"]
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *args, "--rune-dir", str(rune), QUESTION],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout, run_file.read_text(), json.loads(probe_out.read_text())["loaded"]


def test_the_warmup_loads_the_judging_step_while_the_voices_think_and_changes_nothing(
    tmp_path: Path, endpoint: OpenAIServer
) -> None:
    # The first council on a machine looks for installed CLIs; the next ones read its cache.
    council(tmp_path, endpoint.base_url, "on")

    warm_json, warm_file, warm_loaded = council(tmp_path, endpoint.base_url, "on")
    cold_json, cold_file, cold_loaded = council(tmp_path, endpoint.base_url, "off")

    assert warm_loaded and not cold_loaded
    assert json.loads(warm_json)["voices_valid"] == 2
    # Byte for byte once the times are set aside: the same keys, values, order and layout.
    assert "..." in steady(warm_json)
    assert steady(warm_json) == steady(cold_json)
    assert steady(warm_file) == steady(cold_file)


def test_a_warmup_that_fails_ends_quietly_and_leaves_the_process_free_to_exit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import asyncio
    import threading
    import time

    from rune_council.council import warmup

    monkeypatch.setattr(warmup, "AFTER_ANSWERS", ("rune_council.no_such_module",))
    before = threading.active_count()

    async def waiting() -> bool:
        # A council waiting on its voices: the loop sits idle, the thread starts and fails.
        started = warmup.Warmup().start()
        await asyncio.sleep(0.2)
        ran = started._thread.ident is not None
        started.finish()
        return ran

    async def working() -> bool:
        # One that never waits (voices answering at once): no thread is started at all.
        started = warmup.Warmup().start()
        end = time.monotonic() + 0.2
        while time.monotonic() < end:
            await asyncio.sleep(0)
        ran = started._thread.ident is not None
        started.finish()
        return ran

    assert asyncio.run(waiting()) is True
    assert threading.active_count() == before
    assert asyncio.run(working()) is False
    assert threading.active_count() == before
