"""The API's own bodies; everything about a council itself is a contract model."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..contract import (
    CouncilType,
    DeliberationMethod,
    DetectedRuntime,
    Mode,
    PerspectiveRequest,
    RunStatus,
    SetupName,
)

MAX_ENDPOINTS = 16


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CouncilCreate(_Body):
    """A request plus the overrides a caller may set per council.

    ``request.id`` may be left out: the server then picks one. Overrides replace the
    matching request fields. ``template`` names a council setup; it fills only what the
    request and the overrides leave out. Consent to use external AI CLIs is not a field: it
    is the operator's (``--yes`` or config).
    """

    request: PerspectiveRequest
    n: int | None = Field(default=None, ge=2, description="Voices wanted (overrides request.n).")
    mode: Mode | None = None
    timeout: float | None = Field(
        default=None, gt=0, le=3600, description="Per-voice timeout in seconds."
    )
    deliberation: DeliberationMethod | None = Field(
        default=None, description="vote | rank after the single pass."
    )
    rounds: int | None = Field(default=None, ge=1, le=10, description="Deliberation rounds.")
    council_type: CouncilType | None = None
    template: SetupName | None = Field(
        default=None,
        description="A named council setup (`rune council templates` lists them, e.g. "
        "security-review): it presets mode, n, slots, preamble and deliberation where the "
        "request and the overrides leave them out; whatever they set wins. The run file "
        "records its name, version, source and digest in request.template.",
    )
    endpoints: list[str] | None = Field(
        default=None,
        max_length=MAX_ENDPOINTS,
        description="Names of endpoints configured in council.toml; replaces the configured "
        "set for this council. URLs are not accepted.",
    )


class Accepted(_Body):
    id: str
    status: RunStatus
    location: str = Field(description="Where the run file is served.")
    events: str = Field(description="Server-Sent Events of its transitions.")
    page: str = Field(description="The live web view of this council.")


RowStatus = Literal[
    "queued", "running", "complete", "cancelled", "failed", "abandoned", "unreadable"
]


class RunRow(_Body):
    id: str
    question: str
    status: RowStatus
    decorrelation: str | None = None
    partial: bool = Field(default=False, description="The deadline ended the wait (2.4).")
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
