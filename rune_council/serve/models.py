"""The API's own bodies; everything about a council itself is a contract model, and what a
caller may ask for is the intake's ``Ask`` (``council.intake``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..core.contract import DetectedRuntime, RunStatus


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


RowStatus = Literal[
    "queued",
    "running",
    "complete",
    "no_verdict",
    "cancelled",
    "failed",
    "abandoned",
    "unreadable",
]


class StepLinks(_Body):
    """One council of a chain and where to follow it."""

    template: str
    id: str
    location: str = Field(description="Where its run file is served, once it is written.")
    events: str = Field(
        description="Server-Sent Events of its transitions; waits while the step is queued."
    )
    page: str = Field(description="The live web view of this step.")


class Accepted(_Body):
    id: str
    status: RunStatus
    location: str = Field(
        description="Where the run file is served; for a chain, the list of its runs."
    )
    events: str = Field(description="Server-Sent Events of its transitions.")
    page: str = Field(description="The live web view of this council.")
    notes: list[str] = Field(
        default_factory=list,
        description="Where the council will differ from the ask, in the words its run file "
        "uses (n above the cap, say).",
    )
    chain: str | None = Field(default=None, description="The chain's name, when one was asked.")
    runs: list[StepLinks] = Field(
        default_factory=list, description="A chain's councils, in the order they run."
    )


class ChainStep(StepLinks):
    status: RowStatus | Literal["not-run"] = Field(
        description="queued: waiting its turn (no run file yet); not-run: the chain ended "
        "before it; otherwise the status of its run file."
    )


class ChainView(_Body):
    """A chain of councils this server runs: every step in order, and how far it got."""

    id: str = Field(description="The chain's id: its last step's run id.")
    chain: str
    runs: list[ChainStep]


class RunRow(_Body):
    id: str
    question: str
    status: RowStatus
    decorrelation: str | None = None
    partial: bool = Field(default=False, description="The deadline ended the wait (2.4).")
    halted: bool = Field(
        default=False,
        description="The deliberation halted on divergence: a person should decide.",
    )
    voices_valid: int
    voices_requested: int
    started_at: str
    duration_s: float | None = None
    problem: str | None = None


class RunPage(_Body):
    items: list[RunRow]
    total: int = Field(description="Runs matching the filters.")
    offset: int
    limit: int
    next: str | None = Field(default=None, description="The next page, if any.")


class FieldProblem(_Body):
    field: str
    message: str


class Problem(_Body):
    error: str = Field(description="One line saying what is wrong.")
    fields: list[FieldProblem] = Field(default_factory=list)


class CancelResult(_Body):
    id: str
    status: RunStatus


class EndpointView(_Body):
    name: str
    base_url: str


class RuntimesView(_Body):
    checked_at: str | None = None
    detected: list[DetectedRuntime]
    endpoints: list[EndpointView] = Field(
        default_factory=list, description="Endpoints a council may name (never their keys)."
    )
    external_consent: str = Field(description="Who decides whether external CLIs are used.")


class Health(_Body):
    status: Literal["ok"] = "ok"
    running: int
    queued: int
    max_concurrent: int
    max_queued: int


class StatsTable(_Body):
    title: str
    headers: list[str]
    rows: list[list[str]]
    note: str = ""


class StatsPicture(_Body):
    name: str
    caption: str
    url: str = Field(description="Where the PNG is served, with the same window.")


class StatsView(_Body):
    """What the stats page shows: the CLI's tables and the pictures' addresses."""

    summary: str
    tables: list[StatsTable]
    pictures: list[StatsPicture] = Field(
        default_factory=list, description="Empty when matplotlib is not installed."
    )
    note: str | None = Field(default=None, description="Why there are no pictures, if so.")
