"""Settings kept in ``council.toml`` instead of repeated flags: one model, read once per run.

Two files may hold them. The user's own (``$RUNE_COUNCIL_CONFIG_DIR``, else
``$XDG_CONFIG_HOME/rune-council``, else ``~/.config/rune-council``) and the project's
``<rune dir>/council.toml``. ``load_config`` reads each once, validates it against
``CouncilFile`` (an unknown section or key is an error that names the closest valid
name), leaves out what an untrusted project file may not decide, and merges the rest with
the project's value winning where both files speak::

    [subagent]
    command = "my-host-agent --answer"   # prompt on stdin, answer on stdout
    family = "anthropic"                  # what the host's model is; default unknown
    endpoint = "nim"                      # or: an endpoint model takes failed slots
    model = "meta/llama-3.3-70b-instruct"

    [consent]
    allow_external = true                 # external CLIs and endpoints may get the question

    [env]
    allow = ["HTTPS_PROXY"]               # passed through to every external CLI

    [runtimes.NAME]   ...                 # see rune_council.runtimes.user_defined
    [endpoints.NAME]  ...                 # see rune_council.endpoints.config
    [templates.NAME]  ...                 # a named council setup (TemplateSpec below)
    [chains.NAME]                         # councils run in order, each told the last's
    steps = ["red-team", "architecture-review"]   # verdicts (ChainSpec below)

A project file comes with a repository, and a repository is not the user. Until the user
trusts its exact content (``rune council trust``, see ``rune_council.trust_store``), every
section of it that runs a program, seats a voice (any endpoint), sends a key, passes the
user's variables on or grants consent is left out whole, and one note says which.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
)

from . import templates
from .core.contract import MAX_VOICES, SETUP_NAME_PATTERN
from .core.errors import RuntimeConfigError
from .core.made import empty, made
from .core.paths import RuneDir
from .safefile import read_if_present
from .trust_store import TrustRecord, TrustStore, digest

CONFIG_NAME = "council.toml"
# The per-user settings directory: $RUNE_COUNCIL_CONFIG_DIR, else the XDG config home.
ENV_CONFIG_DIR = "RUNE_COUNCIL_CONFIG_DIR"
# Far above any real council.toml; a bigger file is refused before it is parsed.
MAX_CONFIG_BYTES = 1_000_000
DEFAULT_MAX_ATTEMPTS = 3

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ENV_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\*?$")
NO_ARGUMENT = (
    "the prompt never goes on the command line (ps shows it to every local user); "
    'use prompt = "stdin" or "file" with {prompt_file}'
)


class _Section(BaseModel):
    # strict: TOML already has types, so "yes" is not a boolean and 1 is not a string.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, defer_build=True)


class SubagentSection(_Section):
    command: str | None = None
    family: str | None = None
    endpoint: str | None = None
    model: str | None = None


class ConsentSection(_Section):
    allow_external: bool | None = None


class EnvSection(_Section):
    allow: tuple[str, ...] = ()

    @field_validator("allow", mode="before")
    @classmethod
    def _names(cls, value: object) -> object:
        if not isinstance(value, list | tuple) or not all(
            isinstance(n, str) and _ENV_NAME.match(n) for n in value
        ):
            raise ValueError("must be a list of variable names")
        return tuple(value)


class RuntimeSpec(_Section):
    """One ``[runtimes.NAME]`` table: an AI CLI the project has no adapter for, or, with
    only ``max_concurrent``, the bound on calls in flight for a runtime of that name (a
    built-in CLI, a user-defined one, or an endpoint by its name)."""

    command: str | list[str] | None = None
    max_concurrent: int | None = Field(default=None, ge=1, le=1024)
    prompt: Literal["stdin", "file"] = "stdin"
    output: Literal["text", "json", "regex"] = "text"
    answer_path: str | None = None
    answer_regex: str | None = None
    error_regex: str | None = None
    error_path: str | None = None
    family: str = Field(default="unknown", min_length=1, max_length=40)
    confidence: Literal["confirmed", "unknown"] = "unknown"
    version_args: list[str] = Field(default_factory=lambda: ["--version"])
    env: list[str] = Field(default_factory=list)

    @field_validator("prompt", mode="before")
    @classmethod
    def _no_argument(cls, value: object) -> object:
        if isinstance(value, str) and value.lower() in ("arg", "argument", "argv", "args"):
            raise ValueError(NO_ARGUMENT)
        return value

    @field_validator("answer_regex", "error_regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a valid regular expression: {exc}") from exc
        return value

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: list[str]) -> list[str]:
        bad = [v for v in value if not _ENV_PATTERN.match(v)]
        if bad:
            raise ValueError(f"not variable names (NAME or PREFIX*): {bad}")
        return value

    @property
    def defines_runtime(self) -> bool:
        """False for a table that only bounds a runtime defined elsewhere."""
        return self.command is not None

    def argv(self) -> list[str]:
        if isinstance(self.command, list):
            return list(self.command)
        return shlex.split(self.command or "")


class EndpointTable(_Section):
    """One ``[endpoints.NAME]`` table as written; ``endpoints.config`` resolves presets."""

    preset: str | None = None
    base_url: str | None = None
    key_env: str | None = None
    keyring_service: str | None = None
    keyring_user: str | None = None
    prefer: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)
    models: list[str] = Field(default_factory=list)
    discover: bool = True
    failover_on_failure: bool = True
    max_attempts: int = Field(default=DEFAULT_MAX_ATTEMPTS, ge=1, le=10)
    stream: bool = True
    max_tokens: int | None = Field(default=None, ge=1)


SetupName = Annotated[str, StringConstraints(pattern=SETUP_NAME_PATTERN)]
_METHOD = r"^[a-z][a-z0-9_]{0,39}$"


class SlotSpec(_Section):
    """One ``[[templates.NAME.slots]]`` entry: the persona and framing of one slot."""

    persona: str | None = Field(default=None, min_length=1, max_length=1000)
    framing: str | None = Field(default=None, min_length=1, max_length=2000)


class SummonSpec(_Section):
    """One ``[[templates.NAME.summon]]`` entry: a member added in a later round."""

    who: str = Field(default="any", pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,99}$")
    round: int = Field(default=2, ge=2, le=10)
    on: Literal["round", "divergence"] = "round"
    persona: str | None = Field(default=None, min_length=1, max_length=1000)
    framing: str | None = Field(default=None, min_length=1, max_length=2000)


class TemplateSpec(_Section):
    """One ``[templates.NAME]`` table, or one shipped file under ``rune_council/templates/``:
    a named council setup. Whatever a template leaves out, the council's default holds;
    whatever the caller sets explicitly wins over the template."""

    description: str = Field(min_length=1, max_length=200)
    version: str = Field(default="1", min_length=1, max_length=40)
    mode: Literal["critique", "review", "judge"] | None = None
    n: int | None = Field(default=None, ge=2, le=MAX_VOICES)
    preamble: str | None = Field(default=None, min_length=1, max_length=8000)
    artifact_kind: str | None = Field(default=None, min_length=1, max_length=200)
    artifact_required: bool = False
    require_anchor: bool | None = None
    slots: list[SlotSpec] = Field(default_factory=list, max_length=MAX_VOICES)
    method: Annotated[str, StringConstraints(pattern=_METHOD)] | None = None
    council_type: Literal["standard", "red_team"] | None = None
    rounds: int | None = Field(default=None, ge=1, le=10)
    on_divergence: Literal["warn", "halt", "continue"] | None = None
    convergence_threshold: float | None = Field(default=None, ge=0, le=1)
    vote_threshold: float | None = Field(default=None, gt=0, le=1)
    summon: list[SummonSpec] = Field(default_factory=list, max_length=3)

    @field_validator("description")
    @classmethod
    def _one_line(cls, value: str) -> str:
        if "\n" in value.strip():
            raise ValueError("must be one line (it is what `rune council templates` lists)")
        return value.strip()


class ChainSpec(_Section):
    """One ``[chains.NAME]`` table: templates run in order, each council told the verdicts
    of the ones before it."""

    description: str | None = Field(default=None, min_length=1, max_length=200)
    steps: list[SetupName] = Field(min_length=2, max_length=5)


class CouncilSection(_Section):
    """``[council]``: defaults for every council of this user or project."""

    # Seconds after which the council stops waiting for stragglers once two confirmed
    # families have answered (a request's own budget.deadline_s wins).
    deadline: float | None = Field(default=None, gt=0, le=3600, strict=False)


class CouncilFile(_Section):
    """One ``council.toml`` as written; every section optional."""

    # Empty sections made as they are: a run with no council.toml validates no section.
    council: CouncilSection = Field(default_factory=empty(CouncilSection))
    subagent: SubagentSection = Field(default_factory=empty(SubagentSection))
    consent: ConsentSection = Field(default_factory=empty(ConsentSection))
    env: EnvSection = Field(default_factory=empty(EnvSection))
    runtimes: dict[str, RuntimeSpec] = Field(default_factory=dict)
    endpoints: dict[str, EndpointTable] = Field(default_factory=dict)
    templates: dict[SetupName, TemplateSpec] = Field(default_factory=dict)
    chains: dict[SetupName, ChainSpec] = Field(default_factory=dict)


Scope = Literal["user", "project"]


class ConfigSource(_Section):
    """Where settings came from: one file, whether it is trusted, and what was left out."""

    path: str
    scope: Scope
    sha256: str
    trusted: bool
    trust_state: Literal["own", "trusted", "changed", "unknown"]
    skipped: tuple[str, ...] = ()
    # The whole file as written, skipped parts too. A factory, so importing this module
    # builds no file model: a run with no council.toml never needs one.
    settings: CouncilFile = Field(default_factory=lambda: CouncilFile())


class CouncilConfig(CouncilFile):
    """The settings in force: the user's file, then what the project's may decide.

    ``origin`` maps each part (``consent``, ``subagent.command``, ``runtimes.NAME``,
    ``endpoints.NAME``, ...) to the file it came from; ``notes`` say what was left out.
    """

    sources: tuple[ConfigSource, ...] = ()
    origin: dict[str, str] = Field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def subagent_command(self) -> str | None:
        """``[subagent] command`` (the name callers used before the sections were models)."""
        return self.subagent.command

    @property
    def subagent_family(self) -> str | None:
        return self.subagent.family

    def source_of(self, part: str) -> ConfigSource | None:
        path = self.origin.get(part)
        return next((s for s in self.sources if s.path == path), None)


# --------------------------------------------------------------------------- files


def user_config_dir(env: Mapping[str, str] | None = None) -> Path:
    """The user's own settings directory (shared by every project); the trust store lives
    here too, outside any repository."""
    env = os.environ if env is None else env
    if env.get(ENV_CONFIG_DIR):
        return Path(env[ENV_CONFIG_DIR]).expanduser()
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or "~").expanduser() / ".config")
    return Path(base) / "rune-council"


def user_config_file(env: Mapping[str, str] | None = None) -> Path:
    """``council.toml`` in the user's config directory (shared by every project)."""
    return user_config_dir(env) / CONFIG_NAME


def trust_store(env: Mapping[str, str] | None = None) -> TrustStore:
    return TrustStore(user_config_dir(env))


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def read_bounded(path: Path) -> bytes | None:
    """The file's bytes, None when it does not exist; anything but a regular file of sane
    size is an error (a FIFO would hang the read, /dev/zero would never end)."""
    found = read_if_present(path, MAX_CONFIG_BYTES, RuntimeConfigError)
    if found is None:
        return None
    data, cut = found
    if cut:
        raise RuntimeConfigError(f"{path}: larger than {MAX_CONFIG_BYTES} bytes")
    return data


def parse_toml(path: Path, data: bytes) -> dict[str, Any]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RuntimeConfigError(f"{path}: not UTF-8 text ({exc.reason})") from None
    from .core.safetoml import UnreadableTOML, loads_toml  # only a council with a config

    try:
        return loads_toml(text, max_bytes=MAX_CONFIG_BYTES, what=str(path))
    except UnreadableTOML as exc:
        raise RuntimeConfigError(_one_line(str(exc))) from None


_TABLES_OF_TABLES: dict[str, type[BaseModel]] = {
    "runtimes": RuntimeSpec,
    "endpoints": EndpointTable,
    "templates": TemplateSpec,
    "chains": ChainSpec,
}
# Lists of tables inside a table of tables, by key: where an unknown key's nearest name is.
_NESTED: dict[str, type[BaseModel]] = {"slots": SlotSpec, "summon": SummonSpec}
_SECTIONS: dict[str, type[BaseModel]] = {
    "council": CouncilSection,
    "subagent": SubagentSection,
    "consent": ConsentSection,
    "env": EnvSection,
}
_TABLE_ERRORS = {"dict_type", "model_type", "model_attributes_type"}


def _closest(word: str, choices: list[str]) -> str:
    found = difflib.get_close_matches(word, choices, n=1, cutoff=0.0)
    return found[0] if found else choices[0]


def _problem(error: Any) -> str:
    """One validation error as ``[section] key: what is wrong``."""
    loc = [str(p) for p in error["loc"]]
    if not loc:
        return _one_line(error["msg"])
    cut = 2 if loc[0] in _TABLES_OF_TABLES and len(loc) >= 2 else 1
    section, key = ".".join(loc[:cut]), ".".join(loc[cut:])
    if error["type"] == "extra_forbidden":
        if not key:
            valid = list(CouncilFile.model_fields)
            return (
                f"[{section}]: unknown section (closest valid name: [{_closest(section, valid)}])"
            )
        model: type[BaseModel] = (
            _TABLES_OF_TABLES.get(loc[0]) or _SECTIONS.get(loc[0]) or CouncilFile
        )
        inner = loc[cut:]
        if len(inner) >= 3 and inner[0] in _NESTED:  # e.g. slots.0.persna
            model = _NESTED[inner[0]]
        nearest = _closest(inner[-1], list(model.model_fields))
        return (
            f"[{section}] {key}: Extra inputs are not permitted "
            f"(unknown key; closest valid name: {nearest!r})"
        )
    if error["type"] in _TABLE_ERRORS and not key:
        return f"[{section}] must be a table"
    return (
        f"[{section}] {key}: {_one_line(error['msg'])}" if key else f"[{section}]: {error['msg']}"
    )


def parse_config_file(path: Path, data: bytes) -> CouncilFile:
    """One file's bytes as a ``CouncilFile``; any problem is one line naming the file."""
    doc = parse_toml(path, data)
    try:
        return CouncilFile.model_validate(doc)
    except ValidationError as exc:
        errors = exc.errors()
        problems = "; ".join(_problem(e) for e in errors[:5])
        more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
        raise RuntimeConfigError(f"{path}: {problems}{more}") from None


# --------------------------------------------------------------------------- trust


def privileged_parts(settings: CouncilFile) -> list[str]:
    """The sections that run a program, seat a voice, send a key, pass the user's variables
    on, or grant consent: what a project file may set only once the user trusts it.

    Every endpoint is one, a keyless one too: the model behind it is sent the question and
    the artifact and its answer counts in the verdict, so a repository that could name one
    could read what is asked and outvote the user's own voices."""
    parts = [f"[runtimes.{name}]" for name in settings.runtimes]
    parts += [f"[endpoints.{name}]" for name in settings.endpoints]
    if settings.subagent.command is not None or settings.subagent.endpoint is not None:
        parts.append("[subagent]")
    if settings.consent.allow_external:
        parts.append("[consent]")
    if settings.env.allow:
        parts.append("[env]")
    return parts


def _without_privileged(settings: CouncilFile) -> CouncilFile:
    sub = settings.subagent
    return settings.model_copy(
        update={
            "runtimes": {},
            "endpoints": {},
            "subagent": sub if sub.command is None and sub.endpoint is None else SubagentSection(),
            "consent": ConsentSection() if settings.consent.allow_external else settings.consent,
            "env": EnvSection(),
        }
    )


def untrusted_note(source: ConfigSource) -> str:
    why = " (it changed since it was trusted)" if source.trust_state == "changed" else ""
    return (
        f"{source.path} is not trusted{why}: left out {', '.join(source.skipped)} "
        "(a repository's config may not run programs, seat endpoints as voices, send keys "
        "or grant consent); "
        f"review the file, then run: rune council trust {source.path}"
    )


# --------------------------------------------------------------------------- merge


def _merge(sources: list[tuple[ConfigSource, CouncilFile]]) -> CouncilConfig:
    subagent: dict[str, str | None] = {}
    deadline: float | None = None
    consent: bool | None = None
    allow: list[str] = []
    runtimes: dict[str, RuntimeSpec] = {}
    endpoints: dict[str, EndpointTable] = {}
    named_templates: dict[str, BaseModel] = {}
    named_chains: dict[str, BaseModel] = {}
    origin: dict[str, str] = {}
    notes: list[str] = []
    kept_out: list[str] = []
    for source, applied in sources:
        where = source.path
        sub = applied.subagent
        for key in ("command", "family"):
            if getattr(sub, key) is not None:
                subagent[key] = getattr(sub, key)
                origin[f"subagent.{key}"] = where
        if sub.endpoint is not None:
            # Endpoint and model are one choice: a model belongs to the file's endpoint.
            subagent["endpoint"], subagent["model"] = sub.endpoint, sub.model
            origin["subagent.endpoint"] = where
        if applied.council.deadline is not None:
            deadline = applied.council.deadline
            origin["council.deadline"] = where
        if applied.consent.allow_external is not None:
            consent = applied.consent.allow_external
            origin["consent"] = where
        if applied.env.allow:
            allow += applied.env.allow
            origin["env.allow"] = where
        for name, spec in applied.runtimes.items():
            runtimes[name] = spec
            origin[f"runtimes.{name}"] = where
        for name, table in applied.endpoints.items():
            endpoints[name] = table
            origin[f"endpoints.{name}"] = where
        for kind, found, shipped in (
            ("templates", named_templates, set(builtin_templates())),
            ("chains", named_chains, set(builtin_chains())),
        ):
            defined: Mapping[str, BaseModel] = getattr(applied, kind)
            for name, setup in defined.items():
                if not source.trusted and (name in found or name in shipped):
                    kept_out.append(f"[{kind}.{name}]")
                    continue
                found[name] = setup
                origin[f"{kind}.{name}"] = where
        if kept_out:
            notes.append(
                f"{where} is not trusted: left out {', '.join(kept_out)}, which would "
                "replace a shipped or your own definition of the same name; review the "
                f"file, then run: rune council trust {where}"
            )
            kept_out = []
    notes[:0] = [untrusted_note(s) for s, _ in sources if s.skipped]
    # Every part was validated as it was read (or is a section's own default), and each
    # container here is this merge's own.
    return made(
        CouncilConfig,
        council=made(CouncilSection, deadline=deadline),
        subagent=made(SubagentSection, **subagent),
        consent=made(ConsentSection, allow_external=consent),
        env=made(EnvSection, allow=tuple(dict.fromkeys(allow))),
        runtimes=runtimes,
        endpoints=endpoints,
        templates={k: v for k, v in named_templates.items() if isinstance(v, TemplateSpec)},
        chains={k: v for k, v in named_chains.items() if isinstance(v, ChainSpec)},
        sources=tuple(s for s, _ in sources),
        origin=origin,
        notes=tuple(notes),
    )


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:
        return False


def load_config(
    rune_dir: RuneDir | str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> CouncilConfig:
    """The user's and the project's ``council.toml``, read once, validated, trust applied,
    merged. A problem in either file raises one ``RuntimeConfigError`` line naming it."""
    env = os.environ if env is None else env
    where = rune_dir if isinstance(rune_dir, RuneDir) else RuneDir.resolve(rune_dir)
    user_path, project_path = user_config_file(env), where.root / CONFIG_NAME
    store = trust_store(env)
    sources: list[tuple[ConfigSource, CouncilFile]] = []
    for scope, path in (("user", user_path), ("project", project_path)):
        if scope == "project" and _same_file(path, user_path):
            continue  # the user's own file, already read as theirs
        data = read_bounded(path)
        if data is None:
            continue
        settings = parse_config_file(path, data)
        sha = digest(data)
        if scope == "user":
            state: Literal["own", "trusted", "changed", "unknown"] = "own"
        else:
            state = store.state(path, sha)
        trusted = state in ("own", "trusted")
        skipped = () if trusted else tuple(privileged_parts(settings))
        source = ConfigSource(
            path=str(path),
            scope="user" if scope == "user" else "project",
            sha256=sha,
            trusted=trusted,
            trust_state=state,
            skipped=skipped,
            settings=settings,
        )
        sources.append((source, settings if trusted else _without_privileged(settings)))
    return _merge(sources)


# --------------------------------------------------------------------------- shipped setups


@cache
def builtin_templates() -> dict[str, TemplateSpec]:
    """The templates shipped under ``rune_council/templates/``, validated as a user's are."""
    found: dict[str, TemplateSpec] = {}
    for name in templates.template_names():
        where = Path(f"rune_council/templates/{name}.toml")
        doc = parse_toml(where, templates.read_template(name))
        try:
            found[name] = TemplateSpec.model_validate(doc)
        except ValidationError as exc:
            problems = "; ".join(
                _problem({**e, "loc": ("templates", name, *e["loc"])}) for e in exc.errors()[:5]
            )
            raise RuntimeConfigError(f"{where}: {problems}") from None
    return found


@cache
def builtin_chains() -> dict[str, ChainSpec]:
    """The chains shipped in ``rune_council/templates/chains.toml``."""
    where = Path("rune_council/templates/chains.toml")
    doc = parse_toml(where, templates.read_chains())
    try:
        return {name: ChainSpec.model_validate(table) for name, table in doc.items()}
    except ValidationError as exc:
        raise RuntimeConfigError(f"{where}: {_one_line(str(exc))}") from None


# --------------------------------------------------------------------------- trusting


def trust_file(path: Path, env: Mapping[str, str] | None = None) -> tuple[TrustRecord, CouncilFile]:
    """Record the user's trust in ``path`` as it is now (it must be a valid council.toml);
    the record and the settings it now lets apply."""
    data = read_bounded(path)
    if data is None:
        raise RuntimeConfigError(f"{path}: no such file")
    settings = parse_config_file(path, data)
    return trust_store(env).trust(path, digest(data)), settings


def revoke_file(path: Path, env: Mapping[str, str] | None = None) -> bool:
    """Forget the trust in ``path``; False when it was not trusted."""
    return trust_store(env).revoke(path)
