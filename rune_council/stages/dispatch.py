"""Step 3, DISPATCH + DEGRADE: every slot at once; a failed slot is seated again.

This stage owns no process or HTTP code: each runtime does its own I/O behind ``ask``. What
lives here is the slot's life: queued → running → complete, or running → (another runtime
running) → … → (subagent running) → complete / dropped, with every attempt kept and a
callback at each transition so the recorder can rewrite the run file.

A slot whose voice failed goes first to an idle runtime of a family the council does not
hold yet, then to any idle runtime or endpoint model, and only then to the subagent; the
choice is ALLOCATE's rule run again (``allocate.reseat``), and the slot keeps its role.
At most ``MAX_TAKEOVERS`` idle runtimes are tried per slot before the subagent.

With a deadline (``Budget.deadline_s``) the wait ends early: once the deadline has passed
and at least two confirmed families have answered, every slot still running is stopped
(cancelling a runtime's ``ask`` kills its process tree) and recorded ``late``. Without two
such families the slots run on to their own timeouts, as without a deadline.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping

from ..core.contract import Attempt, Budget, RawOutput, Voice
from ..core.made import made
from ..core.runtime import Answerer, ReplyCheck, Runtime, RuntimeReply
from ..core.safetext import one_line
from .allocate import Candidate, SlotPrompts, reseat

RAW_CHAR_CAP = 200_000
DISPATCH = "council.dispatch"
# Idle runtimes a failed slot may try before the subagent. Each try can cost a whole
# per-voice timeout, so one keeps a failed slot within two timeouts of the others.
MAX_TAKEOVERS = 1

OnChange = Callable[[Voice, str], None]


async def ask_within(
    runtime: Runtime, prompt: str, budget: Budget, check: ReplyCheck | None = None
) -> RuntimeReply:
    """One question to one runtime under the request's per-voice limits."""
    return await runtime.ask(
        prompt,
        timeout_s=budget.per_voice_timeout_s,
        max_output_bytes=budget.max_output_bytes,
        check=check,
    )


def _answer_problem(text: str) -> str | None:
    # The answer reader is loaded with the first reply, not before the voices are asked: a
    # council's start waits for nothing it does not use yet (the warm-up loads it meanwhile).
    from ..core.answer import answer_problem

    return answer_problem(text)


def attempt_record(runtime: Runtime, reply: RuntimeReply) -> Attempt:
    return Attempt(
        runtime=runtime.name,
        source=runtime.source,
        outcome=reply.outcome,
        detail=one_line(reply.detail, 1000),
        exit_code=reply.exit_code,
        latency_ms=reply.latency_ms,
        output_tail=reply.output_tail[-4000:] if reply.output_tail else None,
    )


def _attempts(runtime: Runtime, reply: RuntimeReply) -> list[Attempt]:
    """Every try behind one reply: a runtime with failover reports each model it asked."""
    if reply.attempts:
        return list(reply.attempts)
    return [attempt_record(runtime, reply)]


def _adopt(voice: Voice, who: Answerer | None) -> None:
    """The slot now belongs to the model that answered, which failover may have changed."""
    if who is None:
        return
    voice.runtime = who.runtime
    voice.model = who.model
    voice.model_family = who.model_family
    voice.family_confidence = who.family_confidence


def _complete(voice: Voice, reply: RuntimeReply) -> None:
    text = reply.text or ""
    truncated = reply.truncated or len(text) > RAW_CHAR_CAP
    voice.raw = made(RawOutput, text=text[:RAW_CHAR_CAP], truncated=truncated)
    voice.latency_ms = sum(a.latency_ms or 0 for a in voice.attempts)
    voice.status = "complete"


def _drop(voice: Voice, reason: str, on_change: OnChange) -> Voice:
    voice.status = "dropped"
    voice.dropped_by = DISPATCH
    voice.drop_reason = reason
    voice.latency_ms = sum(a.latency_ms or 0 for a in voice.attempts) or None
    on_change(voice, reason)
    return voice


async def _turn(
    voice: Voice,
    runtime: Runtime,
    prompt: str,
    budget: Budget,
    on_change: OnChange,
    *,
    dispatched: str,
    answered: Callable[[], str],
) -> str | None:
    """One runtime's go at a slot: running, asked, every attempt kept.

    An answer completes the slot (announced with ``answered()``, read once the slot holds
    who answered) and gives None; otherwise what went wrong, for the caller to seat the
    slot again or drop it.
    """
    voice.status = "running"
    on_change(voice, dispatched)
    # A slot wants a voice answer; a runtime with other models to try uses the check.
    reply = await ask_within(runtime, prompt, budget, check=_answer_problem)
    voice.attempts.extend(_attempts(runtime, reply))
    if reply.outcome != "ok":
        return f"{runtime.name}: {reply.outcome}: {one_line(reply.detail)}"
    _adopt(voice, reply.answered_by)
    _complete(voice, reply)
    on_change(voice, answered())
    return None


def _answered_after_failures(voice: Voice) -> str:
    tried = [a.runtime for a in voice.attempts[:-1]]
    after = f" after {', '.join(dict.fromkeys(tried))} failed" if tried else ""
    return f"{voice.runtime} answered{after}"


class Seats:
    """Which runtimes have a seat on this council, shared by all its slots.

    A runtime is idle when it has not been seated in this dispatch at all: one that holds a
    slot, answered for one, or failed is not offered again, so the choice does not depend
    on which voice happened to finish first, and a runtime never speaks twice by accident.
    Slots run on one event loop and nothing is awaited between choosing a runtime and
    claiming it, so two slots never take the same one.
    """

    def __init__(
        self,
        voices: list[Voice],
        runtimes: Mapping[str, Runtime],
        subagent: Runtime | None,
        prefer: list[str],
    ) -> None:
        self.voices = voices
        self.runtimes = runtimes
        self.subagent = subagent
        self.prefer = prefer
        self.seated = {v.runtime for v in voices}

    def take_over(self, slot: Voice) -> Runtime | None:
        """An idle runtime for ``slot``, claimed for it; None when only a subagent is left."""
        idle = [
            Candidate(r.name, r.source, r.model_family, r.family_confidence)
            for name, r in self.runtimes.items()
            if r is not self.subagent and name not in self.seated
        ]
        held = {
            v.model_family
            for v in self.voices
            if v is not slot
            and v.status != "dropped"
            and not v.is_fallback
            and v.family_confidence == "confirmed"
        }
        pick = reseat(idle, held, self.prefer)
        if pick is None:
            return None
        self.seated.add(pick.runtime)
        return self.runtimes[pick.runtime]


def _seat(voice: Voice, runtime: Runtime) -> None:
    voice.source = runtime.source
    voice.runtime = runtime.name
    model = getattr(runtime, "model", None)  # HTTP runtimes serve one named model
    voice.model = model if isinstance(model, str) else None
    voice.model_family = runtime.model_family
    voice.family_confidence = runtime.family_confidence


async def run_slot(
    voice: Voice,
    prompts: SlotPrompts,
    primary: Runtime | None,
    subagent: Runtime | None,
    budget: Budget,
    on_change: OnChange,
    seats: Seats | None = None,
) -> Voice:
    failure = "no runtime could take this slot"
    failures: list[str] = []
    runtime = primary
    while runtime is not None and runtime is not subagent:
        if runtime is not primary:
            _seat(voice, runtime)
            on_change(voice, f"{failure}: the slot goes to {runtime.name}")
        failed = await _turn(
            voice,
            runtime,
            prompts.primary,
            budget,
            on_change,
            dispatched=f"dispatched to {runtime.name}",
            answered=lambda: _answered_after_failures(voice),
        )
        if failed is None:
            return voice
        failure = failed
        failures.append(failure)
        if seats is None or not getattr(runtime, "reseats", True):
            break  # an endpoint configured without failover keeps its failures
        if len(failures) > MAX_TAKEOVERS:
            break
        seats.seated.update(a.runtime for a in voice.attempts)  # models its pool tried
        runtime = seats.take_over(voice)
    if failures:
        failure = "; ".join(failures)
    if primary is not None and primary is subagent:
        failed = await _turn(
            voice,
            primary,
            prompts.primary,
            budget,
            on_change,
            dispatched=f"dispatched to {primary.name}",
            answered=lambda: f"{voice.runtime} answered",
        )
        return voice if failed is None else _drop(voice, failed, on_change)

    if subagent is None:
        return _drop(voice, f"{failure}; no subagent configured to take the slot over", on_change)

    if primary is not None:
        voice.is_fallback = True
    voice.source = subagent.source
    voice.runtime = subagent.name
    voice.model = None
    voice.model_family = subagent.model_family
    voice.family_confidence = subagent.family_confidence
    voice.persona = prompts.fallback_persona
    failed = await _turn(
        voice,
        subagent,
        prompts.fallback,
        budget,
        on_change,
        dispatched=f"fallback to subagent {subagent.name} after {failure}",
        answered=lambda: f"subagent {subagent.name} answered",
    )
    return voice if failed is None else _drop(voice, f"{failure}; subagent {failed}", on_change)


async def dispatch(
    voices: list[Voice],
    prompts: Mapping[str, SlotPrompts],
    runtimes: Mapping[str, Runtime],
    subagent: Runtime | None,
    budget: Budget,
    on_change: OnChange,
    prefer: list[str] | None = None,
) -> list[Voice]:
    """All slots in parallel; cancelling this cancels (and so kills) every voice.

    ``runtimes`` is every runtime the council may use, seated or not: the idle ones are
    where a failed slot goes before the subagent.
    """
    seats = Seats(voices, runtimes, subagent, prefer or [])
    started = time.monotonic()
    tasks: dict[asyncio.Future[Voice], Voice] = {
        asyncio.ensure_future(
            run_slot(v, prompts[v.id], runtimes.get(v.runtime), subagent, budget, on_change, seats)
        ): v
        for v in voices
    }
    try:
        if budget.deadline_s is None:
            await asyncio.gather(*tasks)
        else:
            late = await _wait_for_enough(tasks, budget.deadline_s)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
            elapsed = time.monotonic() - started
            for task in late:
                _record_late(tasks[task], budget.deadline_s, elapsed, on_change)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    return voices


def confirmed_families_answered(voices: list[Voice]) -> set[str]:
    return {
        v.model_family
        for v in voices
        if v.status == "complete" and v.family_confidence == "confirmed"
    }


async def _wait_for_enough(
    tasks: Mapping[asyncio.Future[Voice], Voice], deadline_s: float
) -> set[asyncio.Future[Voice]]:
    """The slots still running once the deadline has passed with two confirmed families in;
    empty when every slot ended first."""
    _done, pending = await asyncio.wait(tasks, timeout=deadline_s)
    while pending and len(confirmed_families_answered(list(tasks.values()))) < 2:
        _done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
    return pending


def _record_late(voice: Voice, deadline_s: float, elapsed_s: float, on_change: OnChange) -> None:
    reason = (
        f"late: still running at the {deadline_s:g} s deadline ({elapsed_s:.1f} s elapsed) "
        "with two confirmed families already in; stopped"
    )
    voice.attempts.append(
        Attempt(
            runtime=voice.runtime,
            source=voice.source,
            outcome="late",
            detail=reason,
            latency_ms=round(elapsed_s * 1000),
            model=voice.model,
        )
    )
    _drop(voice, reason, on_change)


def late_voice_ids(voices: list[Voice]) -> list[str]:
    """Slots the deadline cut short, in slot order."""
    return [v.id for v in voices if v.attempts and v.attempts[-1].outcome == "late"]
