"""From configuration and detection to the external CLI runtimes a council may use.

Takes the settings of ``council.toml`` (user-defined runtimes, consent, extra variables to
pass) from one ``CouncilConfig``, runs DETECT (or reuses today's cache), turns every available entry
into a runtime, and applies the consent gate: without consent no external CLI is used.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Mapping, MutableMapping
from dataclasses import field
from typing import TYPE_CHECKING, cast

from ..config import CouncilConfig, load_config
from ..consent import HOW_TO_GRANT, Consent, decide
from ..core.contract import DetectedRuntime, RuntimesFile
from ..core.paths import RuneDir
from ..core.records import record
from ..core.runtime import Runtime
from ..runtimes.bridge import RUNTIME_PREFIX
from ..runtimes.clis import BUILTIN
from ..runtimes.plugins import plugin_adapters, plugins_digest
from ..runtimes.user_defined import load_user_runtimes, specs_digest
from .detect import detect

if TYPE_CHECKING:
    from ..runtimes.cli_adapter import CliAdapter

# A council that finds no CLI (endpoint voices only, its detection today's cache) seats none:
# the modules that run and define CLIs are loaded where one is defined or seated.


def _scratch_note() -> str | None:
    from ..runtimes.scratch import scratch_note

    return scratch_note()


def allowed_env(config: CouncilConfig) -> tuple[str, ...]:
    """``[env] allow = [...]``: variables the user lets through to every external CLI."""
    return config.env.allow


def all_adapters(config: CouncilConfig) -> Mapping[str, CliAdapter]:
    """The built-in adapters, the installed plug-ins' and every user-defined runtime
    (validated); the user's own definition wins over a plug-in's of the same name. A
    built-in one is loaded only when it is looked up (``runtimes.clis``)."""
    user = {a.name: a for a in load_user_runtimes(config)}
    # A ChainMap writes only to its first map, so the read-only built-ins are safe last.
    return ChainMap(user, plugin_adapters(), cast("MutableMapping[str, CliAdapter]", BUILTIN))


async def detect_configured(
    rune_dir: RuneDir,
    *,
    env: Mapping[str, str],
    refresh: bool = False,
    config: CouncilConfig | None = None,
    notes: list[str] | None = None,
) -> tuple[RuntimesFile, bool]:
    """DETECT over the built-in and the user-defined runtimes; the report and whether it
    came from today's cache. ``config`` is read from the files when not given; ``notes``
    gains why a cache or a cached entry was not used as it was."""
    config = load_config(rune_dir, env) if config is None else config
    adapters = all_adapters(config)
    digest = specs_digest(config) if len(adapters) > len(BUILTIN) else None
    if digest is not None and (plugins := plugins_digest()) is not None:
        digest = f"{digest}+{plugins}"
    return await detect(
        rune_dir,
        refresh=refresh,
        env=env,
        adapters=adapters,
        config_digest=digest,
        notes=notes,
    )


def logged_out_note(entry: DetectedRuntime) -> str:
    """One line: which CLI sits out, why, and the one thing that fixes it."""
    fix = f"; to fix: {entry.auth_fix}" if entry.auth_fix else ""
    return f"{entry.runtime} not seated: logged out ({entry.auth_detail}){fix}"


@record
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
    config: CouncilConfig | None = None,
) -> CliAssembly:
    config = load_config(rune_dir, env) if config is None else config
    adapters = all_adapters(config)
    cache_notes: list[str] = []
    report, from_cache = await detect_configured(
        rune_dir, env=env, refresh=refresh, config=config, notes=cache_notes
    )
    allow = allowed_env(config)
    login = tuple(report.login_path)
    runtimes: list[Runtime] = []
    unseated: list[str] = []
    for entry in report.detected:
        if entry.status != "available" or not entry.path:
            continue
        if entry.auth == "logged-out":
            # It would fail at once, or retry until the timeout: its slot goes to the next one.
            unseated.append(logged_out_note(entry))
            continue
        confidence = entry.family_confidence
        if entry.via is not None and entry.runtime.startswith(RUNTIME_PREFIX):
            from ..runtimes.bridge import BridgeRuntime

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
            from ..runtimes.cli import CliRuntime

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
        config,
        rune_dir,
        explicit_source="the caller (allow_external / --yes)",
    ) or Consent(False, "nobody granted it")
    notes: list[str] = []
    if from_cache:
        notes.append("runtime detection reused from today's cache")
    notes += cache_notes
    notes += unseated
    if runtimes and not consent.allowed:
        names = ", ".join(r.name for r in runtimes)
        notes.append(
            f"external CLIs found ({names}) but not dispatched: consent for external "
            f"dispatch {consent.describe()}; to allow it, {HOW_TO_GRANT}"
        )
        runtimes = []
    if runtimes and (exposed := _scratch_note()) is not None:
        notes.append(exposed)
    return CliAssembly(
        detected=list(report.detected),
        checked_at=report.checked_at,
        from_cache=from_cache,
        runtimes=runtimes,
        consent=consent,
        notes=notes,
    )
