"""One ballot collector for every method: ask the members, keep every reply, count the usable.

Each member whose answer passed gets its own prompt, all at once, through the runtime that
holds its seat. A reply is read by the method's reader; what counts is kept by voice id. A
member whose runtime failed, or whose ballot held nothing usable, is recorded with the reply
as received and leaves the denominator (``absent``), as does every member whose answer did
not pass in the first place. Nothing a member sent is silently lost.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

from ..contract import AbsentMember, Budget, DroppedLine, MemberBallot, Voice
from ..runtimes.base import Runtime, RuntimeReply
from ..stages.dispatch import ask_within

T = TypeVar("T")

BALLOT_TEXT_CAP = 4000
DETAIL_CAP = 500
DROPPED_CAP = 200


@dataclass(frozen=True)
class Reading(Generic[T]):
    """What a method made of one ballot: ``value`` None means nothing in it was usable."""

    value: T | None
    detail: str
    dropped: Sequence[DroppedLine] = ()


Reader = Callable[[Voice, str], Reading[T]]


@dataclass
class BallotBox(Generic[T]):
    counted: dict[str, T] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)
    ballots: list[MemberBallot] = field(default_factory=list)
    absent: list[AbsentMember] = field(default_factory=list)
    dropped: list[DroppedLine] = field(default_factory=list)


def absent_answers(voices: Sequence[Voice]) -> list[AbsentMember]:
    """Members whose answer did not pass hold no ballot."""
    return [
        AbsentMember(
            voice_id=v.id,
            runtime=v.runtime,
            stage="answer",
            reason=v.drop_reason or f"status {v.status}",
        )
        for v in voices
        if v.status != "complete"
    ]


def _record(
    v: Voice,
    reply: RuntimeReply | None,
    outcome: Literal["counted", "failed", "malformed"],
    detail: str,
) -> MemberBallot:
    text = None if reply is None or reply.text is None else reply.text[:BALLOT_TEXT_CAP]
    return MemberBallot(
        voice_id=v.id,
        runtime=v.runtime,
        outcome=outcome,
        detail=detail[:DETAIL_CAP],
        text=text,
        latency_ms=None if reply is None else reply.latency_ms,
    )


async def collect(
    voices: Sequence[Voice],
    prompts: Mapping[str, str],
    read: Reader[T],
    verb: str,
    runtimes: Mapping[str, Runtime],
    budget: Budget,
) -> BallotBox[T]:
    """Ballots from every member that answered and has a prompt, in seat order.

    ``verb`` completes "<runtime> is not available to <verb>" for a member whose runtime
    is gone.
    """
    members = [v for v in voices if v.status == "complete" and v.id in prompts]

    async def one(v: Voice) -> RuntimeReply | None:
        runtime = runtimes.get(v.runtime)
        return None if runtime is None else await ask_within(runtime, prompts[v.id], budget)

    replies = await asyncio.gather(*(one(v) for v in members))
    box: BallotBox[T] = BallotBox(asked=[v.id for v in members], absent=absent_answers(voices))
    for v, reply in zip(members, replies, strict=True):
        if reply is None or reply.outcome != "ok" or reply.text is None:
            why = (
                f"{v.runtime} is not available to {verb}"
                if reply is None
                else f"{reply.outcome}: {reply.detail}"
            )
            _absent(box, v, reply, "failed", why)
            continue
        reading = read(v, reply.text)
        box.dropped.extend(reading.dropped)
        if reading.value is None:
            _absent(box, v, reply, "malformed", reading.detail)
            continue
        box.counted[v.id] = reading.value
        box.ballots.append(_record(v, reply, "counted", reading.detail))
    del box.dropped[DROPPED_CAP:]
    return box


def _absent(
    box: BallotBox[T],
    v: Voice,
    reply: RuntimeReply | None,
    outcome: Literal["failed", "malformed"],
    why: str,
) -> None:
    """A ballot that does not count: kept as sent, and its member leaves the denominator."""
    box.ballots.append(_record(v, reply, outcome, why))
    box.absent.append(AbsentMember(voice_id=v.id, runtime=v.runtime, stage="ballot", reason=why))
