"""The vote method: the chairman merges the answers into numbered items; every member votes.

The count is :func:`..vote.count_votes` (absence-aware threshold); the verdict is written
by the chairman from the items that passed, or from the count itself when it cannot
(:func:`..vote.arithmetic_verdict`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ...core.contract import ConsolidatedItem, Consolidation, DroppedLine, Voice, VoteResult
from ...core.safetext import Fence
from .. import consolidate, rank, vote
from ..ballots import DROPPED_CAP, BallotBox, Reader, Reading, as_received, file_replies
from ..method import Outcome, Recount, Replay, Results, Round, Standing


class Vote:
    name = "vote"

    async def run(self, round: Round) -> Outcome:
        merged = await _consolidate(round)
        how = "deterministic merge" if merged.fallback else f"merged by {merged.by}"
        round.publish(
            Outcome(consolidation=merged),
            f"consolidated into {len(merged.items)} item(s) ({how})",
        )
        prompt = vote.ballot_prompt(round.request.question, merged.items, round.red_team)
        prompts = {vid: prompt for vid in voters(round.members, merged.items)}
        box = await round.ballots(prompts, reader(merged.items), "vote")
        result = vote_of(merged.items, box, round.options.vote_threshold)
        round.publish(
            Outcome(vote=result),
            f"vote: {sum(1 for i in result.items if i.outcome == 'passed')} passed of "
            f"{len(result.items)}, {result.denominator} ballot(s) counted, "
            f"{len(result.absent)} absent",
        )
        synthesis = await round.chair.synthesise(
            _chair_prompt(round.request.question, result),
            vote.arithmetic_verdict(result),
            {f"item {i.number}": i.text for i in result.items},
            "items",
        )
        return Outcome(synthesis=synthesis, consolidation=merged, vote=result)

    def standing(self, results: Results) -> Standing:
        if results.vote is None:
            return Standing()
        return Standing(results.vote.consensus, vote.dissenters_of(results.vote), "votes")

    def recount(self, where: str, results: Results) -> list[Recount]:
        if results.vote is None:
            return []
        return [vote_recount(f"{where}.vote", results.vote)]

    def replay(self, replay: Replay, results: Results) -> list[Recount]:
        """Every ballot, the voter lists and the count, from the replies the file recorded."""
        if results.vote is None:
            return []
        name = f"{replay.where}.vote"
        fresh = replay_vote(replay, results.vote).model_dump(mode="json")
        return [Recount(name, [(name, results.vote.model_dump(mode="json"), fresh)])]


def voters(members: Sequence[Voice], items: Sequence[ConsolidatedItem]) -> list[str]:
    """Every member votes, when there is anything to vote on."""
    return [v.id for v in members] if items else []


def reader(items: Sequence[ConsolidatedItem]) -> Reader[dict[int, vote.Choice]]:
    numbers = [i.number for i in items]

    def read(v: Voice, text: str) -> Reading[dict[int, vote.Choice]]:
        mine, lines = vote.read_ballot(v.id, text, numbers)
        if not mine:
            return Reading(None, "malformed ballot: no usable VOTE or ABSTAIN line", lines)
        return Reading(mine, f"{len(mine)} vote(s)", lines)

    return read


def vote_of(
    items: Sequence[ConsolidatedItem], box: BallotBox[dict[int, vote.Choice]], threshold: float
) -> VoteResult:
    """The filed ballots counted under the absence-aware threshold."""
    return vote.count_votes(
        items,
        box.counted,
        threshold,
        ballots=box.ballots,
        absent=box.absent,
        dropped=box.dropped,
    )


def replay_vote(replay: Replay, recorded: VoteResult) -> VoteResult:
    """The round's vote filed again from the raw replies its file recorded.

    The last round votes on the consolidation the file holds (itself re-derived or sealed);
    an earlier round's consolidation is not kept, so its items are taken from its own count.
    """
    if replay.consolidation is not None:
        items = list(replay.consolidation.items)
    else:
        items = [
            ConsolidatedItem(number=i.number, text=i.text, sources=[], voice_ids=[])
            for i in recorded.items
        ]
    members = [v for v in replay.voices if v.status == "complete"]
    replies = {b.voice_id: as_received(b) for b in recorded.ballots}
    box = file_replies(replay.voices, voters(members, items), replies, reader(items))
    return vote_of(items, box, replay.options.vote_threshold)


def vote_recount(name: str, recorded: VoteResult) -> Recount:
    """The recorded ballots counted again; what the count decides, beside what was recorded."""
    fresh = vote.recount(recorded)
    values: list[tuple[str, object, object]] = [
        (f"{name}.denominator", recorded.denominator, fresh.denominator)
    ]
    for i, (old, new) in enumerate(zip(recorded.items, fresh.items, strict=True)):
        values.append((f"{name}.items[{i}].required", old.required, new.required))
        values.append((f"{name}.items[{i}].outcome", old.outcome, new.outcome))
    values.append((f"{name}.unvoted", recorded.unvoted, fresh.unvoted))
    return Recount(name, values)


async def _consolidate(round: Round) -> Consolidation:
    valid = round.members
    sources = consolidate.sources_of(valid)
    text, attempt, reason = (
        await round.chair.ask(consolidate.orchestrator_prompt(round.request.question, sources))
        if sources
        else (None, None, "nothing to consolidate")
    )
    dropped: list[DroppedLine] = []
    if text is not None:
        reading = consolidate.read_consolidation(text, sources)
        dropped = reading.dropped[:DROPPED_CAP]
        if reading.items is not None:
            return Consolidation(
                items=reading.items,
                by=round.chair.name,
                attempt=attempt,
                dropped_lines=dropped,
                notes=reading.notes,
            )
        reason = f"unusable answer: {reading.reason}"
    return Consolidation(
        items=consolidate.deterministic_merge(valid, round.result.clusters),
        fallback="deterministic",
        fallback_reason=reason,
        attempt=attempt,
        dropped_lines=dropped,
    )


def _chair_prompt(question: str, result: VoteResult) -> str:
    passed = [i for i in result.items if i.outcome == "passed"]
    fence = Fence()
    return (
        f"{rank.CHAIR_OPENING}. Its members voted on numbered items; the vote is arithmetic "
        f"and not yours to change. {fence.rule()}\n\n"
        f"Question:\n{question}\n\nItems that passed:\n"
        + (
            "\n".join(f"{i.number}. {fence.wrap(str(i.number), i.text)}" for i in passed)
            or "(none)"
        )
        + "\n\nItems that failed or got no vote:\n"
        + (
            "\n".join(
                f"{i.number}. ({i.outcome}) {fence.wrap(str(i.number), i.text)}"
                for i in result.items
                if i.outcome != "passed"
            )
            or "(none)"
        )
        + "\n\nWrite the council's verdict for a person in a few short paragraphs from the "
        "items that passed. Where members split, start that paragraph with [UNCERTAIN]. "
        'Finish with one line: SYNTH open=["<open question>"] (empty if none).\n'
    )


METHOD = Vote()
