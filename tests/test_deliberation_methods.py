"""A deliberation method added from outside the package runs a whole council.

Approval voting is written here, in the test, against the public ``Method`` protocol, and
registered at run time; the council, the run file, the verdict metadata and ``verify`` then
treat it as they treat the built-in methods. Members are in-process fakes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from rune_council import CouncilOptions, FunctionRuntime, RequestError, convene
from rune_council.core.contract import ConsolidatedItem, Synthesis, Voice
from rune_council.deliberation.ballots import Reading
from rune_council.deliberation.method import Outcome, Recount, Results, Round, Standing
from rune_council.deliberation.methods.vote import METHOD as VOTE
from rune_council.deliberation.registry import register, unregister
from rune_council.deliberation.vote import Choice, count_votes, read_ballot
from rune_council.runs import load
from rune_council.verify import verify
from tests.helpers import PLAN, QUESTION, ROLLBACK, SHARDS, UNDO, answer, council_result_schema

SCHEMA = council_result_schema()


class Approval:
    """Approval voting: each member approves any of the answers; enough approvals pass."""

    name = "approval"

    async def run(self, round: Round) -> Outcome:
        items = [
            ConsolidatedItem(
                number=k, text=v.stance or "", sources=[f"{v.id}.stance"], voice_ids=[v.id]
            )
            for k, v in enumerate(round.members, start=1)
        ]
        prompt = (
            "Approve every answer you can stand behind.\n"
            + "\n".join(f"{i.number}. {i.text}" for i in items)
            + "\nOne line per answer: VOTE -> <number> yes|no\n"
        )

        def read(v: Voice, text: str) -> Reading[dict[int, Choice]]:
            mine, dropped = read_ballot(v.id, text, [i.number for i in items])
            return Reading(mine or None, f"{len(mine)} approval(s)", dropped)

        box = await round.ballots({v.id: prompt for v in round.members}, read, "approve")
        result = count_votes(
            items,
            box.counted,
            round.options.vote_threshold,
            ballots=box.ballots,
            absent=box.absent,
            dropped=box.dropped,
        )
        top = max(result.items, key=lambda i: len(i.yes))
        return Outcome(vote=result, synthesis=Synthesis(text=f"Most approved: {top.text}"))

    def standing(self, results: Results) -> Standing:
        return VOTE.standing(results)

    def recount(self, where: str, results: Results) -> list[Recount]:
        return VOTE.recount(where, results)


@pytest.fixture
def approval() -> Iterator[None]:
    register(Approval())
    yield
    unregister("approval")


def member(
    name: str, family: str, stance: str, claim: dict[str, Any], approves: Callable[[str], bool]
) -> FunctionRuntime:
    def fn(prompt: str) -> str:
        if prompt.startswith("Approve every answer"):
            listed = re.findall(r"^(\d+)\. (.*)$", prompt, re.M)
            return "\n".join(f"VOTE -> {n} {'yes' if approves(t) else 'no'}" for n, t in listed)
        return answer(QUESTION, stance, [claim])

    return FunctionRuntime(fn, name=name, model_family=family, family_confidence="confirmed")


def members() -> list[FunctionRuntime]:
    def no(text: str) -> bool:
        return "NO" in text

    def gemini(text: str) -> bool:
        return "rollback" in text or "YES" in text

    return [
        member("claude", "anthropic", "NO, not before a rollback exists", ROLLBACK, no),
        member("codex", "openai", "NO, the plan has no way back", UNDO, no),
        member("gemini", "google", "YES, with care", SHARDS, gemini),
    ]


def request(run_id: str, method: str) -> dict[str, Any]:
    return {
        "id": run_id,
        "question": QUESTION,
        "n": 3,
        "artifact": {"name": "plan.md", "text": PLAN},
        "deliberation": {"method": method},
    }


def test_a_method_registered_by_the_caller_runs_a_council(approval: None, tmp_path: Path) -> None:
    result = convene(
        request("approve-1", "approval"),
        CouncilOptions(runtimes=members(), rune_dir=tmp_path),
    )

    d = result.deliberation
    assert d is not None and d.method == "approval" and d.vote is not None
    seat = {v.runtime: v.id for v in result.voices}
    # claude and codex approve both NO answers; gemini approves the rollback answer and its own.
    # Three ballots at the default 2/3 threshold: an answer needs 2 approvals.
    assert [(i.text, i.outcome) for i in d.vote.items] == [
        ("NO, not before a rollback exists", "passed"),
        ("NO, the plan has no way back", "passed"),
        ("YES, with care", "failed"),
    ]
    assert d.vote.denominator == 3 and d.vote.items[0].required == 2
    assert d.synthesis is not None
    assert d.synthesis.text == "Most approved: NO, not before a rollback exists"

    # The verdict metadata asked the registered method for the consensus. By hand: approvals
    # read as rankings, approved tied first; rank sums 4.5, 6, 7.5 around a mean of 6 give
    # S = 4.5; W = 12S / (m^2(n^3 - n) - m * sum(t^3 - t)) = 54 / (216 - 3 * 18) = 1/3.
    assert result.verdict is not None
    assert result.verdict.consensus_score == pytest.approx(1 / 3)
    assert result.verdict.confidence_label == "low"
    # gemini's ranking correlates -0.5 with each of the others; theirs average +0.25.
    assert result.verdict.dissenting_members == [seat["gemini"]]

    data = json.loads((tmp_path / "council" / "run-approve-1.json").read_text())
    jsonschema.validate(data, SCHEMA)
    assert data["deliberation"]["method"] == "approval"

    checked = verify(result)
    assert checked.reproduced and "deliberation.vote" in checked.checked
    forged = result.model_copy(deep=True)
    assert forged.deliberation is not None and forged.deliberation.vote is not None
    forged.deliberation.vote.items[2].outcome = "passed"
    assert [(d.field, d.recorded, d.recomputed) for d in verify(forged).differences] == [
        ("deliberation.vote.items[2].outcome", "passed", "failed")
    ]


def test_an_unregistered_method_fails_before_any_voice_is_asked(tmp_path: Path) -> None:
    asked: list[str] = []
    voice = FunctionRuntime(lambda p: asked.append(p) or "", name="claude")
    with pytest.raises(RequestError, match=r"deliberation\.method: no method named 'approval'"):
        convene(
            request("approve-2", "approval"),
            CouncilOptions(runtimes=[voice], rune_dir=tmp_path),
        )
    assert asked == [] and not (tmp_path / "council" / "run-approve-2.json").exists()


def test_a_name_cannot_be_registered_twice_by_accident(approval: None) -> None:
    with pytest.raises(ValueError, match="already registered"):
        register(Approval())


def test_a_run_file_from_a_method_not_installed_here_still_reads(
    approval: None, tmp_path: Path
) -> None:
    convene(request("approve-3", "approval"), CouncilOptions(runtimes=members(), rune_dir=tmp_path))
    unregister("approval")
    # As a reader gets it: the artifact kept beside the run file (contract 2.8) put back.
    again = load(tmp_path / "council" / "run-approve-3.json")
    assert again.deliberation is not None and again.deliberation.method == "approval"
    # Without the method its ballots cannot be recounted; the single pass still is.
    checked = verify(again)
    assert checked.reproduced and "decorrelation" in checked.checked
    assert not any(name.startswith("deliberation") for name in checked.checked)
