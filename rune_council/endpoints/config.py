"""Endpoints by name: the ``[endpoints.NAME]`` tables of ``council.toml``, presets, flags.

[endpoints.nim]                    # a preset name needs nothing else
prefer = ["meta/llama-3.3-70b-instruct", "mistralai/*"]
exclude = ["*-base"]

[endpoints.lab]
base_url = "http://10.0.0.5:8000/v1"
key_env = "LAB_API_KEY"            # or keyring_service (+ keyring_user, default the name)
models = ["qwen/qwen2.5-72b-instruct", "meta/llama-3.1-70b-instruct"]
failover_on_failure = false

[subagent]
endpoint = "nim"                   # an endpoint model takes failed or empty slots
model = "meta/llama-3.3-70b-instruct"   # default: the endpoint's top-ranked model

Endpoints may live in the user's ``council.toml`` (``~/.config/rune-council/``, shared by every
project) and in the project's; a project table replaces a user table of the same name. A
name given on the command line (``--endpoint``) may also be a preset or a bare base URL.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..config import CONFIG_NAME, read_council_toml, read_toml_file, user_config_file
from ..errors import RuntimeConfigError
from ..paths import RuneDir

DEFAULT_MAX_ATTEMPTS = 3
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class EndpointSpec:
    """One OpenAI-compatible endpoint and how to choose among its models."""

    name: str
    base_url: str
    key_env: str | None = None
    keyring_service: str | None = None
    keyring_user: str | None = None
    prefer: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    discover: bool = True
    failover_on_failure: bool = True
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    stream: bool = True
    max_tokens: int | None = None
    # Named for this run on the command line: a problem with it is an error, not a note.
    required: bool = False

    @property
    def has_key_source(self) -> bool:
        return bool(self.key_env or self.keyring_service)


PRESETS: dict[str, EndpointSpec] = {
    "nim": EndpointSpec(
        name="nim",
        base_url="https://integrate.api.nvidia.com/v1",
        key_env="NVIDIA_API_KEY",
        keyring_service="rune-council",
    ),
    "ollama": EndpointSpec(name="ollama", base_url="http://127.0.0.1:11434/v1"),
}


@dataclass(frozen=True)
class ModelRef:
    """An endpoint model chosen for a role (subagent, orchestrator); None means top-ranked."""

    endpoint: EndpointSpec
    model: str | None = None


@dataclass(frozen=True)
class EndpointSetup:
    """What a run draws from HTTP endpoints: voices, an optional subagent, cache policy."""

    endpoints: tuple[EndpointSpec, ...] = ()
    subagent: ModelRef | None = None
    refresh: bool = False


def normalise_base_url(raw: str, where: str) -> str:
    """An http(s) base URL without credentials, query or trailing slash; bare hosts get /v1."""
    text = raw.strip()
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RuntimeConfigError(f"{where}: {raw!r} is not an http:// or https:// base URL")
    if parts.username is not None or parts.password is not None:
        # The URL is recorded in the run file and the discovery cache; a key must not be.
        raise RuntimeConfigError(
            f"{where}: the base URL carries credentials; give the key through key_env or "
            "the OS secret store instead"
        )
    if parts.query or parts.fragment:
        raise RuntimeConfigError(f"{where}: the base URL must not have a query or fragment")
    path = parts.path.rstrip("/") or "/v1"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid")

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


def _first_problem(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    return f"{where}: {first['msg']}" if where else str(first["msg"])


def _check_env_name(value: str | None, where: str) -> None:
    if value is not None and not _ENV_NAME.match(value):
        raise RuntimeConfigError(f"{where}: {value!r} is not an environment variable name")


def spec_from_table(name: str, table: Mapping[str, Any], where: str) -> EndpointSpec:
    if not _NAME.match(name):
        raise RuntimeConfigError(
            f"{where}: endpoint name {name!r} must be 1-64 letters, digits, '_' or '-'"
        )
    try:
        parsed = _Table.model_validate(dict(table))
    except ValidationError as exc:
        raise RuntimeConfigError(f"{where}: {_first_problem(exc)}") from None
    preset_name = parsed.preset or (name if parsed.base_url is None else None)
    if preset_name is not None and preset_name not in PRESETS:
        if parsed.preset is None:
            raise RuntimeConfigError(
                f"{where}: needs base_url (or a preset: {', '.join(sorted(PRESETS))})"
            )
        raise RuntimeConfigError(
            f"{where}: unknown preset {preset_name!r} (known: {', '.join(sorted(PRESETS))})"
        )
    base = PRESETS[preset_name] if preset_name is not None else None
    _check_env_name(parsed.key_env, f"{where}.key_env")
    base_url = parsed.base_url or (base.base_url if base else "")
    given = parsed.model_fields_set

    def pick(key: str, value: Any) -> Any:
        if key in given or base is None:
            return value
        return getattr(base, key)

    return EndpointSpec(
        name=name,
        base_url=normalise_base_url(base_url, f"{where}.base_url"),
        key_env=pick("key_env", parsed.key_env),
        keyring_service=pick("keyring_service", parsed.keyring_service),
        keyring_user=parsed.keyring_user,
        prefer=tuple(parsed.prefer),
        exclude=tuple(parsed.exclude),
        models=tuple(parsed.models),
        discover=parsed.discover,
        failover_on_failure=parsed.failover_on_failure,
        max_attempts=parsed.max_attempts,
        stream=parsed.stream,
        max_tokens=parsed.max_tokens,
    )


Sources = list[tuple[str, dict[str, Any]]]


def config_sources(rune_dir: RuneDir, env: Mapping[str, str] | None = None) -> Sources:
    """The user's ``council.toml`` (shared by every project), then the project's."""
    user = user_config_file(env)
    return [
        (str(user), read_toml_file(user)),
        (str(rune_dir.root / CONFIG_NAME), read_council_toml(rune_dir)),
    ]


def configured_endpoints(
    rune_dir: RuneDir, env: Mapping[str, str] | None = None
) -> dict[str, EndpointSpec]:
    """Every ``[endpoints.NAME]``; the project's table replaces a user's of the same name."""
    specs: dict[str, EndpointSpec] = {}
    for path, data in config_sources(rune_dir, env):
        tables = data.get("endpoints", {})
        if not isinstance(tables, dict):
            raise RuntimeConfigError(f"{path}: [endpoints] must be a table of named endpoints")
        for name, table in tables.items():
            if not isinstance(table, dict):
                raise RuntimeConfigError(f"{path}: endpoints.{name} must be a table")
            specs[name] = spec_from_table(name, table, f"{path}: endpoints.{name}")
    return specs


def _derived_name(base_url: str) -> str:
    for preset in PRESETS.values():
        if preset.base_url == base_url:
            return preset.name
    parts = urlsplit(base_url)
    host = re.sub(r"[^A-Za-z0-9_.-]+", "-", parts.hostname or "endpoint").strip("-.")
    name = f"{host}-{parts.port}" if parts.port else host
    return name[:64] or "endpoint"


def spec_from_argument(
    value: str,
    *,
    key_env: str | None,
    configured: Mapping[str, EndpointSpec],
) -> EndpointSpec:
    """``--endpoint`` names a configured endpoint, a preset, or is a base URL."""
    _check_env_name(key_env, "--key-env")
    if value in configured:
        spec = configured[value]
    elif value in PRESETS:
        spec = PRESETS[value]
    elif "://" in value:
        base_url = normalise_base_url(value, "--endpoint")
        preset = next((p for p in PRESETS.values() if p.base_url == base_url), None)
        spec = preset or EndpointSpec(name=_derived_name(base_url), base_url=base_url)
    else:
        known = ", ".join(sorted({*PRESETS, *configured}))
        raise RuntimeConfigError(
            f"--endpoint {value!r} is neither an http(s) base URL nor a known endpoint ({known})"
        )
    if key_env is not None:
        spec = replace(spec, key_env=key_env, keyring_service=None)
    return replace(spec, required=True)


def model_ref_from_section(
    rune_dir: RuneDir,
    section: str,
    configured: Mapping[str, EndpointSpec] | None = None,
    env: Mapping[str, str] | None = None,
) -> ModelRef | None:
    """``[section] endpoint = NAME_OR_URL, model = ID``: an endpoint model for a role.

    Used for the subagent provider here, and by later stages for an orchestrator / chairman.
    The project's file wins over the user's.
    """
    found: ModelRef | None = None
    specs = configured_endpoints(rune_dir, env) if configured is None else configured
    for path, data in config_sources(rune_dir, env):
        table = data.get(section)
        if table is None:
            continue
        if not isinstance(table, dict):
            raise RuntimeConfigError(f"{path}: [{section}] must be a table")
        endpoint, model = table.get("endpoint"), table.get("model")
        if endpoint is None:
            continue
        for key, value in (("endpoint", endpoint), ("model", model)):
            if value is not None and not isinstance(value, str):
                raise RuntimeConfigError(f"{path}: {section}.{key} must be a string")
        spec = spec_from_argument(endpoint, key_env=None, configured=specs)
        # Configured in a file, not named for this run: its problems become notes.
        found = ModelRef(replace(spec, required=False), model)
    return found


def load_setup(rune_dir: RuneDir, env: Mapping[str, str] | None = None) -> EndpointSetup:
    """Every endpoint the config files name, and the ``[subagent] endpoint`` if any."""
    specs = configured_endpoints(rune_dir, env)
    return EndpointSetup(
        endpoints=tuple(specs.values()),
        subagent=model_ref_from_section(rune_dir, "subagent", specs, env),
    )


def setup_from_options(
    rune_dir: RuneDir,
    *,
    endpoints: Sequence[str] = (),
    key_env: str | None = None,
    refresh: bool = False,
    subagent_endpoint: str | None = None,
    subagent_model: str | None = None,
    with_subagent: bool = True,
    env: Mapping[str, str] | None = None,
) -> EndpointSetup:
    """The command line's choice: ``--endpoint`` replaces the configured set for this run.

    ``with_subagent=False`` when a subagent command already takes the failed slots.
    """
    specs = configured_endpoints(rune_dir, env)
    if endpoints:
        chosen = tuple(spec_from_argument(e, key_env=key_env, configured=specs) for e in endpoints)
    else:
        chosen = tuple(specs.values())
    if subagent_endpoint is not None:
        spec = spec_from_argument(subagent_endpoint, key_env=key_env, configured=specs)
        subagent: ModelRef | None = ModelRef(spec, subagent_model)
    else:
        subagent = model_ref_from_section(rune_dir, "subagent", specs, env)
        if subagent is not None and subagent_model is not None:
            subagent = ModelRef(subagent.endpoint, subagent_model)
    if subagent_model is not None and subagent is None:
        raise RuntimeConfigError(
            "--subagent-model needs --subagent-endpoint (or [subagent] endpoint)"
        )
    return EndpointSetup(
        endpoints=chosen, subagent=subagent if with_subagent else None, refresh=refresh
    )
