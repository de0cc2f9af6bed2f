"""A failed slot is seated again by ALLOCATE's rule: a new family first, the subagent last."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rune_council import CouncilOptions, convene
from rune_council.stages.allocate import Candidate, reseat
from tests.fakes.bin import install_fake, path_with
from tests.helpers import PLAN, QUESTION, ROLLBACK, UNDO, answer

Q = QUESTION


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Any]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    return {
        "bin": bin_dir,
        "env": {
            "PATH": path_with(bin_dir),
            "HOME": str(tmp_path),
            "RUNE_COUNCIL_ALLOW_EXTERNAL": "1",
        },
        "rune": tmp_path / ".rune",
    }


def _request(run_id: str, n: int) -> dict[str, Any]:
    return {"id": run_id, "question": Q, "n": n, "artifact": {"name": "plan.md", "text": PLAN}}


def test_a_failed_slot_goes_to_an_idle_cli_of_a_new_family(world: dict[str, Any]) -> None:
    install_fake(world["bin"], "claude", answer=answer(Q, "NO", [ROLLBACK]), mode="crash")
    install_fake(world["bin"], "codex", answer=answer(Q, "NO", [ROLLBACK]))
    install_fake(world["bin"], "gemini", answer=answer(Q, "NO", [UNDO]))
    host_calls: list[str] = []

    def host(prompt: str) -> str:
        host_calls.append(prompt)
        return answer(Q, "NO", [UNDO])

    result = convene(
        _request("fo1", 2), CouncilOptions(rune_dir=world["rune"], env=world["env"], subagent=host)
    )
    first = result.voices[0]
    # Before: the slot went to the subagent (or was dropped) while gemini sat idle, and the
    # run was NO_DECORRELATION.
    assert [(a.runtime, a.outcome) for a in first.attempts] == [
        ("claude", "exit_nonzero"),
        ("gemini", "ok"),
    ]
    assert first.runtime == "gemini" and first.model_family == "google"
    assert first.slot_role == "standard" and not first.is_fallback
    assert host_calls == []
    assert result.decorrelation == "MULTI_FAMILY"
    assert result.distinct_families == ["google", "openai"]
    assert result.runtime_report.used == ["codex", "gemini"]
    assert result.runtime_report.degraded_to_subagent == []
    # The slot's moves are in the run's events, not only in its final state.
    moves = [e.detail for e in result.events if e.voice_id == "v1"]
    assert any("the slot goes to gemini" in m for m in moves)


def test_with_no_idle_cli_left_the_subagent_takes_the_slot(world: dict[str, Any]) -> None:
    install_fake(world["bin"], "claude", answer=answer(Q, "NO", [ROLLBACK]), mode="crash")
    install_fake(world["bin"], "codex", answer=answer(Q, "NO", [ROLLBACK]))
    install_fake(world["bin"], "gemini", answer=answer(Q, "NO", [UNDO]), mode="crash")

    result = convene(
        _request("fo2", 2),
        CouncilOptions(
            rune_dir=world["rune"],
            env=world["env"],
            subagent=lambda prompt: answer(Q, "NO", [UNDO]),
        ),
    )
    first = result.voices[0]
    # Every attempt is kept, in the order the rule tried them.
    assert [(a.runtime, a.outcome) for a in first.attempts] == [
        ("claude", "exit_nonzero"),
        ("gemini", "exit_nonzero"),
        ("internal", "ok"),
    ]
    assert first.is_fallback and first.runtime == "internal"
    assert result.decorrelation == "NO_DECORRELATION"
    assert result.runtime_report.degraded_to_subagent == ["v1"]


def test_reseat_runs_the_allocation_rule_again() -> None:
    def c(name: str, family: str, confirmed: bool = True) -> Candidate:
        return Candidate(name, "external-cli", family, "confirmed" if confirmed else "unknown")

    idle = [c("opencode", "unknown", False), c("codex2", "openai"), c("gemini", "google")]
    # A family the council lacks comes before an idle runtime of a family it holds.
    assert reseat(idle, {"openai"}, []) == idle[2]
    # Preferred families first, as at allocation.
    idle = [c("gemini", "google"), c("mistral", "mistral")]
    assert reseat(idle, set(), ["mistral"]) == idle[1]
    # Nothing new: any idle runtime, confirmed families before unconfirmed wrappers.
    idle = [c("opencode", "unknown", False), c("codex2", "openai")]
    assert reseat(idle, {"openai", "google"}, []) == idle[1]
    assert reseat([], {"openai"}, []) is None
