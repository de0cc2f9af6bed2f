"""The optional stages after ARBITRATE, wired: a method's rounds, re-judged between rounds.

The method the request names (see ``registry``) decides what members do in a round and
what the round concludes; this module runs the rounds the same way for every method: it
files each outcome in ``result.deliberation``, measures the consensus the method reports,
stops early, flags or halts on divergence, and before each later round dispatches the
members again with the draft verdict and judges their new answers with the same GATE,
NORMALIZE and ARBITRATE as the first pass. Every step is announced through the council's
event hook, so the run file shows it as it happens.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..core.contract import (
    ChainLink,
    CouncilResult,
    Deliberation,
    DeliberationOptions,
    PerspectiveRequest,
    RoundRecord,
    RoundVoice,
    Summon,
    Voice,
)
from ..core.prompts import compose_prompt
from ..core.runtime import Runtime
from ..runtimes.process import aftercare
from ..runtimes.subagent import SubagentFn
from ..stages.allocate import Candidate, SlotPrompts, reseat
from ..stages.dispatch import dispatch
from ..stages.verdict import reach_verdict
from . import redteam, registry, rounds
from .chair import Chair, resolve_orchestrator
from .metadata import seal, settle_decision
from .method import Method, Outcome, Round


@dataclass
class Hooks:
    """How the deliberation reports to the council: its event stream."""

    emit: Callable[[str], None]
    voice_change: Callable[[Voice, str], None]


def adapt_prompts(
    request: PerspectiveRequest, prompts: Mapping[str, SlotPrompts]
) -> dict[str, SlotPrompts]:
    """Attack framing for a red team; an earlier council's findings as context.

    Also refuses, before anything is dispatched, a method nobody registered.
    """
    out = dict(prompts)
    opts = request.deliberation
    if opts is None:
        return out
    registry.method_for(opts)
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


class _Rounds:
    def __init__(
        self,
        result: CouncilResult,
        request: PerspectiveRequest,
        opts: DeliberationOptions,
        artifact_name: str | None,
        prompts: Mapping[str, SlotPrompts],
        runtimes: Mapping[str, Runtime],
        subagent: Runtime | None,
        chair: Chair,
        hooks: Hooks,
    ) -> None:
        self.result = result
        self.request = request
        self.opts = opts
        self.artifact_name = artifact_name
        self.prompts = dict(prompts)
        self.runtimes = runtimes
        self.subagent = subagent
        self.chair = chair
        self.hooks = hooks
        self.seed = opts.shuffle_seed or result.id
        # Summons waiting for their round; a divergence summon is given one when it fires.
        self.waiting: list[tuple[Summon, int | None]] = [
            (s, s.round if s.on == "round" else None) for s in opts.summon
        ]

    @property
    def d(self) -> Deliberation:
        assert self.result.deliberation is not None
        return self.result.deliberation

    def _publish(self, outcome: Outcome, detail: str) -> None:
        outcome.file_into(self.d)
        self.hooks.emit(detail)

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
                joined_round=v.joined_round,
            )
            for v in previous
        ]
        for summon in self._due(round_no):
            joined = self._summon(summon, round_no, seats)
            if joined is not None:
                seats.append(joined)
                prompts.update(
                    rounds.round_prompts(
                        {joined.id: self.prompts[joined.id]},
                        self.opts.rounds.round_prompt_prefix,
                        draft,
                        previous,
                    )
                )
        self.result.voices = seats
        self.hooks.emit(f"round {round_no}: dispatching {len(seats)} member(s) with the draft")
        await dispatch(
            seats,
            prompts,
            self.runtimes,
            self.subagent,
            self.request.budget,
            self.hooks.voice_change,
        )
        self._rejudge()

    def _due(self, round_no: int) -> list[Summon]:
        due = [s for s, at in self.waiting if at == round_no]
        self.waiting = [(s, at) for s, at in self.waiting if at != round_no]
        return due

    def _unsummoned(self, last: int) -> None:
        for summon, at in self.waiting:
            when = f"in round {at}" if at is not None else "on divergence"
            why = "no divergence was detected" if at is None else f"it ended after round {last}"
            self.d.notes.append(f"{summon.who!r} was to be summoned {when}; not summoned: {why}")
        self.waiting = []

    def _summon(self, summon: Summon, round_no: int, seats: list[Voice]) -> Voice | None:
        """Seat a summoned member for this round and every later one, or say why not."""
        runtime = summoned_runtime(summon.who, self.runtimes, seats, self.subagent, self.request)
        why = "on divergence" if summon.on == "divergence" else "by request"
        if runtime is None:
            self.d.notes.append(
                f"round {round_no}: could not summon {summon.who!r} ({why}): no available "
                "runtime of that name or family"
            )
            return None
        voice = Voice(
            id=f"v{len(seats) + 1}",
            slot_role="standard",
            persona=summon.persona,
            source=runtime.source,
            runtime=runtime.name,
            model_family=runtime.model_family,
            family_confidence=runtime.family_confidence,
            joined_round=round_no,
        )
        prompt = compose_prompt(
            self.request, "standard", summon.persona, self.result.artifact_text, summon.framing
        )
        self.prompts.update(
            adapt_prompts(
                self.request, {voice.id: SlotPrompts(prompt, prompt, summon.persona or "")}
            )
        )
        self.d.notes.append(
            f"round {round_no}: summoned {voice.id} ({runtime.name}, {runtime.model_family}) "
            f"{why} as {summon.who!r}; it counts from this round on"
        )
        self.hooks.emit(f"round {round_no}: summoned {voice.id} {runtime.name}")
        return voice

    def _rejudge(self) -> None:
        """The new answers through the first pass's own judging; earlier notes and uses stay."""
        result = self.result
        notes, used = list(result.notes), set(result.runtime_report.used)
        fresh = reach_verdict(
            result,
            self.artifact_name,
            on_drop=lambda voice, dropped: self.hooks.voice_change(voice, dropped.reason),
        )
        result.notes = notes + [n for n in fresh if n not in notes]
        result.runtime_report.used = sorted(used | set(result.runtime_report.used))

    async def run(self, method: Method | None) -> None:
        opts = self.opts
        self.result.deliberation = Deliberation(
            method=registry.method_name(opts),
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
            outcome = await method.run(
                Round(
                    number=round_no,
                    request=self.request,
                    options=opts,
                    result=self.result,
                    seed=self.seed,
                    chair=self.chair,
                    runtimes=self.runtimes,
                    announce=self._publish,
                )
            )
            outcome.file_into(self.d)
            seal(self.d)
            consensus = method.standing(outcome).consensus
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
            flags = rounds.raised(opts.rounds, round_no, decision)
            if flags.divergence_detected:
                self.d.divergence_detected = True
                self.d.notes.append(
                    f"round {round_no}: consensus fell by {-(decision.delta or 0):g} "
                    f"(> {rounds.DIVERGENCE_DROP:g})"
                )
            if flags.halted:
                self.d.halted = True
                settle_decision(self.result)
            if flags.converged_early:
                self.d.converged_early = True
            if synthesis is not None and not synthesis.closed:
                self.d.notes.append(
                    f"round {round_no}: the verdict left {len(synthesis.open_questions)} "
                    "question(s) open, so it cannot close the council"
                )
            if decision.diverged:
                # A divergence summon joins the next round, if there is one.
                self.waiting = [(s, round_no + 1 if at is None else at) for s, at in self.waiting]
            self.hooks.emit(f"round {round_no} done: {decision.reason}")
            if decision.stop:
                self._unsummoned(round_no)
                break
            previous = score


def summoned_runtime(
    who: str,
    runtimes: Mapping[str, Runtime],
    seats: list[Voice],
    subagent: Runtime | None,
    request: PerspectiveRequest,
) -> Runtime | None:
    """Who answers a summons: the runtime so named; else an idle runtime of that family
    (then a seated one); for ``any``, ALLOCATE's own rule over the idle runtimes (a family
    the council lacks first), then the subagent."""
    if who in runtimes and who != "any":
        return runtimes[who]
    seated = {v.runtime for v in seats}
    idle = [r for name, r in runtimes.items() if name not in seated and r is not subagent]
    if who == "any":
        held = {v.model_family for v in seats if v.family_confidence == "confirmed"}
        pick = reseat(
            [Candidate(r.name, r.source, r.model_family, r.family_confidence) for r in idle],
            held,
            request.diversity.prefer_model_families,
        )
        return runtimes[pick.runtime] if pick is not None else subagent
    family = [r for r in idle if r.model_family == who]
    family += [r for r in runtimes.values() if r.model_family == who and r.name in seated]
    return family[0] if family else None


async def deliberate(
    result: CouncilResult,
    request: PerspectiveRequest,
    *,
    artifact_name: str | None,
    prompts: Mapping[str, SlotPrompts],
    runtimes: Mapping[str, Runtime],
    subagent: Runtime | None,
    orchestrator: SubagentFn | Runtime | None,
    hooks: Hooks,
) -> None:
    """Run the optional stages the request asks for; results land in ``result.deliberation``.

    ``orchestrator`` chairs (default: the runtime ``deliberation.orchestrator`` names);
    ``artifact_name`` is the name the voices were shown, for judging later rounds.
    """
    opts = request.deliberation
    if opts is None:
        return
    chair, note = resolve_orchestrator(orchestrator, request, runtimes)
    if note:
        result.notes.append(note)
    # A member's answer or ballot is used as soon as it is in; making sure the member left
    # nothing running, and removing its directories, follow a moment later, off the path to
    # the next stage, and are all done before the deliberation returns.
    async with aftercare():
        await _Rounds(
            result,
            request,
            opts,
            artifact_name,
            prompts,
            runtimes,
            subagent,
            Chair(chair, request.budget),
            hooks,
        ).run(registry.method_for(opts))
