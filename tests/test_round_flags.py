"""The deliberation's run-level flags are decided in one place (``rounds.raised``).

The runner raises halted, divergence_detected and converged_early as the rounds run;
``verify`` folds the same rule over the recorded rounds. For every divergence policy, and
for a council that converges early or only in its last round, the flags the run file
holds verify, and each flag edited alone is named.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rune_council import CouncilOptions, FunctionRuntime, convene
from rune_council.core.contract import CouncilResult
from rune_council.runs import load
from rune_council.verify import verify
from tests.helpers import UNDO
from tests.test_deliberation import OFFLINE, member, request, scripted, three

FLAGS = ("halted", "divergence_detected", "converged_early")
DIVERGING = {"max_rounds": 3, "convergence_threshold": 1.0}


def _run(tmp_path: Path, run_id: str, rounds: dict[str, Any], turns: bool) -> dict[str, Any]:
    rts = three()
    chair = None
    if turns:
        # One member turns round after its first ranking: the score falls by far more than
        # the divergence drop, and an open question keeps the council from converging.
        rts[1] = member(scripted("NO", [UNDO, OFFLINE], turns=True), "codex", "openai")
        chair = FunctionRuntime(
            lambda p: 'Add a rollback step first.\nSYNTH open=["more?"]', name="chair"
        )
    convene(
        request(run_id, method="rank", rounds=rounds),
        CouncilOptions(runtimes=rts, rune_dir=tmp_path, orchestrator=chair),
    )
    data: dict[str, Any] = json.loads((tmp_path / "council" / f"run-{run_id}.json").read_text())
    return data


@pytest.mark.parametrize(
    ("run_id", "rounds", "turns", "expected"),
    [
        ("warn", {**DIVERGING, "on_divergence": "warn"}, True, (False, True, False)),
        ("halt", {**DIVERGING, "on_divergence": "halt"}, True, (True, True, False)),
        ("continue", {**DIVERGING, "on_divergence": "continue"}, True, (False, False, False)),
        ("early", {"max_rounds": 3}, False, (False, False, True)),
        # Converging in the only round there is leaves no round unrun: not early.
        ("last", {"max_rounds": 1}, False, (False, False, False)),
    ],
)
def test_the_runner_and_verify_read_the_round_flags_alike(
    tmp_path: Path, run_id: str, rounds: dict[str, Any], turns: bool, expected: tuple[bool, ...]
) -> None:
    data = _run(tmp_path, run_id, rounds, turns)
    assert tuple(data["deliberation"][f] for f in FLAGS) == expected
    # As it lies on disk, its artifact read back from the sidecar (contract 2.8).
    clean = verify(load(tmp_path / "council" / f"run-{run_id}.json"))
    assert clean.reproduced, clean.differences
    assert {f"deliberation.{f}" for f in FLAGS} <= set(clean.checked)
    for flag in FLAGS:
        edited = json.loads(json.dumps(data))
        edited["deliberation"][flag] = not edited["deliberation"][flag]
        outcome = verify(CouncilResult.model_validate(edited))
        named = {d.field for d in outcome.differences}
        assert f"deliberation.{flag}" in named, (flag, named)
