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
project file the user has not trusted (``rune council trust``) adds no endpoint at all, a
keyless one included: a seat is sent the question and the artifact and votes in the
verdict, so only the user's own config and flags choose who sits. A name given on the
command line (``--endpoint``) may also be a preset or a bare base URL.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..config import DEFAULT_MAX_ATTEMPTS, CouncilConfig, EndpointTable, load_config
from ..core.errors import RuntimeConfigError
from ..core.paths import RuneDir
from ..core.records import record

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@record(frozen=True)
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


@record(frozen=True)
class ModelRef:
    """An endpoint model chosen for a role (subagent, orchestrator); None means top-ranked."""

    endpoint: EndpointSpec
    model: str | None = None


@record(frozen=True)
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


def _check_env_name(value: str | None, where: str) -> None:
    if value is not None and not _ENV_NAME.match(value):
        raise RuntimeConfigError(f"{where}: {value!r} is not an environment variable name")


def spec_from_table(name: str, table: EndpointTable, where: str) -> EndpointSpec:
    if not _NAME.match(name):
        raise RuntimeConfigError(
            f"{where}: endpoint name {name!r} must be 1-64 letters, digits, '_' or '-'"
        )
    preset_name = table.preset or (name if table.base_url is None else None)
    if preset_name is not None and preset_name not in PRESETS:
        if table.preset is None:
            raise RuntimeConfigError(
                f"{where}: needs base_url (or a preset: {', '.join(sorted(PRESETS))})"
            )
        raise RuntimeConfigError(
            f"{where}: unknown preset {preset_name!r} (known: {', '.join(sorted(PRESETS))})"
        )
    base = PRESETS[preset_name] if preset_name is not None else None
    _check_env_name(table.key_env, f"{where}.key_env")
    base_url = table.base_url or (base.base_url if base else "")
    given = table.model_fields_set

    def pick(key: str, value: Any) -> Any:
        if key in given or base is None:
            return value
        return getattr(base, key)

    return EndpointSpec(
        name=name,
        base_url=normalise_base_url(base_url, f"{where}.base_url"),
        key_env=pick("key_env", table.key_env),
        keyring_service=pick("keyring_service", table.keyring_service),
        keyring_user=table.keyring_user,
        prefer=tuple(table.prefer),
        exclude=tuple(table.exclude),
        models=tuple(table.models),
        discover=table.discover,
        failover_on_failure=table.failover_on_failure,
        max_attempts=table.max_attempts,
        stream=table.stream,
        max_tokens=table.max_tokens,
    )


def endpoints_from_config(config: CouncilConfig) -> dict[str, EndpointSpec]:
    """Every ``[endpoints.NAME]`` in force; the project's table replaces a user's of the
    same name. Tables an untrusted project file had left out are checked all the same, so
    a broken one is reported before it is trusted, not after."""
    built: dict[tuple[str, str], EndpointSpec] = {}
    for source in config.sources:
        for name, table in source.settings.endpoints.items():
            built[(source.path, name)] = spec_from_table(
                name, table, f"{source.path}: endpoints.{name}"
            )
    return {name: built[(config.origin[f"endpoints.{name}"], name)] for name in config.endpoints}


def untrusted_endpoints(config: CouncilConfig) -> dict[str, str]:
    """Endpoint names only an untrusted project file defines, each with that file."""
    left_out: dict[str, str] = {}
    for source in config.sources:
        if not source.trusted:
            for name in source.settings.endpoints:
                if name not in config.endpoints:
                    left_out.setdefault(name, source.path)
    return left_out


def left_out_by_trust(name: str, path: str) -> str:
    """Why an endpoint an untrusted file defines is not used, and the two ways on."""
    return (
        f"endpoint {name} is defined only by {path}, which is not trusted, so it seats no "
        f"voice and is sent nothing; pass its URL with --endpoint, or review the file and "
        f"run: rune council trust {path}"
    )


def configured_endpoints(
    rune_dir: RuneDir,
    env: Mapping[str, str] | None = None,
    *,
    config: CouncilConfig | None = None,
) -> dict[str, EndpointSpec]:
    """Every ``[endpoints.NAME]`` in force (see ``endpoints_from_config``)."""
    return endpoints_from_config(load_config(rune_dir, env) if config is None else config)


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
    untrusted: Mapping[str, str] | None = None,
) -> EndpointSpec:
    """``--endpoint`` names a configured endpoint, a preset, or is a base URL. ``untrusted``
    (``untrusted_endpoints``) names the endpoints an untrusted file defines: naming one is
    an error that says so, never a way to seat it (the repository chose the host)."""
    _check_env_name(key_env, "--key-env")
    if value in configured:
        spec = configured[value]
    elif value in PRESETS:
        spec = PRESETS[value]  # the user's own choice; an untrusted table of that name is not
    elif untrusted and value in untrusted:
        raise RuntimeConfigError(left_out_by_trust(value, untrusted[value]))
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


def subagent_from_config(
    config: CouncilConfig, configured: Mapping[str, EndpointSpec]
) -> ModelRef | None:
    """``[subagent] endpoint = NAME_OR_URL, model = ID``: an endpoint model takes the slots
    no external runtime can serve."""
    endpoint, model = config.subagent.endpoint, config.subagent.model
    if endpoint is None:
        return None
    spec = spec_from_argument(
        endpoint, key_env=None, configured=configured, untrusted=untrusted_endpoints(config)
    )
    # Configured in a file, not named for this run: its problems become notes.
    return ModelRef(replace(spec, required=False), model)


def model_ref_from_section(
    rune_dir: RuneDir,
    section: str = "subagent",
    configured: Mapping[str, EndpointSpec] | None = None,
    env: Mapping[str, str] | None = None,
    *,
    config: CouncilConfig | None = None,
) -> ModelRef | None:
    """The endpoint model ``[subagent]`` names (the only section that names one today)."""
    if section != "subagent":
        raise RuntimeConfigError(f"[{section}] does not name an endpoint model")
    config = load_config(rune_dir, env) if config is None else config
    specs = endpoints_from_config(config) if configured is None else configured
    return subagent_from_config(config, specs)


def load_setup(
    rune_dir: RuneDir,
    env: Mapping[str, str] | None = None,
    *,
    config: CouncilConfig | None = None,
) -> EndpointSetup:
    """Every endpoint the config files name, and the ``[subagent] endpoint`` if any."""
    config = load_config(rune_dir, env) if config is None else config
    specs = endpoints_from_config(config)
    return EndpointSetup(
        endpoints=tuple(specs.values()), subagent=subagent_from_config(config, specs)
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
    config: CouncilConfig | None = None,
) -> EndpointSetup:
    """The command line's choice: ``--endpoint`` replaces the configured set for this run.

    ``with_subagent=False`` when a subagent command already takes the failed slots.
    """
    config = load_config(rune_dir, env) if config is None else config
    specs = endpoints_from_config(config)
    untrusted = untrusted_endpoints(config)
    if endpoints:
        chosen = tuple(
            spec_from_argument(e, key_env=key_env, configured=specs, untrusted=untrusted)
            for e in endpoints
        )
    else:
        chosen = tuple(specs.values())
    if subagent_endpoint is not None:
        spec = spec_from_argument(
            subagent_endpoint, key_env=key_env, configured=specs, untrusted=untrusted
        )
        subagent: ModelRef | None = ModelRef(spec, subagent_model)
    else:
        subagent = subagent_from_config(config, specs)
        if subagent is not None and subagent_model is not None:
            subagent = ModelRef(subagent.endpoint, subagent_model)
    if subagent_model is not None and subagent is None:
        raise RuntimeConfigError(
            "--subagent-model needs --subagent-endpoint (or [subagent] endpoint)"
        )
    return EndpointSetup(
        endpoints=chosen, subagent=subagent if with_subagent else None, refresh=refresh
    )
