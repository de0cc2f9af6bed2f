"""From configuration and detection to the external CLI runtimes a council may use.

Reads the project's and the user's ``council.toml`` (user-defined runtimes, consent, extra
variables to pass), runs DETECT (or reuses today's cache), turns every available entry
into a runtime, and applies the consent gate: without consent no external CLI is used.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import CONFIG_NAME, read_council_toml, read_toml_file, user_config_file
from ..consent import HOW_TO_GRANT, Consent, decide
from ..contract import DetectedRuntime, RuntimesFile
from ..errors import RuntimeConfigError
from ..paths import RuneDir
from ..stages.detect import detect
from .adapters import ADAPTERS, CliAdapter
from .base import Runtime
from .bridge import RUNTIME_PREFIX, BridgeRuntime
from .cli import CliRuntime
from .user_defined import load_user_runtimes, specs_digest

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

ConfigSources = list[tuple[Path, Mapping[str, Any]]]


def config_sources(rune_dir: RuneDir, env: Mapping[str, str]) -> ConfigSources:
    """The user's council.toml, then the project's (which wins where both speak)."""
    user = user_config_file(env)
    return [
        (user, read_toml_file(user)),
        (rune_dir.root / CONFIG_NAME, read_council_toml(rune_dir)),
    ]


def allowed_env(sources: ConfigSources) -> tuple[str, ...]:
    """``[env] allow = [...]``: variables the user lets through to every external CLI."""
    names: list[str] = []
    for path, data in sources:
        table = data.get("env")
        if table is None:
            continue
        allow = table.get("allow") if isinstance(table, dict) else None
        if not isinstance(allow, list) or not all(
            isinstance(n, str) and _ENV_NAME.match(n) for n in allow
        ):
            raise RuntimeConfigError(f"{path}: [env] allow must be a list of variable names")
        names += allow
    return tuple(dict.fromkeys(names))


def all_adapters(sources: ConfigSources) -> dict[str, CliAdapter]:
    """The built-in adapters plus every user-defined runtime (validated)."""
    return {**ADAPTERS, **{a.name: a for a in load_user_runtimes(sources)}}


async def detect_configured(
    rune_dir: RuneDir, *, env: Mapping[str, str], refresh: bool = False
) -> tuple[RuntimesFile, bool]:
    """DETECT over the built-in and the user-defined runtimes; the report and whether it
    came from today's cache."""
    sources = config_sources(rune_dir, env)
    adapters = all_adapters(sources)
    digest = specs_digest(sources) if len(adapters) > len(ADAPTERS) else None
    return await detect(
        rune_dir, refresh=refresh, env=env, adapters=list(adapters.values()), config_digest=digest
    )


@dataclass
class CliAssembly:
    detected: list[DetectedRuntime]
    checked_at: str | None
    from_cache: bool
    runtimes: list[Runtime]
    consent: Consent
    notes: list[str] = field(default_factory=list)


async def assemble_clis(
    rune_dir: RuneDir,
    *,
    env: Mapping[str, str],
    refresh: bool = False,
    allow_external: bool | None = None,
) -> CliAssembly:
    sources = config_sources(rune_dir, env)
    adapters = all_adapters(sources)
    report, from_cache = await detect_configured(rune_dir, env=env, refresh=refresh)
    allow = allowed_env(sources)
    login = tuple(report.login_path)
    runtimes: list[Runtime] = []
    for entry in report.detected:
        if entry.status != "available" or not entry.path:
            continue
        confidence = entry.family_confidence
        if entry.via is not None and entry.runtime.startswith(RUNTIME_PREFIX):
            runtimes.append(
                BridgeRuntime(
                    bridge=entry.path,
                    agent=entry.runtime[len(RUNTIME_PREFIX) :],
                    family=entry.model_family,
                    confidence=confidence,
                    parent_env=env,
                    extra_path=login,
                )
            )
        elif entry.runtime in adapters:
            runtimes.append(
                CliRuntime(
                    adapters[entry.runtime],
                    entry.path,
                    env,
                    family=entry.model_family,
                    confidence=confidence,
                    extra_path=login,
                    allow_env=allow,
                )
            )
    consent = decide(
        allow_external,
        env,
        sources,
        rune_dir,
        explicit_source="the caller (allow_external / --yes)",
    ) or Consent(False, "nobody granted it")
    notes: list[str] = []
    if from_cache:
        notes.append("runtime detection reused from today's cache")
    if runtimes and not consent.allowed:
        names = ", ".join(r.name for r in runtimes)
        notes.append(
            f"external CLIs found ({names}) but not dispatched: consent for external "
            f"dispatch {consent.describe()}; to allow it, {HOW_TO_GRANT}"
        )
        runtimes = []
    return CliAssembly(
        detected=list(report.detected),
        checked_at=report.checked_at,
        from_cache=from_cache,
        runtimes=runtimes,
        consent=consent,
        notes=notes,
    )
