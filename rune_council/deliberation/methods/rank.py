"""The rank method: members rank each other's answers blind; the tally orders them.

Every member sees the others' answers under letters of its own shuffle and sends a RANK
line; the ballots, rewritten in canonical labels, form a transcript that :func:`..tally.tally_text`
counts (Borda x confidence, Kendall's W). The chairman writes the verdict from that order.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...contract import RankProposal, RankResult, RankShuffle, TallyReport, Voice
from .. import rank
from ..ballots import Reading
from ..method import Outcome, Recount, Results, Round, Standing
from ..tally import tally_text


@dataclass(frozen=True)
class Ranked:
    """One round's ranking, counted and recorded, before anyone writes a verdict."""

    proposals: list[RankProposal]
    report: TallyReport
    result: RankResult


async def rank_answers(round: Round) -> Ranked:
    """Blind ballots from every member over the others' answers, tallied and announced."""
    proposals = rank.proposals_for(round.result.voices)
    seed = round.seed if round.number == 1 else f"{round.seed}#round{round.number}"
    shuffles = {p.voice_id: rank.shuffle_for(seed, p.voice_id, proposals) for p in proposals}
    prompts = {
        vid: rank.ballot_prompt(round.request.question, s, proposals, round.red_team)
        for vid, s in shuffles.items()
        if s.shown
    }

    def read(v: Voice, text: str) -> Reading[list[str]]:
        shuffle: RankShuffle = shuffles[v.id]
        ranking = rank.read_ranking(v.id, text, shuffle)
        if ranking.rank is None:
            return Reading(None, "malformed ballot: no usable RANK line", ranking.dropped)
        lines = rank.canonical_lines(v.id, ranking, shuffle)
        return Reading(lines, lines[0], ranking.dropped)

    box = await round.ballots(prompts, read, "rank")
    rank_lines = [lines[0] for lines in box.counted.values()]
    critique_lines = [line for lines in box.counted.values() for line in lines[1:]]
    own = [f"@own {p.voice_id} {p.label}" for p in proposals if p.voice_id in box.asked]
    transcript = rank.transcript_text(round.result.id, proposals, own + rank_lines, critique_lines)
    report = tally_text(transcript)
    result = RankResult(
        proposals=proposals,
        shuffles=list(shuffles.values()),
        ballots=box.ballots,
        absent=box.absent,
        transcript=transcript,
        tally=report,
        dropped_lines=box.dropped,
    )
    w = report.consensus.w
    round.publish(
        Outcome(rank=result),
        f"rank: {len(report.rankers)} ballot(s) counted, order "
        f"{' > '.join('='.join(level) for level in report.final_order) or '-'}, "
        f"W={'n/a' if w is None else f'{w:g}'}",
    )
    return Ranked(proposals, report, result)


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
        synthesis = await round.chair.synthesise(prompt, arithmetic)
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


METHOD = Rank()
