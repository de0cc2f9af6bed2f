"""The red-team method: attackers rank each other's attacks; the chairman writes a risk register.

The ballots are the rank method's (severity and novelty decide the order), so the run file
records ``method: "rank"``; what differs is the end: a register of risks instead of a verdict,
built from the claim clusters when no chairman answers usably.
"""

from __future__ import annotations

from ...core.contract import RiskRegister, Synthesis
from ...core.safetext import Fence
from .. import redteam
from ..method import Outcome, Recount, Replay, Results, Round, Standing
from .rank import METHOD as RANK
from .rank import rank_answers


class RedTeam:
    name = "red_team"

    async def run(self, round: Round) -> Outcome:
        ranked = await rank_answers(round)
        by_label = {p.label: p for p in ranked.proposals}
        fence = Fence()
        attacks = (
            fence.rule()
            + "\n\n"
            + "\n\n".join(
                f"Answer {label} (place {place}):\n{fence.wrap(label, by_label[label].summary)}"
                for place, level in enumerate(ranked.report.final_order, start=1)
                for label in level
            )
        )
        labels = {p.label: p.voice_id for p in ranked.proposals}
        text, attempt, reason = await round.chair.ask(
            redteam.register_prompt(round.request.question, attacks)
        )
        register: RiskRegister | None = None
        if text is not None:
            register, reason = redteam.read_register(text, labels, round.chair.name or "")
            if register is None:
                attempt, reason = round.chair.refused(attempt, reason, text)
        if register is None:
            register = redteam.arithmetic_register(
                round.result.voices, round.result.clusters, reason
            )
        synthesis = Synthesis(
            text=redteam.register_as_context(register, round.result.id),
            by=register.by,
            fallback=register.fallback,
            fallback_reason=register.fallback_reason,
            attempt=attempt,
        )
        outcome = Outcome(synthesis=synthesis, rank=ranked.result, risk_register=register)
        round.publish(outcome, f"risk register: {len(register.risks)} risk(s)")
        return outcome

    def standing(self, results: Results) -> Standing:
        return RANK.standing(results)

    def recount(self, where: str, results: Results) -> list[Recount]:
        return RANK.recount(where, results)

    def replay(self, replay: Replay, results: Results) -> list[Recount]:
        return RANK.replay(replay, results)


METHOD = RedTeam()
