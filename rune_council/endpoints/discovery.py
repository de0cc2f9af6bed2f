"""Which models an endpoint serves: ``GET /models``, cached per endpoint for six hours.

The cache holds the endpoint's name, base URL, the time of the fetch and the model ids:
never the key or anything from a request header. It is the user's own, kept in a directory
only they can write (``scratch.private_dir``: ``$XDG_RUNTIME_DIR/rune-council/endpoints``
or ``~/.cache/rune-council/endpoints``), never in a project's ``.rune/``: a cloned
repository can ship anything there, and a planted list would have its names seated and
shown as models the endpoint serves. One in ``.rune/endpoints/`` is not read. When a live
fetch fails, the last cache (however old) and then the configured models stand in, and the
returned note says which.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from ..core.errors import CouncilError, EndpointCallError
from ..core.records import record
from ..files import atomic_write_json
from ..runtimes.http import EndpointClient
from ..runtimes.scratch import private_dir
from ..safefile import read_capped
from .config import EndpointSpec

CACHE_TTL = dt.timedelta(hours=6)
DISCOVERY_TIMEOUT_S = 20.0
CACHE_DIR = "endpoints"

Source = Literal["cache", "live", "stale-cache", "configured", "none"]


class ModelsCache(BaseModel):
    """``<the user's private dir>/endpoints/models-<name>-<url hash>.json``."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal["1"] = "1"
    endpoint: str
    base_url: str
    fetched_at: str
    models: list[str]


@record(frozen=True)
class Discovery:
    models: list[str]
    source: Source
    fetched_at: str | None = None
    note: str | None = None


def cache_path(spec: EndpointSpec, env: Mapping[str, str] | None = None) -> Path | None:
    """Where this user keeps the endpoint's model list under ``env``; None when there is no
    directory private to them (then lists are fetched each time and never kept)."""
    where = private_dir(CACHE_DIR, os.environ if env is None else env)
    if where is None:
        return None
    # The hash keeps two endpoints that share a name (a flag and a config) apart.
    digest = hashlib.sha256(spec.base_url.encode()).hexdigest()[:12]
    return Path(where) / f"models-{spec.name}-{digest}.json"


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def read_cache(spec: EndpointSpec, env: Mapping[str, str] | None = None) -> ModelsCache | None:
    path = cache_path(spec, env)
    if path is None:
        return None
    try:
        raw, _cut = read_capped(path, 8_000_000)
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
    env: Mapping[str, str],
    *,
    refresh: bool = False,
    now: dt.datetime | None = None,
) -> Discovery:
    if not spec.discover:
        return Discovery(list(spec.models), "configured")
    moment = now or _utcnow()
    cached = read_cache(spec, env)
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
    path = cache_path(spec, env)
    if path is not None:
        # A list that cannot be kept is fetched again next time; the run goes on.
        with contextlib.suppress(OSError, CouncilError):
            atomic_write_json(path, record.model_dump(mode="json"))
    return Discovery(models, "live", fetched_at)
