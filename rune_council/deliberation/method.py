"""The shape every deliberation method has: one round in, one outcome out.

A method is what the members do after the single pass: vote on merged items, rank each
other's answers, attack a plan. The runner hands a method a :class:`Round` (the council as
it stands, the members to ask, the chairman) and files the :class:`Outcome` it returns in
``result.deliberation``; rounds, divergence and early stopping are the runner's, the same for
every method. The verdict metadata and ``rune council verify`` ask the method that wrote a
record how to read it (:meth:`Method.standing`) and how to recount it (:meth:`Method.recount`);
a method that can also file its recorded raw ballot replies again says how
(:meth:`Replays.replay`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

from ..core.contract import (
    ConsensusScore,
    Consolidation,
    CouncilResult,
    Deliberation,
    DeliberationOptions,
    PerspectiveRequest,
    RankResult,
    RiskRegister,
    Synthesis,
    Voice,
    VoteResult,
)
from ..core.runtime import Runtime
from .ballots import BallotBox, Reader, collect
from .chair import Chair

T = TypeVar("T")


@dataclass(frozen=True)
class Outcome:
    """What a method decided in one round. Sections left ``None`` keep their recorded value."""

    synthesis: Synthesis | None = None
    consolidation: Consolidation | None = None
    vote: VoteResult | None = None
    rank: RankResult | None = None
    risk_register: RiskRegister | None = None

    def file_into(self, record: Deliberation) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                setattr(record, f.name, value)


class Results(Protocol):
    """Anything that holds a method's counted results: the deliberation, a round, an outcome."""

    @property
    def vote(self) -> VoteResult | None: ...

    @property
    def rank(self) -> RankResult | None: ...


@dataclass(frozen=True)
class Standing:
    """How aligned the members were, as a method's own results say."""

    consensus: ConsensusScore | None = None
    dissenters: list[str] = field(default_factory=list)
    # What the dissent was read from: members' rankings of each other, or their votes.
    basis: Literal["rankings", "votes"] = "rankings"


@dataclass(frozen=True)
class Recount:
    """One recorded value set beside the value the method's arithmetic gives afresh.

    ``name`` is what was checked; each (field, recorded, recomputed) triple holds JSON values.
    A mapping is compared key by key; any other value is compared whole.
    """

    name: str
    values: list[tuple[str, Any, Any]]


@dataclass
class Round:
    """One round of deliberation as a method sees it."""

    number: int
    request: PerspectiveRequest
    options: DeliberationOptions
    result: CouncilResult
    seed: str
    chair: Chair
    runtimes: Mapping[str, Runtime]
    announce: Callable[[Outcome, str], None]

    @property
    def red_team(self) -> bool:
        return self.options.council_type == "red_team"

    @property
    def members(self) -> list[Voice]:
        """The members whose answer passed: they hold the ballots."""
        return [v for v in self.result.voices if v.status == "complete"]

    async def ballots(self, prompts: Mapping[str, str], read: Reader[T], verb: str) -> BallotBox[T]:
        """Ask each member its own prompt and read each reply (see :func:`.ballots.collect`)."""
        return await collect(
            self.result.voices, prompts, read, verb, self.runtimes, self.request.budget
        )

    def publish(self, outcome: Outcome, detail: str) -> None:
        """File part of the outcome now and announce it, so the run file shows it as it happens."""
        self.announce(outcome, detail)


class Method(Protocol):
    """A deliberation method. Register one with :func:`rune_council.deliberation.register`."""

    @property
    def name(self) -> str:
        """The name a request gives as ``deliberation.method``; the run file records it."""
        ...

    async def run(self, round: Round) -> Outcome: ...

    def standing(self, results: Results) -> Standing:
        """Consensus and dissent from what this method recorded (``Standing()``: none)."""
        ...

    def recount(self, where: str, results: Results) -> list[Recount]:
        """What ``verify`` recomputes from the recorded ballots by arithmetic alone."""
        ...


@dataclass(frozen=True)
class Replay:
    """One recorded round, as ``verify`` hands it back to the method that deliberated.

    ``voices`` are the round's seats in seat order, as its ballots were collected from:
    the last round's are re-judged from their raw answers (``answers_kept``); an earlier
    round's keep only their id, runtime, status and stance. ``consolidation`` is what the
    round's vote was on, when the file still holds it (the last round's).
    """

    where: str
    number: int
    run_id: str
    seed: str
    options: DeliberationOptions
    voices: list[Voice]
    answers_kept: bool
    consolidation: Consolidation | None = None


@runtime_checkable
class Replays(Protocol):
    """A method whose recorded raw ballot replies ``verify`` can file again."""

    def replay(self, replay: Replay, results: Results) -> list[Recount]:
        """Each recorded result beside the one the round's raw replies give afresh, read by
        the same functions that read them when they arrived."""
        ...
