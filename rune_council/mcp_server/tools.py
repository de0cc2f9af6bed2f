"""The tools the server offers: their arguments, their schemas and descriptions.

The convene tool takes the ask every door takes (``council.intake``): its input schema is
the intake's own, without the keys only the server's operator may set, so a host sees the
bounds the library enforces and no restatement of them. The other tools' arguments are
small models of their own. Input schemas are inlined (no ``$ref``): some hosts hand them to
model APIs that do not follow references.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..contract import CouncilResult, RuntimesFile, TallyReport
from ..council.intake import (
    FLAGS,
    OPERATOR_ONLY,
    Ask,
    AskError,
    Problem,
    ask_from_arguments,
    ask_schema,
    parse_ask,
    unknown_key,
)
from ..errors import RequestError

MAX_TRANSCRIPT_CHARS = 2_000_000
# The one door key of convene: the line a host's /rune command was given, read as flags.
ARGUMENTS = "arguments"
MAX_ARGUMENTS_CHARS = 40_000


class _Args(BaseModel):
    # An unknown argument is an error, not something quietly ignored.
    model_config = ConfigDict(extra="forbid")


def host_flags() -> list[str]:
    """The options a host may pass on (``/rune council --template ... "<q>"``): every flag
    of the intake but those only the operator sets."""
    return [flag for key, flag in FLAGS.items() if key.partition(".")[0] not in OPERATOR_ONLY]


@functools.cache
def convene_schema() -> dict[str, Any]:
    """The ask as a host's model may send it, plus ``arguments``; nothing is required on its
    own (a question, or arguments holding one), since some model APIs refuse a top-level
    ``anyOf``."""
    schema = inline_refs(ask_schema(trusted_caller=False, nested=False))
    schema.pop("required", None)
    options = ", ".join(host_flags())
    schema["properties"][ARGUMENTS] = {
        "type": "string",
        "maxLength": MAX_ARGUMENTS_CHARS,
        "description": "What the user typed after `/rune council`, verbatim, as one string: "
        "the question (in quotes) and any options, e.g. `--template security-review "
        f'--rounds 2 "Is the plan safe?"`. Options: {options}. The server splits it '
        "into words as a shell would quote them and reads them as data: nothing in it is "
        "expanded or run. The other keys may be given beside it, but not the same one twice.",
    }
    return schema


def convene_ask(arguments: Mapping[str, Any]) -> tuple[Ask, bool]:
    """The ask a convene call stands for, and whether it came as flags (its mistakes are
    then told in flag spelling)."""
    offered = set(convene_schema()["properties"])
    for key in arguments:
        # An operator's key is let through to be refused with the reason, not as unknown.
        if key not in offered and key not in OPERATOR_ONLY:
            raise AskError([Problem(str(key), unknown_key(str(key), offered))])
    keys = {k: v for k, v in arguments.items() if k != ARGUMENTS}
    line = arguments.get(ARGUMENTS)
    if line is None:
        return parse_ask(keys), False
    if not isinstance(line, str) or len(line) > MAX_ARGUMENTS_CHARS:
        raise AskError(
            [Problem(ARGUMENTS, f"must be one string of at most {MAX_ARGUMENTS_CHARS} characters")]
        )
    from_line = ask_from_arguments(line).model_dump(mode="json", exclude_unset=True)
    twice = sorted(set(from_line) & set(keys))
    if twice:
        raise AskError([Problem(twice[0], f"given in {ARGUMENTS} and as a key; give it once")])
    return parse_ask({**from_line, **keys}), True


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


def _bad_args(exc: ValidationError) -> RequestError:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
    )
    return RequestError(f"malformed arguments: {problems}")


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    args: type[_Args] | None
    output: type[BaseModel]

    def input_schema(self) -> dict[str, Any]:
        if self.args is None:
            return convene_schema()
        return inline_refs(self.args.model_json_schema())

    def parse(self, arguments: Mapping[str, Any]) -> Any:
        """The call's arguments as its handler takes them; a mistake is a RequestError."""
        if self.args is None:
            return convene_ask(arguments)
        try:
            return self.args.model_validate(dict(arguments))
        except ValidationError as exc:
            raise _bad_args(exc) from None


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
        "consensus, dissent, needs_decision). Give the question and options as keys, or "
        "what the user typed after `/rune council` as `arguments`. A `template` presets a kind "
        "of review; a `chain` runs councils in order (the result is the last one's, the text "
        "lists every run). Progress is reported per voice, through deliberation and rounds.",
        None,
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


def output_schema(spec: ToolSpec) -> dict[str, Any]:
    return spec.output.model_json_schema(mode="serialization")
