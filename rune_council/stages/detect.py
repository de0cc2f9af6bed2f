"""Step 1, DETECT: which AI CLIs are installed, what family each speaks for.

Probes run in parallel (resolved absolute path, executable bit, ``--version`` under a short
timeout), and the report is cached in ``.rune/runtimes.json`` for the rest of the local day
so repeated councils do not pay for the probes again. Finding nothing is a valid outcome.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from ..contract import DetectedRuntime, RuntimesFile
from ..paths import RuneDir
from ..recorder import atomic_write_json
from ..runtimes.adapters import ADAPTERS, CliAdapter, adapter_env
from ..runtimes.process import run_process

VERSION_TIMEOUT_S = 10.0
_VERSION = re.compile(r"\d+\.\d+(?:\.\d+)?(?:[-+.\w]*)?")


def _today() -> str:
    return dt.date.today().isoformat()


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


async def probe(adapter: CliAdapter, env: Mapping[str, str]) -> DetectedRuntime:
    base: dict[str, Any] = {
        "runtime": adapter.name,
        "model_family": adapter.model_family,
        "family_confidence": adapter.family_confidence,
    }
    found = shutil.which(adapter.executable, path=env.get("PATH", os.defpath))
    if found is None:
        return DetectedRuntime(status="unavailable", detail="not found on PATH", **base)
    path = os.path.realpath(found)
    if not os.access(path, os.X_OK):
        return DetectedRuntime(status="unavailable", path=path, detail="not executable", **base)
    # Probe through the resolved path with the same env the voice would get, so what we
    # check is what DISPATCH will run.
    child_env = adapter_env(adapter, env)
    child_env["PATH"] = env.get("PATH", os.defpath)
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
            detail=f"version probe failed: {result.detail}",
            **base,
        )
    text = (result.stdout or result.stderr).decode("utf-8", errors="replace")
    match = _VERSION.search(text)
    version = (
        match.group(0) if match else text.strip().splitlines()[0][:80] if text.strip() else None
    )
    return DetectedRuntime(status="available", path=found, version=version, **base)


async def detect_runtimes(
    env: Mapping[str, str] | None = None,
    adapters: Sequence[CliAdapter] | None = None,
) -> RuntimesFile:
    env = dict(os.environ) if env is None else env
    chosen = list(ADAPTERS.values()) if adapters is None else list(adapters)
    detected = await asyncio.gather(*(probe(a, env) for a in chosen))
    return RuntimesFile(checked_at=_now(), session_marker=_today(), detected=list(detected))


def load_cached(rune_dir: RuneDir) -> RuntimesFile | None:
    """Today's cache, if it is readable and every runtime it lists is still on disk."""
    try:
        cached = RuntimesFile.model_validate_json(rune_dir.runtimes_file.read_bytes())
    except (OSError, ValidationError, ValueError):
        return None
    if cached.session_marker != _today():
        return None
    for item in cached.detected:
        if item.status == "available" and (item.path is None or not os.path.exists(item.path)):
            return None
    return cached


async def detect(
    rune_dir: RuneDir,
    *,
    refresh: bool = False,
    env: Mapping[str, str] | None = None,
) -> tuple[RuntimesFile, bool]:
    """The runtime report and whether it came from the cache."""
    if not refresh:
        cached = load_cached(rune_dir)
        if cached is not None:
            return cached, True
    report = await detect_runtimes(env)
    atomic_write_json(rune_dir.runtimes_file, report.model_dump(mode="json"))
    return report, False
