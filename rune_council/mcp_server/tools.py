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

from ..core.contract import CouncilResult, RuntimesFile, TallyReport
from ..core.errors import RequestError
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

MAX_TRANSCRIPT_CHARS = 2_000_000
# The door keys of convene: the line a host's /rune command was given, read as flags, and
# the user's choice to keep the question on this host (it can only take consent away).
ARGUMENTS = "arguments"
SUBAGENTS_ONLY = "subagents_only"
MAX_ARGUMENTS_CHARS = 40_000
MAX_ANSWER_CHARS = 200_000  # a voice's raw answer is kept up to this much
MAX_ANSWERS = 16


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
    schema["properties"][SUBAGENTS_ONLY] = {
        "type": "boolean",
        "description": "true: send nothing to the external AI CLIs and endpoints; this host's "
        "own subagents take every slot (convene hands you their prompts). Only when the user "
        "asked for it, e.g. after a needs-consent answer. It can only keep the question here: "
        "nothing a call says can allow sending it out.",
    }
    return schema


@dataclass(frozen=True)
class ConveneCall:
    """A convene call as the server runs it: the ask, whether it came as flags (its mistakes
    are then told in flag spelling), and whether the caller kept it to subagents."""

    ask: Ask
    as_flags: bool = False
    subagents_only: bool = False


def convene_ask(arguments: Mapping[str, Any]) -> ConveneCall:
    """The ask a convene call stands for."""
    offered = set(convene_schema()["properties"])
    for key in arguments:
        # An operator's key is let through to be refused with the reason, not as unknown.
        if key not in offered and key not in OPERATOR_ONLY:
            raise AskError([Problem(str(key), unknown_key(str(key), offered))])
    only = arguments.get(SUBAGENTS_ONLY, False)
    if not isinstance(only, bool):
        raise AskError([Problem(SUBAGENTS_ONLY, "must be true or false")])
    keys = {k: v for k, v in arguments.items() if k not in (ARGUMENTS, SUBAGENTS_ONLY)}
    line = arguments.get(ARGUMENTS)
    if line is None:
        return ConveneCall(parse_ask(keys), False, only)
    if not isinstance(line, str) or len(line) > MAX_ARGUMENTS_CHARS:
        raise AskError(
            [Problem(ARGUMENTS, f"must be one string of at most {MAX_ARGUMENTS_CHARS} characters")]
        )
    from_line = ask_from_arguments(line).model_dump(mode="json", exclude_unset=True)
    twice = sorted(set(from_line) & set(keys))
    if twice:
        raise AskError([Problem(twice[0], f"given in {ARGUMENTS} and as a key; give it once")])
    return ConveneCall(parse_ask({**from_line, **keys}), True, only)


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


class SubagentAnswer(_Args):
    slot: str = Field(min_length=1, max_length=64, description="The slot, as the prompt gave it.")
    token: str = Field(
        min_length=1, max_length=256, description="The token that came with that slot's prompt."
    )
    answer: str = Field(
        max_length=MAX_ANSWER_CHARS,
        description="The subagent's reply, verbatim. An empty string gives the slot up.",
    )


class SubmitArgs(_Args):
    run_id: str = Field(
        min_length=1, max_length=128, description="The run_id the prompts came with."
    )
    answers: list[SubagentAnswer] = Field(
        min_length=1,
        max_length=MAX_ANSWERS,
        description="One entry per prompt answered; all of them in one call is best.",
    )


class SubagentPrompt(BaseModel):
    slot: str = Field(description="Which of the council's slots this is (v1, v2, ...).")
    role: str = Field(
        description="The slot's role: standard, perturbation (the question framed the other "
        "way), devils_advocate, or ballot (a later stage's question to a member)."
    )
    persona: str | None = Field(default=None, description="The persona the prompt assigns.")
    token: str = Field(description="Give it back with this slot's answer; it works once.")
    expires_in_s: float = Field(description="Seconds left before the council stops waiting.")
    prompt: str = Field(description="The whole prompt, to hand to one subagent as it is.")


class SubagentWork(BaseModel):
    """No verdict yet: the council waits for the host's subagents."""

    needs_answers: bool = Field(
        default=True, description="Always true: the council waits for these answers."
    )
    verdict: None = Field(default=None, description="No verdict yet.")
    run_id: str
    prompts: list[SubagentPrompt]
    instructions: str


class ConsentNeeded(BaseModel):
    """No council was run: nobody has allowed sending the question out, and only the user
    can (a tool error, with what to tell them)."""

    needs_consent: bool = Field(default=True, description="Always true.")
    verdict: None = Field(default=None, description="No council was run.")
    command: str = Field(description="The one command the user runs, in their own terminal.")
    would_send_to: list[str] = Field(description="The AI CLIs and endpoints it would reach.")
    project: str
    instead: str = Field(description="How to keep the question on this machine instead.")


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
        "lists every run). Progress is reported per voice, through deliberation and rounds. "
        "Two answers are not verdicts: a tool error with needs_consent (only the user can "
        "allow sending the question out: tell them the command it names), and needs_answers "
        "(no external voice may answer: run each prompt as a subagent of your own and give "
        "the replies to submit_answers). A council where no voice answered is a tool error.",
        None,
        CouncilResult,
    ),
    ToolSpec(
        "submit_answers",
        "Submit subagent answers",
        "Give the council the answers of the subagents you ran for the prompts convene (or an "
        "earlier submit_answers) handed you: the run_id, and for each prompt its slot, its "
        "token and the subagent's reply verbatim. Each token works once, for its own slot of "
        "its own run, until the council stops waiting. The answers are checked like any "
        "voice's; the result is the verdict, or more prompts when a later stage needs them.",
        SubmitArgs,
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
        "no_verdict, cancelled, failed, abandoned), decorrelation stamp, valid/requested "
        "voices, and the rune://runs/<id> resource of each.",
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


# The tools that answer with a verdict or, while the council waits for the host's
# subagents, with their prompts.
COUNCIL_TOOLS = frozenset({"convene", "submit_answers"})


@functools.cache
def council_or_work_schema() -> dict[str, Any]:
    """A CouncilResult; the SubagentWork of a council waiting on the host; or, with a tool
    error, ConsentNeeded. One object schema whose branches share the definitions at the
    top (some clients check a tool error's structured part against it too)."""
    branches = [
        model.model_json_schema(mode="serialization")
        for model in (CouncilResult, SubagentWork, ConsentNeeded)
    ]
    defs: dict[str, Any] = {}
    for branch in branches:
        defs.update(branch.pop("$defs", {}))
    return {
        "type": "object",
        "title": "CouncilResult, SubagentWork or ConsentNeeded",
        "description": "The council's result; or (needs_answers: true, no verdict) the "
        "prompts it waits for from the host's subagents; or (needs_consent: true, a tool "
        "error) the command only the user can run to allow sending the question out.",
        "anyOf": branches,
        "$defs": defs,
    }


def output_schema(spec: ToolSpec) -> dict[str, Any]:
    if spec.name in COUNCIL_TOOLS:
        return council_or_work_schema()
    return spec.output.model_json_schema(mode="serialization")
