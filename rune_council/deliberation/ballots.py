"""One ballot collector for every method: ask the members, keep every reply, count the usable.

Each member whose answer passed gets its own prompt, all at once, through the runtime that
holds its seat. A reply is read by the method's reader; what counts is kept by voice id. A
member whose runtime failed, or whose ballot held nothing usable, is recorded with the reply
as received and leaves the denominator (``absent``), as does every member whose answer did
not pass in the first place. Nothing a member sent is silently lost.

Every reply is filed with a digest of who sent it and what it said, taken as it arrives,
and the ballot is read from that recorded text only: ``rune council verify`` files the
recorded replies again through :func:`file_replies` and compares every ballot, voter list
and tally with what the run file says.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

from ..core.contract import AbsentMember, Budget, DroppedLine, MemberBallot, Voice
from ..core.runtime import Runtime, RuntimeReply
from ..stages.dispatch import ask_within
from .metadata import digest_of

T = TypeVar("T")

# A ballot is a few lines; the bound keeps a reply that floods from filling the run file, and
# the ballot is read from the bounded text alone (as an answer is), so it can be read again.
BALLOT_TEXT_CAP = 20_000
DETAIL_CAP = 500
DROPPED_CAP = 200
# The lines one ballot did not use, kept on the ballot itself: a model that writes a page
# of prose around its vote has every line listed in the method's own list, bounded above.
BALLOT_DROPPED_CAP = 20


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


@dataclass(frozen=True)
class Received:
    """One member's reply as the ballot box files it: the bounded text its ballot is read
    from, or why there is no ballot to read (``failure``).

    The ballot is read from exactly the text that is recorded, so ``verify`` can read the
    recorded text again and must come to the same ballot.
    """

    text: str | None
    truncated: bool = False
    failure: str | None = None
    latency_ms: int | None = None


# A member asked for a ballot that the run file holds none for: only an edit does that.
NOT_RECORDED = Received(None, failure="no reply was recorded for this member")


def received(v: Voice, reply: RuntimeReply | None, verb: str) -> Received:
    """What a runtime sent, bounded; ``verb`` completes "<runtime> is not available to <verb>"."""
    if reply is None:
        return Received(None, failure=f"{v.runtime} is not available to {verb}")
    text = reply.text
    failure = None
    if reply.outcome != "ok" or text is None:
        # Bounded here, not only on the ballot: the absent entry and the ballot say the same,
        # and verify, which has only the ballot, can say it again.
        failure = f"{reply.outcome}: {reply.detail}"[:DETAIL_CAP]
    return Received(
        text=None if text is None else text[:BALLOT_TEXT_CAP],
        truncated=reply.truncated or (text is not None and len(text) > BALLOT_TEXT_CAP),
        failure=failure,
        latency_ms=reply.latency_ms,
    )


def as_received(ballot: MemberBallot) -> Received:
    """A recorded ballot as the reply it was filed from: what ``verify`` reads again.

    Whether a runtime failed is the runtime's word, kept as recorded; everything a reply
    that arrived led to is derived from its recorded text.
    """
    failure = ballot.detail if ballot.outcome == "failed" else None
    if failure is None and ballot.text is None:
        failure = NOT_RECORDED.failure
    return Received(ballot.text, ballot.truncated, failure, ballot.latency_ms)


def asked(voices: Sequence[Voice], prompts: Collection[str]) -> list[Voice]:
    """The members who hold a ballot: their answer passed and they were given a prompt."""
    return [v for v in voices if v.status == "complete" and v.id in prompts]


def file_replies(
    voices: Sequence[Voice],
    prompts: Collection[str],
    replies: Mapping[str, Received],
    read: Reader[T],
) -> BallotBox[T]:
    """Every asked member's reply read, sealed and filed, in seat order.

    The council files the replies it has just received; ``verify`` files the replies a run
    file recorded, through this same function, and compares what comes out.
    """
    members = asked(voices, prompts)
    box: BallotBox[T] = BallotBox(asked=[v.id for v in members], absent=absent_answers(voices))
    for v in members:
        got = replies.get(v.id, NOT_RECORDED)
        if got.failure is not None or got.text is None:
            _absent(box, v, got, "failed", got.failure or "no reply")
            continue
        reading = read(v, got.text)
        box.dropped.extend(reading.dropped)
        if reading.value is None:
            _absent(box, v, got, "malformed", reading.detail, reading.dropped)
            continue
        box.counted[v.id] = reading.value
        box.ballots.append(_record(v, got, "counted", reading.detail, reading.dropped))
    del box.dropped[DROPPED_CAP:]
    return box


def _record(
    v: Voice,
    got: Received,
    outcome: Literal["counted", "failed", "malformed"],
    detail: str,
    dropped: Sequence[DroppedLine] = (),
) -> MemberBallot:
    ballot = MemberBallot(
        voice_id=v.id,
        runtime=v.runtime,
        outcome=outcome,
        detail=detail[:DETAIL_CAP],
        text=got.text,
        latency_ms=got.latency_ms,
        truncated=got.truncated,
        # Each with its reason on the ballot it came from, so a line the member meant as its
        # vote and the council refused is seen beside that member, not only in a pooled list.
        dropped_lines=list(dropped[:BALLOT_DROPPED_CAP]),
    )
    # Sealed as it is filed, as a chairman's text is: an edit of the reply shows.
    ballot.digest = digest_of(ballot)
    return ballot


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
    members = asked(voices, prompts)

    async def one(v: Voice) -> RuntimeReply | None:
        runtime = runtimes.get(v.runtime)
        return None if runtime is None else await ask_within(runtime, prompts[v.id], budget)

    replies = await asyncio.gather(*(one(v) for v in members))
    got = {v.id: received(v, r, verb) for v, r in zip(members, replies, strict=True)}
    return file_replies(voices, prompts, got, read)


def _absent(
    box: BallotBox[T],
    v: Voice,
    got: Received,
    outcome: Literal["failed", "malformed"],
    why: str,
    dropped: Sequence[DroppedLine] = (),
) -> None:
    """A ballot that does not count: kept as sent, and its member leaves the denominator."""
    box.ballots.append(_record(v, got, outcome, why, dropped))
    box.absent.append(AbsentMember(voice_id=v.id, runtime=v.runtime, stage="ballot", reason=why))
