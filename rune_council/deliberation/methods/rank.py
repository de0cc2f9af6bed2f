"""The rank method: members rank each other's answers blind; the tally orders them.

Every member sees the others' answers under letters of its own shuffle and sends a RANK
line; the ballots, rewritten in canonical labels, form a transcript that :func:`..tally.tally_text`
counts (Borda x confidence, Kendall's W). The chairman writes the verdict from that order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ...core.contract import RankProposal, RankResult, RankShuffle, TallyReport, Voice
from .. import rank
from ..ballots import BallotBox, Reader, Reading, as_received, file_replies
from ..method import Outcome, Recount, Replay, Results, Round, Standing
from ..tally import tally_text


@dataclass(frozen=True)
class Ranked:
    """One round's ranking, counted and recorded, before anyone writes a verdict."""

    proposals: list[RankProposal]
    report: TallyReport
    result: RankResult


def round_seed(seed: str, number: int) -> str:
    """Each round shuffles afresh, reproducibly: round 1 by the seed itself."""
    return seed if number == 1 else f"{seed}#round{number}"


def ballot_setup(
    seed: str, number: int, voices: Sequence[Voice]
) -> tuple[list[RankProposal], dict[str, RankShuffle]]:
    """The anonymised answers and every member's own view of the others'."""
    proposals = rank.proposals_for(voices)
    at = round_seed(seed, number)
    return proposals, {p.voice_id: rank.shuffle_for(at, p.voice_id, proposals) for p in proposals}


def rankers(shuffles: Mapping[str, RankShuffle]) -> list[str]:
    """Who is asked to rank: every member shown at least one other answer."""
    return [vid for vid, s in shuffles.items() if s.shown]


def reader(shuffles: Mapping[str, RankShuffle]) -> Reader[list[str]]:
    """Reads a member's reply in the letters it was shown into canonical transcript lines."""

    def read(v: Voice, text: str) -> Reading[list[str]]:
        shuffle = shuffles[v.id]
        ranking = rank.read_ranking(v.id, text, shuffle)
        if ranking.rank is None:
            return Reading(None, "malformed ballot: no usable RANK line", ranking.dropped)
        lines = rank.canonical_lines(v.id, ranking, shuffle)
        return Reading(lines, lines[0], ranking.dropped)

    return read


def ranking_of(
    run_id: str,
    proposals: list[RankProposal],
    shuffles: Mapping[str, RankShuffle],
    box: BallotBox[list[str]],
) -> RankResult:
    """The filed ballots as a transcript in canonical labels, and its tally."""
    rank_lines = [lines[0] for lines in box.counted.values()]
    critique_lines = [line for lines in box.counted.values() for line in lines[1:]]
    own = [f"@own {p.voice_id} {p.label}" for p in proposals if p.voice_id in box.asked]
    transcript = rank.transcript_text(run_id, proposals, own + rank_lines, critique_lines)
    return RankResult(
        proposals=proposals,
        shuffles=list(shuffles.values()),
        ballots=box.ballots,
        absent=box.absent,
        transcript=transcript,
        tally=tally_text(transcript),
        dropped_lines=box.dropped,
    )


async def rank_answers(round: Round) -> Ranked:
    """Blind ballots from every member over the others' answers, tallied and announced."""
    proposals, shuffles = ballot_setup(round.seed, round.number, round.result.voices)
    prompts = {
        vid: rank.ballot_prompt(round.request.question, shuffles[vid], proposals, round.red_team)
        for vid in rankers(shuffles)
    }
    box = await round.ballots(prompts, reader(shuffles), "rank")
    result = ranking_of(round.result.id, proposals, shuffles, box)
    report = result.tally
    w = report.consensus.w
    round.publish(
        Outcome(rank=result),
        f"rank: {len(report.rankers)} ballot(s) counted, order "
        f"{' > '.join('='.join(level) for level in report.final_order) or '-'}, "
        f"W={'n/a' if w is None else f'{w:g}'}",
    )
    return Ranked(proposals, report, result)


def replay_ranking(replay: Replay, recorded: RankResult) -> RankResult:
    """The round's ranking filed again from the raw replies its file recorded."""
    proposals, shuffles = ballot_setup(replay.seed, replay.number, replay.voices)
    if not replay.answers_kept:
        # An earlier round's answers are not kept, so what each proposal said is taken as
        # recorded; which member holds which label is still the seat order's.
        said = {p.label: p.summary for p in recorded.proposals}
        proposals = [p.model_copy(update={"summary": said.get(p.label, "")}) for p in proposals]
    replies = {b.voice_id: as_received(b) for b in recorded.ballots}
    box = file_replies(replay.voices, rankers(shuffles), replies, reader(shuffles))
    return ranking_of(replay.run_id, proposals, shuffles, box)


class Rank:
    name = "rank"

    async def run(self, round: Round) -> Outcome:
        ranked = await rank_answers(round)
        disagreements = [d for d in round.result.agreement.dissent if d.label == "disagreement"]
        prompt = rank.chairman_prompt(
            round.request.question,
            ranked.proposals,
            ranked.report,
            disagreements,
            round.options.context,
        )
        arithmetic = rank.arithmetic_verdict(ranked.proposals, ranked.report, disagreements)
        items = {p.label: p.summary for p in ranked.proposals}
        synthesis = await round.chair.synthesise(prompt, arithmetic, items, "answers")
        return Outcome(synthesis=synthesis, rank=ranked.result)

    def standing(self, results: Results) -> Standing:
        if results.rank is None:
            return Standing()
        tally = results.rank.tally
        return Standing(tally.consensus, list(tally.dissenters))

    def recount(self, where: str, results: Results) -> list[Recount]:
        """The whole tally again from the transcript the ballots were recorded in."""
        if results.rank is None:
            return []
        name = f"{where}.rank.tally"
        recorded = results.rank.tally.model_dump(mode="json")
        fresh = tally_text(results.rank.transcript).model_dump(mode="json")
        return [Recount(name, [(name, recorded, fresh)])]

    def replay(self, replay: Replay, results: Results) -> list[Recount]:
        """Proposals, shuffles, every ballot, the transcript and the tally, from the replies."""
        if results.rank is None:
            return []
        name = f"{replay.where}.rank"
        fresh = replay_ranking(replay, results.rank).model_dump(mode="json")
        return [Recount(name, [(name, results.rank.model_dump(mode="json"), fresh)])]


METHOD = Rank()
