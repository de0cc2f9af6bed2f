"""Real run files for the run page's browser tests, written by real councils of scripted voices.

Each is what a council of that kind leaves on disk: one that halted on divergence, one where no
voice answered, one cut short by its deadline, the demo's (dissent of several kinds), and one
still in its second round. The last is caught live: its first member copies the run file the
moment it is asked for round 2, and that copy becomes the run file, so the page reads exactly
what a reader sees mid-round. Its writer is the test process itself, alive all along, so the
server shows it as running rather than abandoned.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from rune_council import CouncilOptions, FunctionRuntime, convene
from rune_council.core.contract import CouncilResult
from rune_council.demo import demo_request, demo_runtimes
from rune_council.testing import ScriptedRuntime
from tests.helpers import ROLLBACK, UNDO, answer
from tests.test_deliberation import OFFLINE, Q, member, request, scripted, three

CHAIR = (
    'Verdict: hold the plan until it has a rollback step.\nSYNTH open=["who owns the rollback?"]'
)


def _copying_at_round_two(
    inner: Callable[[str], str], source: Path, copy: Path
) -> Callable[[str], str]:
    def fn(prompt: str) -> str:
        if prompt.startswith("An earlier round of this council") and not copy.exists():
            # The recorder makes a version once the council's loop has finished what it is
            # doing and its writer thread puts it on disk a moment later: wait for the version
            # that holds round 1 and this member at work on round 2 before catching it.
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                doc = json.loads(source.read_bytes())
                rounds = (doc.get("deliberation") or {}).get("rounds") or []
                if len(rounds) >= 1 and doc["voices"][0]["status"] == "running":
                    break
                time.sleep(0.01)
            shutil.copyfile(source, copy)
        return inner(prompt)

    return fn


def mid_round(rune: Path, run_id: str = "midround") -> Path:
    """A two-round council caught while round 2 runs: round 1 recorded, no verdict yet."""
    path = rune / "council" / f"run-{run_id}.json"
    copy = rune / f"caught-{run_id}.json"
    voices = three()
    # Members think a moment before they answer, as real ones do: the council's loop
    # meanwhile makes the version that shows them at work (an answer is called on the loop).
    # The first answers first, so it is caught with none of round 2 finished.
    for later in voices[1:]:
        later.delay_s = 0.6
    voices[0] = ScriptedRuntime(
        _copying_at_round_two(scripted("NO, not before a rollback exists", [ROLLBACK]), path, copy),
        name="claude",
        family="anthropic",
        source="subagent",
        delay_s=0.3,
    )
    chair = FunctionRuntime(lambda prompt: CHAIR, name="chair")
    convene(
        request(run_id, method="rank", rounds={"max_rounds": 2, "convergence_threshold": 1.0}),
        CouncilOptions(runtimes=voices, rune_dir=rune, orchestrator=chair),
    )
    copy.replace(path)
    return path


def halted(rune: Path, run_id: str = "halted") -> CouncilResult:
    """Round 2's consensus falls far below round 1's: the council halts for a person."""
    voices = three()
    voices[1] = member(scripted("NO", [UNDO, OFFLINE], turns=True), "codex", "openai")
    chair = FunctionRuntime(lambda prompt: CHAIR, name="chair")
    return convene(
        request(
            run_id,
            method="rank",
            rounds={"max_rounds": 3, "on_divergence": "halt", "convergence_threshold": 1.0},
        ),
        CouncilOptions(runtimes=voices, rune_dir=rune, orchestrator=chair),
    )


def empty(rune: Path, run_id: str = "empty") -> CouncilResult:
    """Every voice fails: the council ends with no valid voice."""

    def down(prompt: str) -> str:
        raise RuntimeError("this member is down")

    voices = [
        member(down, "claude", "anthropic"),
        member(down, "codex", "openai"),
        member(down, "gemini", "google"),
    ]
    return convene(request(run_id), CouncilOptions(runtimes=voices, rune_dir=rune))


def partial(rune: Path, run_id: str = "partial") -> CouncilResult:
    """Two families answer at once, the third is still thinking at the deadline."""
    fast = answer(Q, "NO", [ROLLBACK])
    voices = [
        ScriptedRuntime(fast, family="anthropic", name="claude", source="subagent"),
        ScriptedRuntime(answer(Q, "NO", [UNDO]), family="openai", name="codex", source="subagent"),
        ScriptedRuntime(fast, family="google", name="gemini", source="subagent", delay_s=30),
    ]
    ask = {**request(run_id), "budget": {"deadline_s": 0.5, "per_voice_timeout_s": 60}}
    return convene(ask, CouncilOptions(runtimes=voices, rune_dir=rune))


def demo(rune: Path, run_id: str = "demo") -> CouncilResult:
    """The demo council: consensus, dissent of several kinds, a dissenting member, a drop."""
    return convene(demo_request(run_id), CouncilOptions(runtimes=demo_runtimes(0), rune_dir=rune))
