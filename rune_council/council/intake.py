"""One intake for every door: what a caller may ask of a council, and how that becomes a run.

Each door parses only its own syntax (flags, a JSON body, tool arguments, a JSONL line, a
host's ``$ARGUMENTS``) into an ``Ask`` and calls ``prepare`` with a ``Door`` saying who is
asking. ``prepare`` reads the user's settings once, applies the template once, confines an
artifact path by one rule, decides consent by one rule, notes a capped ``n`` with the
council's own words and returns the ``PerspectiveRequest`` and ``CouncilOptions`` the
pipeline runs. So an option means the same thing in the CLI, over HTTP, over MCP and in a
batch line, and a mistake reads the same wherever it is made.

The keys of an ``Ask`` are flat where a caller types them (``n``, ``timeout``,
``council_type``) and nested only where the platform's documented body nests them
(``multi_round``, ``artifact``). Their bounds are the contract's own, read from the
``PerspectiveRequest`` fields each key lands in (``REQUEST_PATHS``), never restated.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import stat
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic.json_schema import DEFAULT_REF_TEMPLATE
from pydantic_core import PydanticCustomError

from ..core.contract import (
    RUN_ID_PATTERN,
    Artifact,
    CouncilResult,
    CouncilType,
    DeliberationMethod,
    Mode,
    OnDivergence,
    PerspectiveRequest,
    RoundsOptions,
    SetupName,
    Summon,
)
from ..core.errors import CouncilError, NotImplementedModeError, RequestError, RuntimeConfigError
from ..core.paths import RuneDir
from ..core.records import record
from ..stages.capacity import capped_voices
from .lifecycle import run_blocking
from .options import CouncilOptions
from .request import ARTIFACT_READ_CAP, UNSERVED, new_run_id, parse_request, refuse_unserved

if TYPE_CHECKING:
    from ..config import CouncilConfig
    from ..endpoints import EndpointSetup
    from ..runtimes.subagent import CommandRuntime

# Where each flat key lands in the PerspectiveRequest. The same table gives the key its
# bounds (``_key``) and tells the request's complaints back in the caller's words
# (``_ask_key``), so the three cannot drift apart.
REQUEST_PATHS: dict[str, tuple[str, ...]] = {
    "question": ("question",),
    "id": ("id",),
    "mode": ("mode",),
    "n": ("n",),
    "prefer": ("diversity", "prefer_model_families"),
    "timeout": ("budget", "per_voice_timeout_s"),
    "deadline": ("budget", "deadline_s"),
    "artifact": ("artifact",),
    "deliberation": ("deliberation", "method"),
    "council_type": ("deliberation", "council_type"),
    "vote_threshold": ("deliberation", "vote_threshold"),
    "orchestrator": ("deliberation", "orchestrator"),
    "multi_round": ("deliberation", "rounds"),
    "summon": ("deliberation", "summon"),
}
# The only check on ``deliberation`` as a whole is that every summons is in reach of the
# rounds; its complaint belongs to the key that made it.
_WHOLE = {("deliberation",): "summon"}

# What only the one running the door may decide, and why. A caller who is not that person
# (an HTTP client, an MCP host's model, a line of an items file from elsewhere) gets a clear
# refusal, not a quiet drop.
OPERATOR_ONLY: dict[str, str] = {
    "yes": "consent to send prompts to external AI CLIs and endpoints is the operator's",
    "subagent_cmd": "it runs a program",
    "orchestrator_cmd": "it runs a program",
    "key_env": "it sends a variable's value to an endpoint",
    "subagent_endpoint": "it chooses where prompts go",
    "subagent_family": "it describes the operator's subagent",
    "subagent_model": "it chooses the operator's subagent",
}
MAX_ENDPOINTS = 16


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model an annotation holds (through Optional, list and Annotated), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _contract_field(path: tuple[str, ...]) -> FieldInfo:
    model: type[BaseModel] = PerspectiveRequest
    for part in path[:-1]:
        inner = _model_in(model.model_fields[part].annotation)
        assert inner is not None, path
        model = inner
    return model.model_fields[path[-1]]


def _like(info: FieldInfo, description: str | None = None) -> Any:
    """An optional field with the bounds of a contract field (and its words, unless given)."""
    bounds: dict[str, Any] = {}
    for rule in info.metadata:
        if dataclasses.is_dataclass(rule) and not isinstance(rule, type):
            bounds.update(dataclasses.asdict(rule))  # annotated_types' Ge, MaxLen, ...
        elif hasattr(rule, "__dict__"):
            bounds.update(vars(rule))  # pydantic's own (pattern and the like)
    return Field(default=None, description=description or info.description, **bounds)


def _key(name: str, description: str | None = None) -> Any:
    return _like(_contract_field(REQUEST_PATHS[name]), description)


class _Keys(BaseModel):
    # An unknown key is an error naming the closest valid one (``unknown_key``), never
    # something quietly ignored. Built on first use: a door that never parses an ask of
    # this kind (a server's empty defaults) does not pay for its schema.
    model_config = ConfigDict(extra="forbid", defer_build=True)


def _path_shorthand(value: Any) -> Any:
    return {"path": value} if isinstance(value, str) else value


class ArtifactAsk(Artifact):
    """The contract's artifact; a bare string is a path. Text is bounded like a file's read."""

    text: str | None = Field(
        default=None, max_length=ARTIFACT_READ_CAP, description="The artifact inline."
    )


AskArtifact = Annotated[
    ArtifactAsk, BeforeValidator(_path_shorthand, json_schema_input_type=str | ArtifactAsk)
]


def _summon_shorthand(value: Any) -> Any:
    """``WHO`` or ``WHO@ROUND`` as a summons (the form a flag or an argument list gives)."""
    if not isinstance(value, str):
        return value
    who, sep, at = value.partition("@")
    if not sep:
        return {"who": who}
    if not at.isdigit():
        raise ValueError(f"{value!r}: the round after @ must be a number (e.g. {who}@2)")
    return {"who": who, "round": int(at)}


AskSummon = Annotated[
    Summon, BeforeValidator(_summon_shorthand, json_schema_input_type=str | Summon)
]
EndpointName = Annotated[str, StringConstraints(min_length=1, max_length=2048)]


def _round(name: str) -> Any:
    return _like(RoundsOptions.model_fields[name])


class MultiRound(_Keys):
    """Rounds and their policy, as the platform documents them (``multi_round``)."""

    max_rounds: int | None = _round("max_rounds")
    convergence_threshold: float | None = _round("convergence_threshold")
    on_divergence: OnDivergence | None = _round("on_divergence")
    round_prompt_prefix: str | None = _round("round_prompt_prefix")


class AskDefaults(_Keys):
    """Everything an ask may say except the question: also what a door's operator sets for
    every council it runs (a batch's flags, a server's ``--subagent-cmd`` and ``--yes``)."""

    mode: Mode | None = _key(
        "mode",
        "judge: weigh a decision; critique: find flaws in the artifact; review: "
        "review it as a whole (generate is declared but not served). Default judge.",
    )
    n: int | None = _key("n")
    artifact: AskArtifact | None = Field(
        default=None,
        description="What the voices critique or review: a path (confined to the door's "
        "folder), or {name, text} inline, or {name, path}.",
    )
    template: SetupName | None = Field(
        default=None,
        description="A named council setup (`rune council templates`); it fills only what "
        "the ask leaves out.",
    )
    chain: SetupName | None = Field(
        default=None,
        description="A chain of councils (e.g. red-team-first), each step a template.",
    )
    deliberation: DeliberationMethod | None = _key(
        "deliberation", "After the single pass: vote | rank (or another registered method)."
    )
    council_type: CouncilType | None = _key("council_type")
    vote_threshold: float | None = _key("vote_threshold")
    orchestrator: str | None = _key("orchestrator")
    multi_round: MultiRound | None = Field(
        default=None, description="Rounds at most, early stop, what to do on divergence."
    )
    summon: list[AskSummon] | None = _key(
        "summon", "Members added in later rounds: WHO or WHO@ROUND, or {who, round, on}."
    )
    timeout: float | None = _key("timeout", "Per-voice timeout in seconds.")
    deadline: float | None = _key("deadline")
    prefer: list[str] | None = _key("prefer")
    endpoints: list[EndpointName] | None = Field(
        default=None,
        max_length=MAX_ENDPOINTS,
        description="Endpoints for this council, replacing the configured set: names from "
        "council.toml (a caller other than the operator may name only these), presets or "
        "base URLs.",
    )
    key_env: str | None = Field(
        default=None, description="Environment variable holding the key for endpoints."
    )
    refresh: bool | None = Field(default=None, description="Probe the CLIs again.")
    refresh_models: bool | None = Field(
        default=None, description="List the endpoints' models again."
    )
    subagent_cmd: str | None = Field(
        default=None,
        min_length=1,
        description="Command that answers a prompt on stdin; takes failed or empty slots.",
    )
    subagent_family: str | None = Field(
        default=None, description="Model family of the subagent command."
    )
    subagent_endpoint: str | None = Field(
        default=None, description="Endpoint whose model takes failed or empty slots."
    )
    subagent_model: str | None = Field(default=None, description="Model id for it.")
    orchestrator_cmd: str | None = Field(
        default=None,
        min_length=1,
        description="Command (prompt on stdin) that consolidates and writes the verdict.",
    )
    yes: bool | None = Field(
        default=None,
        description="Consent to send the question to external AI CLIs and endpoints "
        "(false refuses; unset defers to the environment and council.toml).",
    )


def _id_optional(schema: dict[str, Any]) -> None:
    schema["required"] = [key for key in schema.get("required", []) if key != "id"]


class NestedRequest(PerspectiveRequest):
    """The contract's request as the nested form sends it: the id may be left out."""

    model_config = ConfigDict(json_schema_extra=_id_optional)


class Ask(AskDefaults):
    """One council as a caller asks for it, through any door."""

    question: str | None = _key(
        "question",
        "The one question the council answers, self-contained (required unless request is given).",
    )
    id: str | None = Field(
        default=None,
        description="Run id (a safe file name); default a fresh timestamped one.",
        json_schema_extra={"pattern": RUN_ID_PATTERN},
    )
    request: NestedRequest | None = Field(
        default=None,
        description="The contract's PerspectiveRequest whole (id optional); the other keys "
        "override its fields. Give this or question.",
    )

    @model_validator(mode="before")
    @classmethod
    def _request_id(cls, data: Any) -> Any:
        # The nested form may leave its id out, as the flat one may.
        inner = data.get("request") if isinstance(data, Mapping) else None
        if isinstance(inner, Mapping) and "id" not in inner:
            chosen = data.get("id") if isinstance(data.get("id"), str) else None
            return {**data, "request": {**inner, "id": chosen or new_run_id()}}
        return data

    @model_validator(mode="after")
    def _one_question(self) -> Ask:
        if self.request is not None and self.question is not None:
            raise PydanticCustomError(
                "question_twice",
                "give question (with the other keys beside it) or request, not both",
            )
        if self.request is None and self.question is None:
            raise PydanticCustomError("question_missing", "Field required")
        return self


KEYS: tuple[str, ...] = tuple(Ask.model_fields)


# --------------------------------------------------------------------------- problems


@record(frozen=True)
class Problem:
    """One thing wrong with an ask, at the key (dotted, e.g. ``multi_round.max_rounds``)."""

    key: str
    message: str


class AskError(RequestError):
    """An ask that cannot be run; ``problems`` names each key, the message says it in the
    door's own spelling."""

    def __init__(self, problems: list[Problem], spell: Callable[[str], str] = str) -> None:
        self.problems = problems
        shown = "; ".join(f"{spell(p.key)}: {p.message}" for p in problems[:5])
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        super().__init__(shown + more)


def unknown_key(key: str, valid: Iterable[str]) -> str:
    """What every door says about a key it does not know: the closest one it does."""
    choices = sorted(valid)
    closest = difflib.get_close_matches(key, choices, n=1, cutoff=0.0)
    shown = key if len(key) <= 60 else key[:57] + "..."
    hint = f" (closest valid key: {closest[0]!r})" if closest else ""
    return f"unknown key {shown!r}{hint}"


def _model_at(model: type[BaseModel], loc: Iterable[str | int]) -> type[BaseModel]:
    for part in loc:
        if isinstance(part, int):
            continue
        info = model.model_fields.get(part)
        inner = _model_in(info.annotation) if info is not None else None
        if inner is None:
            break
        model = inner
    return model


def _message(msg: str) -> str:
    # A validator's own words, without pydantic's "Value error, " in front of them.
    return msg.removeprefix("Value error, ")


def _literal_values(annotation: Any) -> list[str]:
    if typing.get_origin(annotation) is typing.Literal:
        return [str(value) for value in typing.get_args(annotation)]
    return [value for arg in typing.get_args(annotation) for value in _literal_values(arg)]


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def one_of(valid: Iterable[str], given: Any) -> str:
    """What every door says about a value outside a fixed set: the values it accepts."""
    return f"must be one of {', '.join(valid)} (got {_shown(given)})"


def _error_message(err: Any, model: type[BaseModel]) -> str:
    """A validation error in the words a caller can act on: a value outside a fixed set
    names the values the council accepts (not those the contract declares but does not
    serve), never the model's class."""
    loc = tuple(err["loc"])
    if err["type"] == "literal_error" and loc:
        info = _model_at(model, loc[:-1]).model_fields.get(str(loc[-1]))
        if info is not None:
            unserved = UNSERVED.get(str(loc[-1]), frozenset())
            valid = [v for v in _literal_values(info.annotation) if v not in unserved]
            if valid:
                return one_of(valid, err.get("input"))
    return _message(err["msg"])


def _dotted(loc: Iterable[str | int]) -> str:
    return ".".join(str(p) for p in loc)


def problems_of(
    exc: ValidationError, model: type[BaseModel] = Ask, prefix: tuple[str, ...] = ()
) -> list[Problem]:
    """A validation error of ``model`` as problems by key; an unknown key names the closest."""
    out: list[Problem] = []
    for err in exc.errors():
        loc = (*prefix, *err["loc"])
        kind = err["type"]
        if kind == "question_missing":
            out.append(Problem("question", err["msg"]))
        elif kind == "question_twice":
            out.append(Problem("request", err["msg"]))
        elif kind == "extra_forbidden" and loc:
            valid = _model_at(model, err["loc"][:-1]).model_fields
            out.append(Problem(_dotted(loc), unknown_key(str(loc[-1]), valid)))
        else:
            out.append(Problem(_dotted(loc) or "ask", _error_message(err, model)))
    return out


def parse_ask(data: Any, spell: Callable[[str], str] = str) -> Ask:
    """A door's decoded keys (a JSON body, tool arguments, a batch line) as an ``Ask``."""
    if not isinstance(data, Mapping):
        raise AskError([Problem("ask", f"must be an object of keys, not {type(data).__name__}")])
    try:
        return Ask.model_validate(dict(data))
    except ValidationError as exc:
        raise AskError(problems_of(exc), spell) from None


# --------------------------------------------------------------------------- the door


@record(frozen=True)
class Door:
    """Who is asking, and what the one running the door decided.

    ``artifact_root``: an artifact path resolves against it and must lead to a regular file
    under it (None: this door takes artifacts as text only). ``trusted_caller``: the caller
    is the operator (the user at the CLI); otherwise the ``OPERATOR_ONLY`` keys are refused
    and endpoints must be named in council.toml. ``defaults``: the operator's settings for
    every council of this door; the caller's keys win over them. ``spell`` renders a key the
    way this door's caller writes it (``--subagent-cmd`` on the CLI).
    """

    name: str = "rune council"
    rune_dir: str | os.PathLike[str] | None = None
    artifact_root: Path | None = field(default_factory=Path.cwd)
    trusted_caller: bool = True
    # No defaults, made without validating (there is nothing to validate): a door with none
    # never builds the model.
    defaults: AskDefaults = field(default_factory=lambda: AskDefaults.model_construct())
    env: Mapping[str, str] | None = None
    config: CouncilConfig | None = None
    spelling: Mapping[str, str] = field(default_factory=dict)
    artifact_hint: str = ""

    @property
    def where(self) -> RuneDir:
        return RuneDir.resolve(self.rune_dir)

    def spell(self, key: str) -> str:
        if key in self.spelling:
            return self.spelling[key]
        head, dot, rest = key.partition(".")
        return self.spelling.get(head, head) + dot + rest

    def refuse(self, key: str, message: str) -> AskError:
        return AskError([Problem(key, message)], self.spell)


class ArtifactRefused(RequestError):
    """An artifact path that leads out of the door's folder, or to no regular file."""


def confine_artifact(given: str, root: Path) -> Path:
    """The file ``given`` names, resolved against ``root`` (symlinks too) and refused unless
    it is a regular file under it: a caller naming ``../../.ssh/id_rsa``, ``/etc/passwd`` or
    a link out of the folder must not get that file sent to the voices."""
    if "\x00" in given:
        raise ArtifactRefused(f"{given!r} contains a NUL byte")
    base = root.resolve()
    try:
        target = (base / given).resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop, a name too long
        raise ArtifactRefused(f"{given!r} cannot be resolved: {exc}") from None
    if not target.is_relative_to(base):
        raise ArtifactRefused(f"{given!r} is outside {base}; only files under it are read")
    try:
        mode = target.stat().st_mode
    except OSError:
        raise ArtifactRefused(
            f"cannot read artifact {given!r}: not a file under {base} (no such file)"
        ) from None
    if not stat.S_ISREG(mode):
        # A FIFO would block the read, a device never end; only regular files are read.
        raise ArtifactRefused(f"cannot read artifact {given!r}: not a regular file")
    return target


# --------------------------------------------------------------------------- prepare


@record(frozen=True)
class Prepared:
    """What a door runs: the request, the options, the chain if any, and what to tell the
    caller before the run (``notes``). ``consent_undecided``: nothing has said yes or no to
    external dispatch, so a door that can ask its user (a terminal, an MCP elicitation) may,
    and pass the answer to ``with_consent``."""

    request: PerspectiveRequest
    options: CouncilOptions
    chain: str | None = None
    notes: tuple[str, ...] = ()
    consent_undecided: bool = False

    def with_consent(self, allowed: bool | None) -> Prepared:
        options = dataclasses.replace(self.options, allow_external=allowed)
        undecided = self.consent_undecided and allowed is None
        return dataclasses.replace(self, options=options, consent_undecided=undecided)

    def with_options(self, **changes: Any) -> Prepared:
        """The same council with door-only options set (``on_event``, ``overwrite``, ...)."""
        return dataclasses.replace(self, options=dataclasses.replace(self.options, **changes))

    def runs(self) -> list[tuple[str | None, str]]:
        """(template, run id) of every run file this writes, in order: the one council's,
        or each chain step's, planned as the chain plans them before its first step, so a
        door can claim or follow them all before anything runs."""
        if self.chain is None:
            used = self.request.template
            return [(used.name if used is not None else None, self.request.id)]
        from .chain import step_ids
        from .templates import config_for, find_chain

        found = find_chain(self.chain, config_for(self.options))
        ids = step_ids(self.request.id, found.spec.steps)
        return list(zip(found.spec.steps, ids, strict=True))

    async def aconvene(self) -> CouncilResult:
        from .chain import aconvene_chain
        from .pipeline import aconvene

        if self.chain is not None:
            return await aconvene_chain(self.request, self.options, self.chain)
        return await aconvene(self.request, self.options)

    def convene(self) -> CouncilResult:
        return run_blocking(self.aconvene)


def _given(keys: AskDefaults) -> dict[str, Any]:
    """The keys a caller set to something; an explicit null means "not set"."""
    if not keys.model_fields_set:
        return {}
    data = keys.model_dump(mode="json", exclude_unset=True, exclude_none=True)
    for own in ("question", "id", "request"):
        data.pop(own, None)
    return data


def _deep(under: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(under)
    for key, value in over.items():
        below = out.get(key)
        # An artifact is one thing: a text over a path replaces it, never merges with it.
        if key != "artifact" and isinstance(value, Mapping) and isinstance(below, Mapping):
            out[key] = _deep(below, value)
        else:
            out[key] = value
    return out


def _nest(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    out: dict[str, Any] = {path[-1]: value}
    for part in reversed(path[:-1]):
        out = {part: out}
    return out


def _confined(artifact: Mapping[str, Any], door: Door, key: str) -> dict[str, Any]:
    given = artifact.get("path")
    if given is None:
        return dict(artifact)
    if door.artifact_root is None:
        raise door.refuse(key, f"{door.name} takes an artifact as text only{door.artifact_hint}")
    try:
        path = confine_artifact(given, door.artifact_root)
    except ArtifactRefused as exc:
        raise door.refuse(key, str(exc)) from None
    # Absolute and resolved, so the run file says which file it was wherever it is read
    # and the council reads the very file that was checked.
    return {**artifact, "path": str(path)}


def _request_part(keys: Mapping[str, Any], door: Door) -> dict[str, Any]:
    """The request fields a set of flat keys stands for."""
    out: dict[str, Any] = {}
    for key, value in keys.items():
        path = REQUEST_PATHS.get(key)
        if path is None:
            continue  # a council option, not a request field
        if key == "artifact":
            if "path" in value and "name" not in value:
                value = {**value, "name": Path(value["path"]).name or "artifact"}
            value = _confined(value, door, "artifact.path" if "path" in value else "artifact")
        out = _deep(out, _nest(path, value))
    return out


def _ask_key(loc: tuple[str | int, ...], flat: Mapping[str, Any]) -> str:
    """A complaint about the request told at the key the caller used for it."""
    parts = tuple(str(p) for p in loc)
    best: tuple[int, str] | None = None
    for key, path in REQUEST_PATHS.items():
        if key in flat and parts[: len(path)] == path and (best is None or len(path) > best[0]):
            best = (len(path), key)
    if best is not None:
        rest = parts[best[0] :]
        return ".".join((best[1], *rest))
    if parts in _WHOLE and _WHOLE[parts] in flat:
        return _WHOLE[parts]
    return ".".join(("request", *parts)) if parts else "request"


def _checked_request(
    data: dict[str, Any], flat: Mapping[str, Any], door: Door
) -> PerspectiveRequest:
    try:
        req = PerspectiveRequest.model_validate(data)
    except ValidationError as exc:
        problems = [
            Problem(_ask_key(tuple(e["loc"]), flat), _error_message(e, PerspectiveRequest))
            for e in exc.errors()
        ]
        raise AskError(problems, door.spell) from None
    method = req.deliberation.method if req.deliberation is not None else None
    if method is not None:
        from ..deliberation.registry import METHODS

        if method not in METHODS:
            raise door.refuse("deliberation", one_of(sorted(METHODS), method))
    try:
        return parse_request(req)
    except RequestError as exc:
        raise door.refuse("deliberation", str(exc)) from None


def _refuse_operator_only(given: Mapping[str, Any], ask: Ask, door: Door) -> None:
    taken = [key for key in OPERATOR_ONLY if key in given]
    if taken:
        problems = [
            Problem(key, f"only the operator of {door.name} sets this ({OPERATOR_ONLY[key]})")
            for key in taken
        ]
        raise AskError(problems, door.spell)
    if ask.request is not None:
        for part in ("template", "chain"):
            if part in ask.request.model_fields_set and getattr(ask.request, part) is not None:
                raise door.refuse(
                    f"request.{part}",
                    f"recorded by the council when it applies a {part}; name one with "
                    f"{door.spell(part)}",
                )


def _endpoint_setup(
    settings: Mapping[str, Any],
    asked: Iterable[str],
    door: Door,
    config: CouncilConfig,
    env: Mapping[str, str],
) -> EndpointSetup:
    from ..endpoints.config import endpoints_from_config, setup_from_options

    named: list[str] = list(settings.get("endpoints", ()))
    try:
        # Only the caller's own names are held to council.toml: the operator's defaults (a
        # batch's --endpoint URL) are the operator's to choose.
        caller_named = list(asked)
        if caller_named and not door.trusted_caller:
            known = endpoints_from_config(config)
            for i, name in enumerate(caller_named):
                if name not in known:
                    listed = ", ".join(sorted(known)) or "none"
                    raise door.refuse(
                        f"endpoints.{i}",
                        f"no endpoint named {name[:80]!r} is configured (configured: {listed})",
                    )
        sub_endpoint = settings.get("subagent_endpoint")
        sub_model = settings.get("subagent_model")
        # Only what the ask names goes in; seating adds council.toml's [subagent] endpoint
        # when nothing else takes the failed slots.
        return setup_from_options(
            door.where,
            endpoints=named,
            key_env=settings.get("key_env"),
            refresh=bool(settings.get("refresh_models")),
            subagent_endpoint=sub_endpoint,
            subagent_model=sub_model,
            with_subagent=sub_endpoint is not None or sub_model is not None,
            env=env,
            config=config,
        )
    except RuntimeConfigError as exc:
        raise door.refuse("endpoints", str(exc)) from None


def prepare(ask: Ask, door: Door | None = None) -> Prepared:
    """The council an ask stands for, as ``door`` lets its caller ask it.

    Precedence, lowest first: a template, the door's ``defaults``, the nested ``request``,
    the ask's own keys. Raises ``AskError`` (a ``RequestError``) naming the key at fault.
    """
    from ..config import load_config
    from ..consent import decide
    from .templates import apply_template, find_chain, find_template

    door = door or Door()
    where = door.where
    env = os.environ if door.env is None else door.env
    config = door.config if door.config is not None else load_config(where, env)
    given = _given(ask)
    if not door.trusted_caller:
        _refuse_operator_only(given, ask, door)
    defaults = _given(door.defaults)
    settings = _deep(defaults, given)
    template, chain = settings.get("template"), settings.get("chain")
    if template is not None and chain is not None:
        raise door.refuse("chain", "a chain's steps are templates already: give one of the two")
    if settings.get("subagent_cmd") and settings.get("subagent_endpoint"):
        raise door.refuse("subagent_endpoint", "give subagent_cmd or subagent_endpoint, not both")

    data = _request_part(defaults, door)
    if ask.request is not None:
        nested = ask.request.model_dump(mode="json", exclude_unset=True)
        if isinstance(nested.get("artifact"), Mapping):
            nested["artifact"] = _confined(nested["artifact"], door, "request.artifact.path")
        data = _deep(data, nested)
    data = _deep(data, _request_part(given, door))
    data["id"] = ask.id or (ask.request.id if ask.request is not None else None) or new_run_id()
    if ask.question is not None:
        data["question"] = ask.question
    own = {key: True for key in ("question", "id") if getattr(ask, key) is not None}
    req = _checked_request(data, {**settings, **own}, door)

    if chain is not None:
        try:
            find_chain(chain, config)
        except RequestError as exc:
            raise door.refuse("chain", str(exc)) from None
    if template is not None:
        try:
            found = find_template(template, config)
        except RequestError as exc:
            raise door.refuse("template", str(exc)) from None
        try:
            req = apply_template(req, found)
        except RequestError as exc:
            at = "artifact" if found.spec.artifact_required and req.artifact is None else "template"
            raise door.refuse(at, str(exc)) from None
        # Applied here, once: the pipeline is handed no template name to apply again.
    if chain is None:
        try:
            refuse_unserved(req)
        except NotImplementedModeError as exc:
            raise door.refuse("mode", str(exc)) from None

    notes: list[str] = []
    _, capped = capped_voices(req.n)
    if capped is not None:
        notes.append(capped)

    endpoints = _endpoint_setup(settings, given.get("endpoints", ()), door, config, env)
    commands: dict[str, CommandRuntime] = {}
    for key, name in (("subagent_cmd", "subagent-cmd"), ("orchestrator_cmd", "orchestrator-cmd")):
        if key in settings:
            from ..runtimes.subagent import CommandRuntime

            try:
                commands[key] = CommandRuntime.from_command_line(settings[key], name=name)
            except CouncilError as exc:
                raise door.refuse(key, str(exc)) from None
    yes: bool | None = settings.get("yes")
    options = CouncilOptions(
        # The subagent stays a command line: seating builds it with the family council.toml
        # may name, by the one precedence rule it owns.
        subagent_command=settings.get("subagent_cmd"),
        subagent_family=settings.get("subagent_family"),
        orchestrator=commands.get("orchestrator_cmd"),
        endpoints=endpoints,
        allow_external=yes,
        rune_dir=where.root,
        refresh=bool(settings.get("refresh")),
        env=door.env,
        config=config,
    )
    undecided = yes is None and decide(None, env, config, where) is None
    return Prepared(req, options, chain, tuple(notes), undecided)


# --------------------------------------------------------------------------- flags


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


# How a key is written as a flag, on the command line and in a host's ``/rune council``
# line; the same words in both, so a host passes the user's options through unchanged.
FLAGS: dict[str, str] = {
    **{key: _flag(key) for key in KEYS if key not in ("question", "request", "multi_round")},
    **{f"multi_round.{key}": _flag(key) for key in MultiRound.model_fields},
    "deliberation": "--deliberate",
    "endpoints": "--endpoint",
    "multi_round.max_rounds": "--rounds",
}
_BY_FLAG = {flag: key for key, flag in FLAGS.items()}
_SWITCHES = frozenset({"yes", "refresh", "refresh_models"})
_REPEATED = frozenset({"prefer", "endpoints", "summon"})


def flag_spelling(key: str) -> str:
    """A key as the command line writes it (``multi_round.max_rounds`` is ``--rounds``)."""
    if key in FLAGS:
        return FLAGS[key]
    head, dot, rest = key.partition(".")
    return FLAGS.get(head, head) + dot + rest


def ask_from_arguments(text: str) -> Ask:
    """A host's ``$ARGUMENTS`` after ``council`` (``--template security-review --rounds 2
    "Is it safe?"``) as an ask. The line is split into words as a shell would quote them and
    read as data: nothing in it is expanded or run, so ``$(...)`` stays part of the question."""
    import shlex

    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise AskError([Problem("arguments", f"cannot be split into words: {exc}")]) from None
    keys: dict[str, Any] = {}
    question: list[str] = []
    words.reverse()
    while words:
        word = words.pop()
        if word == "--":
            question += reversed(words)
            break
        if not word.startswith("--") or word == "-":
            question.append(word)
            continue
        flag, eq, inline = word.partition("=")
        key = _BY_FLAG.get(flag)
        if key is None:
            close = difflib.get_close_matches(flag, list(_BY_FLAG), n=1, cutoff=0.0)
            hint = f" (closest valid option: {close[0]})" if close else ""
            raise AskError([Problem("arguments", f"unknown option {flag[:60]!r}{hint}")])
        if key in _SWITCHES and not eq:
            value: Any = True
        elif eq:
            value = inline
        elif words:
            value = words.pop()
        else:
            raise AskError([Problem(key, "needs a value")], flag_spelling)
        head, dot, sub = key.partition(".")
        if dot:
            keys.setdefault(head, {})[sub] = value
        elif key in _REPEATED:
            keys.setdefault(key, []).append(value)
        else:
            keys[key] = value
    if question:
        keys["question"] = " ".join(question)
    return parse_ask(keys, flag_spelling)


# --------------------------------------------------------------------------- schema


def _refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {node["$ref"].rsplit("/", 1)[-1]} if isinstance(node.get("$ref"), str) else set()
        for value in node.values():
            found |= _refs(value)
        return found
    if isinstance(node, list):
        return set().union(*(_refs(item) for item in node)) if node else set()
    return set()


def ask_schema(
    *, trusted_caller: bool = True, nested: bool = True, ref_template: str = DEFAULT_REF_TEMPLATE
) -> dict[str, Any]:
    """The JSON Schema of an ask as a door's caller may send it: without the operator's
    keys for a caller who is not the operator, and without the nested ``request`` form
    (``question`` then required) where a door offers only the flat one. ``ref_template``
    places the definitions (``#/components/schemas/{model}`` for an OpenAPI document); they
    are returned under ``$defs`` for the door to move there."""
    schema = Ask.model_json_schema(ref_template=ref_template)
    props: dict[str, Any] = schema["properties"]
    if not trusted_caller:
        for key in OPERATOR_ONLY:
            props.pop(key, None)
    if nested:
        schema["anyOf"] = [{"required": ["question"]}, {"required": ["request"]}]
    else:
        props.pop("request", None)
        schema["required"] = ["question"]
    defs: dict[str, Any] = schema.get("$defs", {})
    used = _refs(props)
    while True:
        more = set().union(*(_refs(defs[name]) for name in used if name in defs)) - used
        if not more:
            break
        used |= more
    schema["$defs"] = {name: value for name, value in defs.items() if name in used}
    if not schema["$defs"]:
        del schema["$defs"]
    return schema


__all__ = [
    "FLAGS",
    "KEYS",
    "OPERATOR_ONLY",
    "REQUEST_PATHS",
    "ArtifactRefused",
    "Ask",
    "AskDefaults",
    "AskError",
    "Door",
    "MultiRound",
    "Prepared",
    "Problem",
    "ask_from_arguments",
    "ask_schema",
    "confine_artifact",
    "flag_spelling",
    "parse_ask",
    "prepare",
    "problems_of",
    "unknown_key",
]
