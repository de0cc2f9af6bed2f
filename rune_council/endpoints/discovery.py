"""Which models an endpoint serves: ``GET /models``, cached per endpoint for six hours.

The cache lives in ``<rune dir>/endpoints/`` and holds the endpoint's name, base URL, the
time of the fetch and the model ids: never the key or anything from a request header. When
a live fetch fails, the last cache (however old) and then the configured models stand in,
and the returned note says which.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from ..core.errors import EndpointCallError
from ..core.paths import RuneDir
from ..files import atomic_write_json
from ..runtimes.http import EndpointClient
from ..safefile import read_capped
from .config import EndpointSpec

CACHE_TTL = dt.timedelta(hours=6)
DISCOVERY_TIMEOUT_S = 20.0
CACHE_DIR = "endpoints"

Source = Literal["cache", "live", "stale-cache", "configured", "none"]


class ModelsCache(BaseModel):
    """``<rune dir>/endpoints/models-<name>-<url hash>.json``."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal["1"] = "1"
    endpoint: str
    base_url: str
    fetched_at: str
    models: list[str]


@dataclass(frozen=True)
class Discovery:
    models: list[str]
    source: Source
    fetched_at: str | None = None
    note: str | None = None


def cache_path(rune_dir: RuneDir, spec: EndpointSpec) -> Path:
    # The hash keeps two endpoints that share a name (a flag and a config) apart.
    digest = hashlib.sha256(spec.base_url.encode()).hexdigest()[:12]
    return rune_dir.subdir(CACHE_DIR) / f"models-{spec.name}-{digest}.json"


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def read_cache(rune_dir: RuneDir, spec: EndpointSpec) -> ModelsCache | None:
    try:
        raw, _cut = read_capped(cache_path(rune_dir, spec), 8_000_000)
        cached = ModelsCache.model_validate_json(raw)
    except (OSError, ValidationError, ValueError):
        return None
    return cached if cached.base_url == spec.base_url else None


def is_fresh(cached: ModelsCache, now: dt.datetime) -> bool:
    try:
        fetched = dt.datetime.fromisoformat(cached.fetched_at)
    except ValueError:
        return False
    if fetched.tzinfo is None:
        return False
    age = now - fetched
    # A fetch time in the future means a wrong clock then or now: do not trust it.
    return dt.timedelta(0) <= age < CACHE_TTL


async def discover(
    spec: EndpointSpec,
    client: EndpointClient,
    rune_dir: RuneDir,
    *,
    refresh: bool = False,
    now: dt.datetime | None = None,
) -> Discovery:
    if not spec.discover:
        return Discovery(list(spec.models), "configured")
    moment = now or _utcnow()
    cached = read_cache(rune_dir, spec)
    if cached is not None and not refresh and is_fresh(cached, moment):
        return Discovery(list(cached.models), "cache", cached.fetched_at)
    try:
        models = await client.list_models(timeout_s=DISCOVERY_TIMEOUT_S)
    except EndpointCallError as exc:
        failed = f"endpoint {spec.name}: model discovery failed ({exc})"
        if cached is not None:
            return Discovery(
                list(cached.models),
                "stale-cache",
                cached.fetched_at,
                f"{failed}; using the model list cached at {cached.fetched_at}",
            )
        if spec.models:
            return Discovery(
                list(spec.models),
                "configured",
                None,
                f"{failed}; using the {len(spec.models)} configured model(s)",
            )
        return Discovery([], "none", None, f"{failed}; no cached or configured models to use")
    fetched_at = moment.isoformat(timespec="seconds")
    record = ModelsCache(
        endpoint=spec.name, base_url=spec.base_url, fetched_at=fetched_at, models=models
    )
    atomic_write_json(cache_path(rune_dir, spec), record.model_dump(mode="json"))
    return Discovery(models, "live", fetched_at)
