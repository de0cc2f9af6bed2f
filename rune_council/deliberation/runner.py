"""The optional stages after ARBITRATE, wired: consolidate, vote or rank, synthesise, rounds.

This is the only module of the package that talks to runtimes. Members are asked through
the runtime that holds their seat; the orchestrator (also the chairman) is any ``Runtime``
the caller configured: a CLI, a function, an HTTP model. Everything decided is decided by
the pure modules beside this one; every step is recorded in ``result.deliberation`` and
announced through the council's event hook, so the run file shows it as it happens.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..contract import (
    AbsentMember,
    Attempt,
    ChainLink,
    Consolidation,
    CouncilResult,
    Deliberation,
    DeliberationMethod,
    DissentEntry,
    DroppedLine,
    MemberBallot,
    PerspectiveRequest,
    RankProposal,
    RankResult,
    RiskRegister,
    RoundRecord,
    RoundVoice,
    Synthesis,
    TallyReport,
    Voice,
    VoteResult,
)
from ..runtimes.base import Runtime, RuntimeReply
from ..runtimes.subagent import FunctionRuntime, SubagentFn
from ..stages.allocate import SlotPrompts
from ..stages.dispatch import ask_within, dispatch
from ..stages.dispatch import attempt_record as _attempt
from . import consolidate, rank, redteam, rounds, vote
from .tally import tally_text

BALLOT_TEXT_CAP = 4000
DROPPED_CAP = 200


@dataclass
class Hooks:
    """What the council lends the deliberation: its event stream and its arbiter."""

    emit: Callable[[str], None]
    voice_change: Callable[[Voice, str], None]
    rearbitrate: Callable[[], None]


def method_for(request: PerspectiveRequest) -> DeliberationMethod | None:
    opts = request.deliberation
    if opts is None:
        return None
    if opts.method is not None:
        return opts.method
    # Red team ranks attacks; rounds need a consensus score, and ranking gives one.
    if opts.council_type == "red_team" or opts.rounds.max_rounds > 1:
        return "rank"
    return None


def resolve_orchestrator(
    given: SubagentFn | Runtime | None,
    request: PerspectiveRequest,
    runtimes: Mapping[str, Runtime],
) -> tuple[Runtime | None, str | None]:
    """The caller's orchestrator, else the runtime the request names; a note if it is missing."""
    if given is not None:
        if isinstance(given, FunctionRuntime) or hasattr(given, "ask"):
            return given, None  # type: ignore[return-value]
        return FunctionRuntime(fn=given, name="orchestrator"), None
    name = request.deliberation.orchestrator if request.deliberation else None
    if name is None:
        return None, None
    found = runtimes.get(name)
    if found is None:
        known = ", ".join(sorted(runtimes)) or "none"
        return None, f"orchestrator {name!r} is not an available runtime (available: {known})"
    return found, None


def adapt_prompts(
    request: PerspectiveRequest, prompts: Mapping[str, SlotPrompts]
) -> dict[str, SlotPrompts]:
    """Attack framing for a red team; an earlier council's findings as context."""
    out = dict(prompts)
    opts = request.deliberation
    if opts is None:
        return out
    if opts.council_type == "red_team":
        out = redteam.attack_prompts(out)
    if opts.context:
        head = (
            "Findings of an earlier council on this question follow. Weigh them, check them "
            "against the material, and say where you disagree; do not simply repeat them.\n"
            f"<<<CONTEXT\n{opts.context}\nCONTEXT>>>\n\n"
        )
        out = {
            vid: SlotPrompts(head + p.primary, head + p.fallback, p.fallback_persona)
            for vid, p in out.items()
        }
    return out


class _Deliberation:
    def __init__(
        self,
        result: CouncilResult,
        request: PerspectiveRequest,
        prompts: Mapping[str, SlotPrompts],
        runtimes: Mapping[str, Runtime],
        subagent: Runtime | None,
        orchestrator: Runtime | None,
        hooks: Hooks,
    ) -> None:
        assert request.deliberation is not None
        self.result = result
        self.request = request
        self.opts = request.deliberation
        self.prompts = dict(prompts)
        self.runtimes = runtimes
        self.subagent = subagent
        self.orchestrator = orchestrator
        self.hooks = hooks
        self.red = self.opts.council_type == "red_team"
        self.budget = request.budget
        self.seed = self.opts.shuffle_seed or result.id

    @property
    def d(self) -> Deliberation:
        assert self.result.deliberation is not None
        return self.result.deliberation

    # ----------------------------------------------------------------- members

    def _absent_answers(self) -> list[AbsentMember]:
        return [
            AbsentMember(
                voice_id=v.id,
                runtime=v.runtime,
                stage="answer",
                reason=v.drop_reason or f"status {v.status}",
            )
            for v in self.result.voices
            if v.status != "complete"
        ]

    async def _ballots(
        self, prompts: Mapping[str, str]
    ) -> dict[str, tuple[Voice, Runtime | None, RuntimeReply | None]]:
        members = [v for v in self.result.voices if v.status == "complete" and v.id in prompts]

        async def one(v: Voice) -> tuple[Voice, Runtime | None, RuntimeReply | None]:
            runtime = self.runtimes.get(v.runtime)
            if runtime is None:
                return v, None, None
            return v, runtime, await ask_within(runtime, prompts[v.id], self.budget)

        replies = await asyncio.gather(*(one(v) for v in members))
        return {v.id: (v, rt, reply) for v, rt, reply in replies}

    @staticmethod
    def _ballot_record(
        v: Voice, reply: RuntimeReply | None, outcome: str, detail: str
    ) -> MemberBallot:
        text = None if reply is None or reply.text is None else reply.text[:BALLOT_TEXT_CAP]
        return MemberBallot(
            voice_id=v.id,
            runtime=v.runtime,
            outcome=outcome,  # type: ignore[arg-type]
            detail=detail[:500],
            text=text,
            latency_ms=None if reply is None else reply.latency_ms,
        )

    def _record_absent(
        self,
        v: Voice,
        reply: RuntimeReply | None,
        outcome: str,
        why: str,
        ballots: list[MemberBallot],
        absent: list[AbsentMember],
    ) -> None:
        """A ballot that does not count: kept as sent, and its member leaves the denominator."""
        ballots.append(self._ballot_record(v, reply, outcome, why))
        absent.append(AbsentMember(voice_id=v.id, runtime=v.runtime, stage="ballot", reason=why))

    # ----------------------------------------------------------------- chairman

    async def _chair(self, prompt: str) -> tuple[str | None, Attempt | None, str]:
        chair = self.orchestrator
        if chair is None:
            return None, None, "no orchestrator configured"
        reply = await ask_within(chair, prompt, self.budget)
        attempt = _attempt(chair, reply)
        if reply.outcome != "ok" or not reply.text or not reply.text.strip():
            return None, attempt, f"{chair.name}: {reply.outcome}: {reply.detail}"
        return reply.text, attempt, "ok"

    async def _synthesise(self, prompt: str, arithmetic: str) -> Synthesis:
        text, attempt, reason = await self._chair(prompt)
        if text is not None:
            reading = rank.read_chairman(text)
            if reading.text is not None:
                return Synthesis(
                    text=reading.text,
                    by=self.orchestrator.name if self.orchestrator else None,
                    attempt=attempt,
                    open_questions=reading.open,
                    closed=not reading.open,
                    uncertainty_markers=rank.uncertainty_markers(reading.text),
                )
            reason = reading.reason
        return Synthesis(
            text=arithmetic,
            fallback="arithmetic",
            fallback_reason=reason,
            attempt=attempt,
            uncertainty_markers=rank.uncertainty_markers(arithmetic),
        )

    def _disagreements(self) -> list[DissentEntry]:
        return [d for d in self.result.agreement.dissent if d.label == "disagreement"]

    # ----------------------------------------------------------------- vote

    async def _consolidate(self) -> Consolidation:
        valid = [v for v in self.result.voices if v.status == "complete"]
        sources = consolidate.sources_of(valid)
        text, attempt, reason = (
            await self._chair(consolidate.orchestrator_prompt(self.request.question, sources))
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
                    by=self.orchestrator.name if self.orchestrator else None,
                    attempt=attempt,
                    dropped_lines=dropped,
                    notes=reading.notes,
                )
            reason = f"unusable answer: {reading.reason}"
        return Consolidation(
            items=consolidate.deterministic_merge(valid, self.result.clusters),
            fallback="deterministic",
            fallback_reason=reason,
            attempt=attempt,
            dropped_lines=dropped,
        )

    async def _vote_round(self) -> None:
        merged = await self._consolidate()
        self.d.consolidation = merged
        how = "deterministic merge" if merged.fallback else f"merged by {merged.by}"
        self.hooks.emit(f"consolidated into {len(merged.items)} item(s) ({how})")
        prompt = vote.ballot_prompt(self.request.question, merged.items, self.red)
        numbers = [i.number for i in merged.items]
        valid = [v for v in self.result.voices if v.status == "complete"]
        replies = await self._ballots({v.id: prompt for v in valid}) if merged.items else {}
        choices: dict[str, dict[int, str]] = {}
        ballots: list[MemberBallot] = []
        absent = self._absent_answers()
        dropped: list[DroppedLine] = []
        for v, runtime, reply in replies.values():
            if reply is None or runtime is None or reply.outcome != "ok" or reply.text is None:
                why = (
                    f"{v.runtime} is not available to vote"
                    if reply is None
                    else f"{reply.outcome}: {reply.detail}"
                )
                self._record_absent(v, reply, "failed", why, ballots, absent)
                continue
            mine, lines = vote.read_ballot(v.id, reply.text, numbers)
            dropped.extend(lines)
            if not mine:
                why = "malformed ballot: no usable VOTE or ABSTAIN line"
                self._record_absent(v, reply, "malformed", why, ballots, absent)
                continue
            choices[v.id] = mine
            ballots.append(self._ballot_record(v, reply, "counted", f"{len(mine)} vote(s)"))
        result = vote.count_votes(
            merged.items,
            choices,
            self.opts.vote_threshold,
            ballots=ballots,
            absent=absent,
            dropped=dropped[:DROPPED_CAP],
        )
        self.d.vote = result
        self.hooks.emit(
            f"vote: {sum(1 for i in result.items if i.outcome == 'passed')} passed of "
            f"{len(result.items)}, {result.denominator} ballot(s) counted, "
            f"{len(result.absent)} absent"
        )
        passed = [i for i in result.items if i.outcome == "passed"]
        arithmetic = _vote_verdict(result)
        prompt_s = (
            "You chair a council. Its members voted on numbered items; the vote is arithmetic "
            "and not yours to change.\n\n"
            f"Question:\n{self.request.question}\n\nItems that passed:\n"
            + ("\n".join(f"{i.number}. {i.text}" for i in passed) or "(none)")
            + "\n\nItems that failed or got no vote:\n"
            + (
                "\n".join(
                    f"{i.number}. {i.text} ({i.outcome})"
                    for i in result.items
                    if i.outcome != "passed"
                )
                or "(none)"
            )
            + "\n\nWrite the council's verdict for a person in a few short paragraphs from the "
            "items that passed. Where members split, start that paragraph with [UNCERTAIN]. "
            'Finish with one line: SYNTH open=["<open question>"] (empty if none).\n'
        )
        self.d.synthesis = await self._synthesise(prompt_s, arithmetic)

    # ----------------------------------------------------------------- rank

    async def _rank_round(self, round_no: int) -> None:
        proposals = rank.proposals_for(self.result.voices)
        seed = self.seed if round_no == 1 else f"{self.seed}#round{round_no}"
        shuffles = {p.voice_id: rank.shuffle_for(seed, p.voice_id, proposals) for p in proposals}
        prompts = {
            vid: rank.ballot_prompt(self.request.question, s, proposals, self.red)
            for vid, s in shuffles.items()
            if s.shown
        }
        replies = await self._ballots(prompts)
        ballots: list[MemberBallot] = []
        absent = self._absent_answers()
        dropped: list[DroppedLine] = []
        rank_lines: list[str] = []
        critique_lines: list[str] = []
        for p in proposals:
            if p.voice_id not in replies:
                continue
            v, runtime, reply = replies[p.voice_id]
            if reply is None or runtime is None or reply.outcome != "ok" or reply.text is None:
                why = (
                    f"{v.runtime} is not available to rank"
                    if reply is None
                    else f"{reply.outcome}: {reply.detail}"
                )
                self._record_absent(v, reply, "failed", why, ballots, absent)
                continue
            ranking = rank.read_ranking(v.id, reply.text, shuffles[v.id])
            dropped.extend(ranking.dropped)
            if ranking.rank is None:
                why = "malformed ballot: no usable RANK line"
                self._record_absent(v, reply, "malformed", why, ballots, absent)
                continue
            lines = rank.canonical_lines(v.id, ranking, shuffles[v.id])
            rank_lines.append(lines[0])
            critique_lines.extend(lines[1:])
            ballots.append(self._ballot_record(v, reply, "counted", lines[0]))
        own = [f"@own {p.voice_id} {p.label}" for p in proposals if p.voice_id in replies]
        transcript = rank.transcript_text(
            self.result.id, proposals, own + rank_lines, critique_lines
        )
        report = tally_text(transcript)
        self.d.rank = RankResult(
            proposals=proposals,
            shuffles=list(shuffles.values()),
            ballots=ballots,
            absent=absent,
            transcript=transcript,
            tally=report,
            dropped_lines=dropped[:DROPPED_CAP],
        )
        w = report.consensus.w
        self.hooks.emit(
            f"rank: {len(report.rankers)} ballot(s) counted, order "
            f"{' > '.join('='.join(level) for level in report.final_order) or '-'}, "
            f"W={'n/a' if w is None else f'{w:g}'}"
        )
        if self.red:
            await self._register(proposals, report)
            return
        prompt = rank.chairman_prompt(
            self.request.question, proposals, report, self._disagreements(), self.opts.context
        )
        arithmetic = rank.arithmetic_verdict(proposals, report, self._disagreements())
        self.d.synthesis = await self._synthesise(prompt, arithmetic)

    async def _register(self, proposals: list[RankProposal], report: TallyReport) -> None:
        by_label = {p.label: p for p in proposals}
        attacks = "\n\n".join(
            f"Answer {label} (place {place}):\n{by_label[label].summary}"
            for place, level in enumerate(report.final_order, start=1)
            for label in level
        )
        labels = {p.label: p.voice_id for p in proposals}
        text, attempt, reason = await self._chair(
            redteam.register_prompt(self.request.question, attacks)
        )
        register: RiskRegister | None = None
        if text is not None:
            register, reason = redteam.read_register(
                text, labels, self.orchestrator.name if self.orchestrator else ""
            )
        if register is None:
            register = redteam.arithmetic_register(self.result.voices, self.result.clusters, reason)
        self.d.risk_register = register
        self.d.synthesis = Synthesis(
            text=redteam.register_as_context(register, self.result.id),
            by=register.by,
            fallback=register.fallback,
            fallback_reason=register.fallback_reason,
            attempt=attempt,
        )
        self.hooks.emit(f"risk register: {len(register.risks)} risk(s)")

    # ----------------------------------------------------------------- rounds

    async def _next_round(self, round_no: int) -> None:
        draft = (
            self.d.synthesis.text if self.d.synthesis else "(the previous round wrote no verdict)"
        )
        previous = self.result.voices
        prompts = rounds.round_prompts(
            self.prompts, self.opts.rounds.round_prompt_prefix, draft, previous
        )
        # The same members sit again; a subagent that took a seat keeps it (no re-summoning).
        seats = [
            Voice(
                id=v.id,
                slot_role=v.slot_role,
                persona=v.persona,
                source=v.source,
                runtime=v.runtime,
                model_family=v.model_family,
                family_confidence=v.family_confidence,
                is_fallback=v.is_fallback,
            )
            for v in previous
        ]
        self.result.voices = seats
        self.hooks.emit(f"round {round_no}: dispatching {len(seats)} member(s) with the draft")
        await dispatch(
            seats, prompts, self.runtimes, self.subagent, self.budget, self.hooks.voice_change
        )
        self.hooks.rearbitrate()

    async def run(self, method: DeliberationMethod | None) -> None:
        opts = self.opts
        self.result.deliberation = Deliberation(
            method=method,
            council_type=opts.council_type,
            chain=ChainLink(red_team_run=opts.chained_from) if opts.chained_from else None,
        )
        if opts.context:
            self.d.notes.append("every voice was given the findings of an earlier council")
        if method is None:
            self.hooks.emit("no deliberation method: single pass")
            return
        previous: float | None = None
        for round_no in range(1, opts.rounds.max_rounds + 1):
            if round_no > 1:
                await self._next_round(round_no)
            if method == "vote":
                await self._vote_round()
                consensus = self.d.vote.consensus if self.d.vote else None
            else:
                await self._rank_round(round_no)
                consensus = self.d.rank.tally.consensus if self.d.rank else None
            score = consensus.w if consensus else None
            synthesis = self.d.synthesis
            closed = synthesis.closed if synthesis else True
            decision = rounds.decide(opts.rounds, round_no, score, previous, closed)
            record = RoundRecord(
                round=round_no,
                consensus_score=score,
                confidence_label=consensus.label if consensus else None,
                delta=decision.delta,
                diverged=decision.diverged,
                verdict=synthesis.text if synthesis else None,
                closed=closed,
                voices=[
                    RoundVoice(voice_id=v.id, runtime=v.runtime, status=v.status, stance=v.stance)
                    for v in self.result.voices
                ],
                vote=self.d.vote if opts.rounds.max_rounds > 1 else None,
                rank=self.d.rank if opts.rounds.max_rounds > 1 else None,
            )
            self.d.rounds.append(record)
            if decision.diverged and opts.rounds.on_divergence != "continue":
                self.d.divergence_detected = True
                self.d.notes.append(
                    f"round {round_no}: consensus fell by {-(decision.delta or 0):g} (> 0.05)"
                )
            if decision.halt:
                self.d.halted = True
                self.result.needs_decision = True
                self.result.decision = (
                    f"Deliberation halted after round {round_no}: the consensus score fell from "
                    f"{previous:g} to {score:g}; the council is diverging: a person should decide."
                    if previous is not None and score is not None
                    else f"Deliberation halted after round {round_no}: the council diverged."
                )
            if decision.converged and round_no < opts.rounds.max_rounds:
                self.d.converged_early = True
            if synthesis is not None and not synthesis.closed:
                self.d.notes.append(
                    f"round {round_no}: the verdict left {len(synthesis.open_questions)} "
                    "question(s) open, so it cannot close the council"
                )
            self.hooks.emit(f"round {round_no} done: {decision.reason}")
            if decision.stop:
                break
            previous = score


def _vote_verdict(result: VoteResult) -> str:
    lines = [
        f"Vote of {result.denominator} counted ballot(s); an item needed "
        f"{result.items[0].required if result.items else 0} yes vote(s) "
        f"(threshold {result.threshold:g} of the ballots counted)."
    ]
    for i in result.items:
        lines.append(
            f"{i.number}. {i.outcome.upper()} ({len(i.yes)} yes, {len(i.no)} no, "
            f"{len(i.abstain)} abstain): {i.text}"
        )
    split = [i for i in result.items if i.yes and i.no]
    for i in split:
        lines.append(
            f"\n[UNCERTAIN] Item {i.number} split the council: yes {', '.join(i.yes)}; "
            f"no {', '.join(i.no)}."
        )
    if result.absent:
        lines.append("Absent: " + ", ".join(f"{a.voice_id} ({a.reason})" for a in result.absent))
    return "\n".join(lines)


async def deliberate(
    result: CouncilResult,
    request: PerspectiveRequest,
    *,
    prompts: Mapping[str, SlotPrompts],
    runtimes: Mapping[str, Runtime],
    subagent: Runtime | None,
    orchestrator: Runtime | None,
    hooks: Hooks,
) -> None:
    """Run the optional stages the request asks for; results land in ``result.deliberation``."""
    await _Deliberation(result, request, prompts, runtimes, subagent, orchestrator, hooks).run(
        method_for(request)
    )
