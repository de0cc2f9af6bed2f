"""The tools the server offers: their arguments as models, their schemas and descriptions.

Input and output schemas are generated from pydantic models built on the contract's own
types, so a host sees the same limits the library enforces. Input schemas are inlined
(no ``$ref``): some hosts hand them to model APIs that do not follow references.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..contract import (
    MAX_VOICES,
    MIN_VOICES,
    SETUP_NAME_PATTERN,
    CouncilResult,
    DeliberationOptions,
    Mode,
    RuntimesFile,
    TallyReport,
)

MAX_ARTIFACT_CHARS = 2_000_000
MAX_TRANSCRIPT_CHARS = 2_000_000


class _Args(BaseModel):
    # An unknown argument is an error, not something quietly ignored: a host that sends
    # ``allow_external`` learns that a tool call cannot grant consent.
    model_config = ConfigDict(extra="forbid")


class ConveneArgs(_Args):
    question: str = Field(
        min_length=1,
        max_length=20_000,
        description="The one question the council answers, self-contained (the voices see "
        "nothing else but the artifact).",
    )
    mode: Mode = Field(
        default="judge",
        description="judge: weigh a decision; critique: find flaws in the artifact; review: "
        "review the artifact as a whole. (generate is declared but not served.)",
    )
    artifact_text: str | None = Field(
        default=None,
        max_length=MAX_ARTIFACT_CHARS,
        description="The artifact inline (a plan, a diff, a design). Give this or "
        "artifact_path, not both.",
    )
    artifact_path: str | None = Field(
        default=None,
        max_length=4096,
        description="A file inside the server's working directory (relative or absolute); "
        "anything outside it is refused.",
    )
    artifact_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=256,
        description="How voices cite the artifact in evidence refs (default: the file name).",
    )
    n: int = Field(
        default=3,
        ge=MIN_VOICES,
        le=MAX_VOICES,
        description="Voices wanted; each is a different model family where one is available.",
    )
    timeout_s: float = Field(
        default=180.0, gt=0, le=3600, description="Per-voice timeout in seconds."
    )
    deadline_s: float | None = Field(
        default=None,
        gt=0,
        le=3600,
        description="Stop waiting for stragglers after this many seconds once two confirmed "
        "families have answered; the result is then marked partial.",
    )
    id: str | None = Field(
        default=None,
        description="Run id (A-Z a-z 0-9 . _ -); default: a fresh timestamped id.",
    )
    prefer_families: list[str] = Field(
        default_factory=list,
        max_length=10,
        description="Model families to seat first, e.g. ['anthropic', 'google'].",
    )
    deliberation: DeliberationOptions | None = Field(
        default=None,
        description="Optional stages after the single pass: vote or rank, rounds, red team.",
    )
    template: str | None = Field(
        default=None,
        pattern=SETUP_NAME_PATTERN,
        description="A named council setup (architecture-review, security-review, "
        "migration-critique, api-design-judge, red-team, or one from council.toml); the "
        "arguments given here override it.",
    )


class DetectArgs(_Args):
    refresh: bool = Field(default=False, description="Probe again instead of today's cache.")


class ListRunsArgs(_Args):
    limit: int = Field(
        default=20, ge=1, le=500, description="Newest runs first, at most this many."
    )


class RunArgs(_Args):
    run_id: str = Field(
        min_length=1,
        max_length=128,
        description="A run id as list_runs shows it (not a path).",
    )


class TallyArgs(_Args):
    transcript: str = Field(
        min_length=1,
        max_length=MAX_TRANSCRIPT_CHARS,
        description="A council transcript in the council DSL: '@phase propose|rank|...' "
        "lines, then moves such as 'v1 PROPOSE p1 \"...\"' or 'v2 RANK p2>p1 conf=0.8'.",
    )


class RunRow(BaseModel):
    id: str
    question: str
    status: str
    decorrelation: str | None
    partial: bool = False
    voices_valid: int
    voices_requested: int
    started_at: str | None
    duration_s: float | None
    uri: str
    problem: str | None = None


class RunList(BaseModel):
    runs: list[RunRow]


class Difference(BaseModel):
    field: str
    recorded: Any
    recomputed: Any


class VerifyOutcome(BaseModel):
    run: str
    reproduced: bool
    checked: list[str]
    differences: list[Difference]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    args: type[_Args]
    output: type[BaseModel]


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "convene",
        "Convene a council",
        "Ask several independent AI models (different model families, run as the user's own "
        "AI CLIs or endpoints) one question and get an arbitrated verdict. The result is "
        "stamped MULTI_FAMILY when at least two distinct model families answered (their "
        "agreement is signal) or NO_DECORRELATION (one family agreeing with itself: treat "
        "consensus as unconfirmed). Use it for decisions, plan critiques and reviews where a "
        "second opinion matters; it takes seconds to minutes. The text part is the verdict "
        "in Markdown; the structured part is the full CouncilResult (voices, claims, "
        "consensus, dissent, needs_decision). Progress is reported per voice.",
        ConveneArgs,
        CouncilResult,
    ),
    ToolSpec(
        "detect",
        "Detect AI CLIs",
        "List the AI CLIs found on this machine, their model families and whether each can "
        "take a council seat. Call it to see which voices convene would use.",
        DetectArgs,
        RuntimesFile,
    ),
    ToolSpec(
        "list_runs",
        "List council runs",
        "Recent council runs in this project, newest first: id, status (running, complete, "
        "cancelled, failed, abandoned), decorrelation stamp, valid/requested voices, and the "
        "rune://runs/<id> resource of each.",
        ListRunsArgs,
        RunList,
    ),
    ToolSpec(
        "show_run",
        "Show a council run",
        "The result of one run by id (also one still running): the verdict in Markdown and "
        "the full CouncilResult.",
        RunArgs,
        CouncilResult,
    ),
    ToolSpec(
        "verify_run",
        "Verify a council run",
        "Re-derive a finished run's verdict from the raw answers its run file recorded and "
        "say whether it reproduces, field by field where it does not. It checks the "
        "arithmetic, not the voices.",
        RunArgs,
        VerifyOutcome,
    ),
    ToolSpec(
        "tally",
        "Tally a transcript",
        "Validate and tally a council transcript written in the council DSL (no model "
        "involved): Borda x confidence scores, winner, Kendall's W consensus, dissenting "
        "rankers, votes, and every dropped or invalid line with its reason.",
        TallyArgs,
        TallyReport,
    ),
)
BY_NAME = {tool.name: tool for tool in TOOLS}


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with every local ``$ref`` replaced by its definition and no ``$defs``."""
    defs: dict[str, Any] = schema.get("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                target = walk(defs[ref.removeprefix("#/$defs/")])
                rest = {k: walk(v) for k, v in node.items() if k != "$ref"}
                return {**target, **rest}
            return {k: walk(v) for k, v in node.items() if k != "$defs"}
        if isinstance(node, list):
            return [walk(item) for item in node]
        return node

    result: dict[str, Any] = walk(schema)
    return result


def input_schema(spec: ToolSpec) -> dict[str, Any]:
    return inline_refs(spec.args.model_json_schema())


def output_schema(spec: ToolSpec) -> dict[str, Any]:
    return spec.output.model_json_schema(mode="serialization")
