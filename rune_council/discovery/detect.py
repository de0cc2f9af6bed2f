"""Step 1, DETECT: which AI CLIs are installed, what family each speaks for.

Probes run in parallel (resolved absolute path, executable bit, the version — read from the
package that installed the CLI when that is unambiguous, else ``--version`` under a short
timeout), and the report is cached in ``.rune/runtimes.json`` for the rest of the local day,
so repeated councils do not pay for the probes again. Finding nothing is a valid outcome.

The cache sits in the project, where a repository can ship one, so it is read as untrusted:
it is used only when this user's own detection wrote exactly that content here (anything
else is rebuilt, with a note saying why), and every entry is checked on each read against
what it was read from — the program PATH finds now (path, size, times, inode) and, for a
wrapper, every config file and variable its family came from. Only the entries that no
longer hold are probed again: a CLI gone from PATH is not seated, a wrapper pointed at
another model is not counted in its old family.

A CLI missing from PATH is looked for on the user's login-shell PATH too (asked once, and
cached with the report). A wrapper CLI is promoted from ``unknown`` to a family only when
its own configuration names its backend model. A CLI that cannot meet the dispatch safety
rules is listed as ``ineligible`` with the reason. Agents only the ``1devtool-agent`` bridge
can reach are listed as ``1devtool:<agent>``.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ..config import user_config_dir
from ..core.contract import DetectedRuntime, RuntimesFile
from ..core.errors import RunFileError
from ..core.paths import RuneDir
from ..core.safetext import one_line
from ..files import atomic_write_json
from ..runtimes.auth import (
    AuthContext,
    Looked,
    first_change,
    unchanged,
    watched_file,
    watched_files,
    watched_vars,
)
from ..runtimes.base import merged_path, redact, secret_values
from ..runtimes.bridge import BRIDGE_NAME, RUNTIME_PREFIX, find_bridge, list_agents
from ..runtimes.clis import BUILTIN
from ..safefile import read_capped
from ..trust_store import CacheVouchers, digest

if TYPE_CHECKING:
    from ..runtimes.cli_adapter import CliAdapter

# Reusing today's cache of a machine where no CLI was found (a council of endpoint voices)
# runs no probe: the modules that probe (processes, the login shell, package metadata, the
# adapters' environment rules) are loaded by the functions that probe.

# A node-based CLI takes several seconds to print its version on its own, and every probe
# starts at once; on a busy machine 10 s was too short, and a timed-out probe leaves the CLI
# out of every council for the rest of the day (the report is cached).
VERSION_TIMEOUT_S = 30.0
_CACHE_CAP = 4_000_000
_VERSION = re.compile(r"\d+\.\d+(?:\.\d+)?(?:[-+.\w]*)?")


def _today() -> str:
    return dt.date.today().isoformat()


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


def _search_path(env: Mapping[str, str], login: Sequence[str]) -> str:
    return merged_path(env.get("PATH", os.defpath), login)


def family_of(adapter: CliAdapter, env: Mapping[str, str]) -> tuple[dict[str, Any], str]:
    """The family fields of a report entry, and a note saying where they came from. For a
    wrapper they include every file (with its content digest) and variable (with its value
    digest) its reader looked at, so a cached entry is read again once one of them changes."""
    base: dict[str, Any] = {
        "model_family": adapter.model_family,
        "family_confidence": adapter.family_confidence,
    }
    if not adapter.wrapper or adapter.backend is None:
        return base, "" if not adapter.wrapper else _NO_BACKEND
    looked = Looked(env)
    reading = adapter.backend(looked)
    watched: dict[str, Any] = {
        "probe_files": watched_files(looked.files, content=True),
        "probe_vars": watched_vars(looked.variables, env, values=True),
    }
    if reading is None:
        return {**base, **watched}, _NO_BACKEND
    promoted = {"model_family": reading.family, "family_confidence": "confirmed", **watched}
    return promoted, f"backend model {reading.model!r} named in {reading.evidence}"


_NO_BACKEND = "wrapper: its config names no backend model of a known family"


def _with_binary(fields: dict[str, Any], path: str) -> dict[str, Any]:
    """``fields`` with the program at ``path`` watched first: replaced or upgraded since, the
    entry is probed again."""
    return {**fields, "probe_files": [watched_file(path), *fields.get("probe_files", [])]}


async def check_auth(
    adapter: CliAdapter, path: str, env: Mapping[str, str], search: str
) -> dict[str, Any]:
    """The ``auth*`` fields of a report entry: the adapter's own check, run with the exact
    environment DISPATCH gives the CLI; what it says is masked like every recorded output."""
    if adapter.auth is None:
        return {"auth": "unknown", "auth_detail": "no offline check is known for this CLI"}
    from ..runtimes.cli_adapter import adapter_env

    child_env = adapter_env(adapter, env)
    child_env["PATH"] = search
    try:
        reading = await adapter.auth(AuthContext(path, child_env))
    except (OSError, ValueError, RuntimeError) as exc:  # a plug-in's check must not stop DETECT
        return {"auth": "unknown", "auth_detail": f"the auth check failed: {type(exc).__name__}"}
    secrets = secret_values(child_env)
    return {
        "auth": reading.state,
        "auth_detail": redact(one_line(reading.detail, 400), secrets),
        "auth_fix": redact(reading.fix, secrets) if reading.fix else None,
        "auth_files": watched_files(reading.files),
        "auth_vars": watched_vars(reading.variables, child_env),
    }


async def probe(
    adapter: CliAdapter, env: Mapping[str, str], login: Sequence[str] = ()
) -> DetectedRuntime:
    family, family_note = family_of(adapter, env)
    base: dict[str, Any] = {"runtime": adapter.name, **family}
    search = _search_path(env, login)
    found = shutil.which(adapter.executable, path=search)
    if found is None:
        where = "PATH or the login-shell PATH" if login else "PATH"
        return DetectedRuntime(status="unavailable", detail=f"not found on {where}", **base)
    found = os.path.abspath(found)
    base = _with_binary(base, found)
    if not os.access(found, os.X_OK):
        return DetectedRuntime(status="unavailable", path=found, detail="not executable", **base)
    auth_task = (
        None
        if adapter.ineligible
        else asyncio.ensure_future(check_auth(adapter, found, env, search))
    )
    try:
        version_entry = await _version(adapter, env, found, search, base)
    except BaseException:
        if auth_task is not None:
            auth_task.cancel()
        raise
    auth = await auth_task if auth_task is not None else {}
    if isinstance(version_entry, DetectedRuntime):
        return version_entry
    version = version_entry
    notes = [
        n
        for n in (family_note, "" if adapter.verified == "real binary" else "flags from docs only")
        if n
    ]
    if adapter.ineligible:
        return DetectedRuntime(
            status="ineligible",
            path=found,
            version=version,
            detail=f"ineligible: {adapter.ineligible}",
            **base,
        )
    return DetectedRuntime(
        status="available",
        path=found,
        version=version,
        detail="; ".join(notes),
        binary_mtime=_mtime(found),
        **base,
        **auth,
    )


def _mtime(path: str) -> float | None:
    try:
        return os.stat(path).st_mtime  # follows the link to the file an upgrade replaces
    except OSError:
        return None


async def _version(
    adapter: CliAdapter, env: Mapping[str, str], found: str, search: str, base: dict[str, Any]
) -> str | DetectedRuntime | None:
    """The version the CLI prints, or the ``unavailable`` entry when it cannot print one."""
    from ..runtimes.cli_adapter import adapter_env
    from ..runtimes.process import run_process
    from .installed_version import packaged_version

    version: str | None = packaged_version(found)
    if version is not None:
        return version  # read from the installing package: nothing started
    if adapter.version_args:
        # Probe through the resolved path with the same env the voice would get, so what
        # we check is what DISPATCH will run.
        child_env = adapter_env(adapter, env)
        child_env["PATH"] = search
        result = await run_process(
            [found, *adapter.version_args],
            stdin=b"",
            env=child_env,
            timeout_s=VERSION_TIMEOUT_S,
            max_stdout=64_000,
        )
        if result.outcome != "ok":
            return DetectedRuntime(
                status="unavailable",
                path=found,
                detail=redact(f"version probe failed: {result.detail}", secret_values(child_env)),
                **base,
            )
        # A probe's output is recorded, so credentials the CLI could see are masked in it.
        text = redact(
            (result.stdout or result.stderr).decode("utf-8", errors="replace"),
            secret_values(child_env),
        )
        match = _VERSION.search(text)
        version = (
            match.group(0) if match else text.strip().splitlines()[0][:80] if text.strip() else None
        )
    return version


async def _bridge_entries(
    bridge: str, env: Mapping[str, str], direct: list[DetectedRuntime], login: Sequence[str]
) -> list[DetectedRuntime]:
    agents, summary = await list_agents(bridge, {**env, "PATH": _search_path(env, login)})
    reachable = {d.runtime for d in direct if d.status in ("available", "ineligible")}
    entries: list[DetectedRuntime] = []
    for agent in agents:
        if agent.name in reachable:
            continue  # run directly, with our own read-only flags
        adapter = BUILTIN.get(agent.name)
        family: dict[str, Any] = {"model_family": "unknown", "family_confidence": "unknown"}
        note = "not in the family map"
        if adapter is not None:
            family, note = family_of(adapter, env)
        common: dict[str, Any] = {
            "runtime": f"{RUNTIME_PREFIX}{agent.name}",
            "path": bridge,
            "version": agent.version,
            "via": BRIDGE_NAME,
            **_with_binary(family, bridge),
        }
        if adapter is not None and adapter.ineligible:
            entries.append(
                DetectedRuntime(
                    status="ineligible", detail=f"ineligible: {adapter.ineligible}", **common
                )
            )
            continue
        detail = "; ".join(n for n in (f"via {BRIDGE_NAME}", note) if n)
        entries.append(DetectedRuntime(status="available", detail=detail, **common))
    if not agents:
        entries.append(
            DetectedRuntime(runtime=BRIDGE_NAME, status="unavailable", path=bridge, detail=summary)
        )
    return entries


async def detect_runtimes(
    env: Mapping[str, str] | None = None,
    adapters: Sequence[CliAdapter] | None = None,
    *,
    config_digest: str | None = None,
) -> RuntimesFile:
    from ..runtimes.login_path import LoginPath, login_shell_path

    env = dict(os.environ) if env is None else env
    chosen = list(BUILTIN.values()) if adapters is None else list(adapters)
    path = env.get("PATH", os.defpath)
    missing = [n for n in [a.executable for a in chosen] if shutil.which(n, path=path) is None]
    login = LoginPath(None, (), "")
    if missing:
        # Asked once per detection, only when something is not on the PATH we were given.
        login = await login_shell_path(env)
    detected = list(await asyncio.gather(*(probe(a, env, login.dirs) for a in chosen)))
    bridge = find_bridge(env, login.dirs)
    if bridge is not None:
        detected += await _bridge_entries(bridge, env, detected, login.dirs)
    return RuntimesFile(
        checked_at=_now(),
        session_marker=_today(),
        bridge_path=bridge,
        detected=detected,
        login_shell=login.shell,
        login_path=list(login.dirs),
        config_digest=config_digest,
    )


def _fingerprint(report: RuntimesFile) -> str:
    return digest(report.model_dump_json().encode("utf-8"))


def _vouchers(env: Mapping[str, str] | None) -> CacheVouchers:
    return CacheVouchers(user_config_dir(env))


def _read_cache(
    rune_dir: RuneDir, config_digest: str | None, env: Mapping[str, str] | None
) -> tuple[RuntimesFile | None, str]:
    """Today's cache, if this user's detection wrote exactly this content here (a repository
    may ship a runtimes.json naming any program) for the same runtime definitions; else
    None, and why when the file was there but not ours (an expired day says nothing)."""
    path = rune_dir.runtimes_file
    rebuilt = "ignored, and detection ran afresh"
    if path.is_symlink():
        # Like every file under .rune: never read or written through a link.
        raise RunFileError(f"refusing to read or write through a symlink: {path}")
    try:
        data, cut = read_capped(path, _CACHE_CAP)
        cached = RuntimesFile.model_validate_json(data)
    except FileNotFoundError:
        return None, ""
    except (OSError, ValidationError, ValueError):
        return None, f"runtime cache {path} is not a report this version writes: {rebuilt}"
    if cut or not _vouchers(env).vouched(path, _fingerprint(cached)):
        return None, (
            f"runtime cache {path} was not written by your own detection here, or was "
            f"edited since: {rebuilt}"
        )
    if cached.session_marker != _today() or cached.config_digest != config_digest:
        return None, ""
    return cached, ""


def _stale(
    item: DetectedRuntime, adapter: CliAdapter, env: Mapping[str, str], search: str
) -> str | None:
    """Why a cached entry no longer says what DISPATCH would run, in words ("" when it was
    written before entries were fingerprinted); None while it still holds."""
    if item.path is None:
        return None  # not found then; a CLI installed since waits for --refresh or tomorrow
    found = shutil.which(adapter.executable, path=search)
    now = os.path.abspath(found) if found is not None else None
    if now != item.path:
        if now is None:
            return f"{item.path} is no longer on the PATH"
        return f"the PATH now finds {now}, not {item.path}"
    if not any(f.path == item.path for f in item.probe_files):
        return ""
    return first_change(item.probe_files, item.probe_vars, env)


def _bridge_stale(report: RuntimesFile, env: Mapping[str, str]) -> bool:
    """Whether the bridge or any agent entry it gave is not what it was: the agents it lists
    are asked of the bridge itself, so a change there means detecting everything again."""
    if find_bridge(env, report.login_path) != report.bridge_path:
        return True
    return any(
        first_change(item.probe_files, item.probe_vars, env) is not None
        for item in report.detected
        if item.via is not None or item.runtime == BRIDGE_NAME
    )


def _redetected_note(old: DetectedRuntime, new: DetectedRuntime, why: str) -> str:
    if new.status != "available":
        return f"{new.runtime} not seated: {why} (detected again: {new.detail or new.status})"
    was = f"{old.model_family} ({old.family_confidence})"
    now = f"{new.model_family} ({new.family_confidence})"
    changed = f": family now {now}, was {was}" if was != now else ""
    return f"{new.runtime} detected again, since {why}{changed}"


async def _refresh_stale(
    report: RuntimesFile,
    env: Mapping[str, str],
    by_name: Mapping[str, CliAdapter],
    notes: list[str],
) -> bool:
    """Probes again, in place, every cached entry that no longer holds; whether any did."""
    search = _search_path(env, report.login_path)
    stale: list[tuple[int, CliAdapter, str]] = []
    for i, item in enumerate(report.detected):
        # A CLI not found then stays so until --refresh or tomorrow (``_stale``): its
        # adapter is not even loaded.
        if item.via is not None or item.path is None:
            continue
        adapter = by_name.get(item.runtime)
        if adapter is None:
            continue
        why = _stale(item, adapter, env, search)
        if why is not None:
            stale.append((i, adapter, why))
    fresh = await asyncio.gather(*(probe(a, env, report.login_path) for _, a, _ in stale))
    for (i, _, why), new in zip(stale, fresh, strict=True):
        old = report.detected[i]
        report.detected[i] = new
        if why and "available" in (old.status, new.status):
            notes.append(_redetected_note(old, new, why))
    return bool(stale)


async def detect(
    rune_dir: RuneDir,
    *,
    refresh: bool = False,
    env: Mapping[str, str] | None = None,
    adapters: Mapping[str, CliAdapter] | Sequence[CliAdapter] | None = None,
    config_digest: str | None = None,
    notes: list[str] | None = None,
) -> tuple[RuntimesFile, bool]:
    """The runtime report and whether it came from the cache.

    ``adapters`` (by name, or a list) defaults to the built-in ones; pass user-defined ones
    too (with the ``config_digest`` of their definitions, so an edited definition is probed
    afresh). ``notes`` gains a line for a cache that was not used and for each cached entry
    that had to be probed again, and why. Reusing the cache looks up only the adapters of
    the CLIs it found.
    """
    notes = [] if notes is None else notes
    env = dict(os.environ) if env is None else env
    by_name: Mapping[str, CliAdapter]
    if adapters is None:
        by_name = BUILTIN
    elif isinstance(adapters, Mapping):
        by_name = adapters
    else:
        by_name = {a.name: a for a in adapters}
    if not refresh:
        cached, why = _read_cache(rune_dir, config_digest, env)
        if why:
            notes.append(why)
        if cached is not None and not _bridge_stale(cached, env):
            # An entry probed again makes the report not wholly today's cache any more.
            if refreshed := await _refresh_stale(cached, env, by_name, notes):
                cached.checked_at = _now()
            if await _recheck_auth(cached, env, by_name) or refreshed:
                _save(rune_dir, cached, env)
            return cached, not refreshed
    report = await detect_runtimes(env, list(by_name.values()), config_digest=config_digest)
    _save(rune_dir, report, env)
    return report, False


def _save(rune_dir: RuneDir, report: RuntimesFile, env: Mapping[str, str] | None) -> None:
    atomic_write_json(rune_dir.runtimes_file, report.model_dump(mode="json"))
    with contextlib.suppress(OSError, RunFileError):  # unvouched only means probed next time
        _vouchers(env).vouch(rune_dir.runtimes_file, _fingerprint(report))


async def _recheck_auth(
    report: RuntimesFile, env: Mapping[str, str] | None, by_name: Mapping[str, CliAdapter]
) -> bool:
    """Checks again, in place, the auth of every cached entry whose files or variables have
    changed since (a login, a key set after the fix was shown); whether any was."""
    env = dict(os.environ) if env is None else env
    search = _search_path(env, report.login_path)
    stale = []
    for i, item in enumerate(report.detected):
        if item.via is not None or item.auth is None or item.path is None:
            continue
        adapter = by_name.get(item.runtime)
        if adapter is None:
            continue
        from ..runtimes.cli_adapter import adapter_env

        if not unchanged(item.auth_files, item.auth_vars, adapter_env(adapter, env)):
            stale.append((i, adapter, item.path))
    fresh = await asyncio.gather(*(check_auth(a, p, env, search) for _, a, p in stale))
    for (i, _, _), fields in zip(stale, fresh, strict=True):
        report.detected[i] = report.detected[i].model_copy(update=fields)
    return bool(stale)
