"""The host's own subagents as the council's subagent, over two tool calls.

When nothing the operator set up can take a slot (no external voice may run, none answered,
and no ``--subagent-cmd`` or ``[subagent]``), the council's subagent is ``HostSubagent``:
its ``ask`` files the prompt as a pending slot and waits. The convene call hands the pending
prompts to the host, whose model runs each one as a subagent, and ``submit_answers`` brings
the replies back. Each reply then goes through the council like any runtime's: GATE and
NORMALIZE read it, dispatch records it, and a slot taken over from a failed CLI is
``is_fallback``. The voice is ``source: subagent`` of family ``unknown``, so nothing the
host's model writes can count as a second model family.

Each pending slot has a one-time token, made here and kept only in this server's memory: it
is handed to the host with the prompt and never written to the run file. An answer is taken
only for the run, the slot and the token it was issued with, once; a slot the council
stopped waiting for (its timeout, the run's end) takes nothing.
"""

from __future__ import annotations

import asyncio
import contextvars
import hmac
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core.errors import RequestError
from ..core.runtime import ReplyCheck, RuntimeReply

if TYPE_CHECKING:
    from ..core.contract import CouncilResult, FamilyConfidence, RunEvent, VoiceSource

NAME = "host-subagent"
# How long the council is left to file the prompts of slots dispatched together before the
# host is given them: one hand-over for the whole council instead of one per slot.
SETTLE_S = 0.3
TOKEN_BYTES = 24


@dataclass(frozen=True)
class Seat:
    """The council's slot a prompt is for, as the event that dispatched it said."""

    voice_id: str
    role: str
    persona: str | None


# Set by the dispatch event of a slot going to the host, read by the ``ask`` that follows in
# the same task: the protocol's ``ask`` gets only the prompt. Ballots and later stages that
# reach a host voice without such an event are filed without a seat.
_SEAT: contextvars.ContextVar[Seat | None] = contextvars.ContextVar("rune_host_seat", default=None)


def note_dispatch(result: CouncilResult, event: RunEvent) -> None:
    """Called with every council event: remembers which slot the next host ``ask`` is for."""
    if event.kind != "voice.status" or event.status != "running":
        return
    voice = next((v for v in result.voices if v.id == event.voice_id), None)
    if voice is not None and voice.runtime == NAME:
        _SEAT.set(Seat(voice.id, voice.slot_role, voice.persona))


@dataclass
class Pending:
    slot: str
    role: str
    persona: str | None
    prompt: str
    token: str
    expires_at: float
    answer: asyncio.Future[str]
    handed_out: bool = False

    def expires_in(self) -> float:
        return max(0.0, self.expires_at - time.monotonic())


@dataclass
class HostRun:
    """The pending slots of one convene call's council (one run, or each step of a chain)."""

    run_id: str
    pending: dict[str, Pending] = field(default_factory=dict)
    answered: set[str] = field(default_factory=set)
    closed: bool = False
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    _issued: int = 0

    def runtime(self) -> HostSubagent:
        return HostSubagent(self)

    def _slot_name(self, seat: Seat | None) -> str:
        """The voice's id the first time it is asked (``v2``), then ``v2.2``, ``v2.3`` for
        its later rounds; ``ballot.1``, ... for asks no dispatch event announced."""
        taken = self.answered | set(self.pending)
        if seat is not None and seat.voice_id not in taken:
            return seat.voice_id
        base, n = (seat.voice_id, 2) if seat is not None else ("ballot", 1)
        while f"{base}.{n}" in taken:
            n += 1
        return f"{base}.{n}"

    def open(self, prompt: str, timeout_s: float) -> Pending:
        if self.closed:
            raise RequestError(f"run {self.run_id} is over; it takes no more answers")
        seat = _SEAT.get()
        _SEAT.set(None)  # one dispatch event, one ask
        slot = self._slot_name(seat)
        pending = Pending(
            slot=slot,
            role=seat.role if seat is not None else "ballot",
            persona=seat.persona if seat is not None else None,
            prompt=prompt,
            token=secrets.token_urlsafe(TOKEN_BYTES),
            expires_at=time.monotonic() + timeout_s,
            answer=asyncio.get_running_loop().create_future(),
        )
        self.pending[slot] = pending
        self._changed.set()
        return pending

    def drop(self, pending: Pending) -> None:
        """The council stopped waiting for this slot: its token is dead from now on."""
        if self.pending.get(pending.slot) is pending:
            del self.pending[pending.slot]

    def close(self) -> None:
        """The run is over: every token it issued expires with it."""
        self.closed = True
        for pending in self.pending.values():
            if not pending.answer.done():
                pending.answer.cancel()
        self.pending.clear()
        self._changed.set()

    # ------------------------------------------------------------------ the host's side

    def accept(self, run_id: str, answers: Sequence[tuple[str, str, str]]) -> list[str]:
        """Take ``(slot, token, text)`` answers, all or none: one that does not match the run,
        a slot it waits for and that slot's token refuses the whole call, naming why."""
        if run_id != self.run_id or self.closed:
            raise RequestError(f"run {run_id} is not waiting for subagent answers")
        seen: set[str] = set()
        for slot, token, _ in answers:
            if slot in seen:
                raise RequestError(f"slot {slot} is answered twice in one call")
            seen.add(slot)
            pending = self.pending.get(slot)
            if pending is None:
                if slot in self.answered:
                    raise RequestError(f"slot {slot} of run {run_id} was answered already")
                waiting = ", ".join(sorted(self.pending)) or "none"
                raise RequestError(
                    f"run {run_id} is not waiting for slot {slot} (waiting for: {waiting})"
                )
            if not hmac.compare_digest(token.encode(), pending.token.encode()):
                raise RequestError(f"the token given for slot {slot} of run {run_id} is not its")
        for slot, _, text in answers:
            pending = self.pending.pop(slot)
            self.answered.add(slot)
            if not pending.answer.done():
                pending.answer.set_result(text)
        return sorted(seen)

    def outstanding(self) -> list[Pending]:
        """Slots handed to the host and not answered yet."""
        return [p for p in self.pending.values() if p.handed_out]

    def hand_out(self) -> list[Pending]:
        """Every slot still waiting, each now counted as handed to the host."""
        out = sorted(self.pending.values(), key=lambda p: p.slot)
        for pending in out:
            pending.handed_out = True
        return out

    async def next_turn(self, council: asyncio.Future[CouncilResult]) -> list[Pending] | None:
        """Wait until the council is over (None) or waits on the host for slots it has not
        been given yet; then every waiting slot, once the council has filed what it
        dispatched together."""
        while not council.done():
            self._changed.clear()
            if any(not p.handed_out for p in self.pending.values()):
                await self._settle(council)
                if council.done():
                    break
                return self.hand_out()
            await _first(council, self._changed)
        return None

    async def _settle(self, council: asyncio.Future[CouncilResult]) -> None:
        while not council.done():
            self._changed.clear()
            await _first(council, self._changed, timeout=SETTLE_S)
            if not self._changed.is_set():
                return


async def _first(
    council: asyncio.Future[CouncilResult], event: asyncio.Event, timeout: float | None = None
) -> None:
    waiter: asyncio.Future[Any] = asyncio.ensure_future(event.wait())
    either: set[asyncio.Future[Any]] = {council, waiter}
    try:
        await asyncio.wait(either, timeout=timeout, return_when="FIRST_COMPLETED")
    finally:
        waiter.cancel()


@dataclass(frozen=True)
class HostSubagent:
    """The runtime the council sees: a prompt in, the host's subagent's reply out."""

    run: HostRun
    name: str = NAME
    source: VoiceSource = "subagent"
    model_family: str = "unknown"
    family_confidence: FamilyConfidence = "unknown"
    # Every slot may wait on the host at once; the host decides how many it runs together.
    default_max_concurrent: int = 16

    async def ask(
        self,
        prompt: str,
        *,
        timeout_s: float,
        max_output_bytes: int,
        check: ReplyCheck | None = None,
    ) -> RuntimeReply:
        started = time.monotonic()
        pending = self.run.open(prompt, timeout_s)

        def spent() -> int:
            return int((time.monotonic() - started) * 1000)

        try:
            text = await asyncio.wait_for(pending.answer, timeout=timeout_s)
        except TimeoutError:
            return RuntimeReply(
                outcome="timeout",
                detail=f"the host's subagent gave no answer within {timeout_s:g} s",
                latency_ms=spent(),
            )
        finally:
            self.run.drop(pending)
        if not text.strip():
            return RuntimeReply(
                outcome="error_reported",
                detail="the host gave this slot up (an empty answer)",
                latency_ms=spent(),
            )
        if len(text.encode("utf-8")) > max_output_bytes:
            return RuntimeReply(
                outcome="too_large",
                detail=f"answer exceeded {max_output_bytes} bytes",
                latency_ms=spent(),
            )
        return RuntimeReply(
            outcome="ok", text=text, detail="answered by the host's subagent", latency_ms=spent()
        )
