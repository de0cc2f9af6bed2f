"""Turn configured endpoints into council runtimes: key, discovery, ranking, one pool each.

This is the I/O edge the orchestrator calls before ALLOCATE; what it returns is plain data
(runtimes, report rows, notes) plus the clients to close when the run ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import field, replace
from urllib.parse import urlsplit

from ..consent import HOW_TO_GRANT
from ..core.contract import DetectedRuntime
from ..core.errors import RuntimeConfigError
from ..core.families import classify_model
from ..core.made import made
from ..core.paths import RuneDir
from ..core.records import record
from ..runtimes.http import (
    CandidatePool,
    EndpointClient,
    EndpointModel,
    HttpRuntime,
    ModelChoice,
    is_loopback,
)
from ..runtimes.limits import Backoff
from .config import EndpointSetup, EndpointSpec, ModelRef
from .discovery import Discovery, discover
from .formats import UserFormatMemory
from .keys import resolve_key
from .ranking import rank_models

_SOURCE_WORDS = {
    "cache": "model list cached",
    "live": "models listed",
    "stale-cache": "stale model list cached",
    "configured": "configured models",
    "none": "no models",
}


@record
class _Prepared:
    spec: EndpointSpec
    client: EndpointClient
    discovery: Discovery
    ranked: list[ModelChoice]


@record
class Assembly:
    runtimes: list[HttpRuntime] = field(default_factory=list)
    subagent: HttpRuntime | None = None
    detected: list[DetectedRuntime] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    clients: list[EndpointClient] = field(default_factory=list)

    async def aclose(self) -> None:
        for client in self.clients:
            await client.aclose()


async def _prepare(
    spec: EndpointSpec,
    rune_dir: RuneDir,
    env: Mapping[str, str],
    refresh: bool,
    backoff: Backoff | None = None,
) -> tuple[_Prepared | None, list[str]]:
    notes: list[str] = []
    try:
        key = resolve_key(spec, env)
    except RuntimeConfigError as exc:
        if spec.required:
            raise
        return None, [f"{exc}; its models are left out of this run"]
    parts = urlsplit(spec.base_url)
    if key is not None and parts.scheme == "http" and not is_loopback(parts.hostname):
        notes.append(
            f"endpoint {spec.name}: the API key is sent over plain http to {parts.hostname}"
        )
    # What this endpoint refused as an output constraint is the user's to remember, with
    # their config: a project's .rune/ is not theirs.
    formats = UserFormatMemory.for_user(env)
    client = EndpointClient(spec.name, spec.base_url, key, backoff=backoff, formats=formats)
    found = await discover(spec, client, env, refresh=refresh)
    if found.note:
        notes.append(found.note)
    ranked = rank_models(
        found.models, prefer=spec.prefer, exclude=spec.exclude, configured=spec.models
    )
    if found.models and not ranked:
        notes.append(f"endpoint {spec.name}: every listed model is excluded or cannot chat")
    return _Prepared(spec, client, found, ranked), notes


def _report_row(prepared: _Prepared, choice: ModelChoice, runtime: str) -> DetectedRuntime:
    found = prepared.discovery
    when = f" at {found.fetched_at}" if found.fetched_at else ""
    return made(
        DetectedRuntime,
        runtime=runtime,
        status="available",
        model_family=choice.family,
        family_confidence=choice.confidence,
        detail=(
            f"http endpoint {prepared.spec.name} ({prepared.spec.base_url}); "
            f"{_SOURCE_WORDS[found.source]}{when}; family: {choice.why}"
        ),
    )


def _pick(prepared: _Prepared, model: str | None) -> ModelChoice | None:
    if model is None:
        return prepared.ranked[0] if prepared.ranked else None
    for choice in prepared.ranked:
        if choice.model == model:
            return choice
    reading = classify_model(model)  # named explicitly: used even if not listed
    return ModelChoice(model, reading.family, reading.confidence, reading.why)


async def resolve_model(
    ref: ModelRef,
    rune_dir: RuneDir,
    env: Mapping[str, str],
    *,
    refresh: bool = False,
) -> EndpointModel:
    """An endpoint model for a role (subagent, orchestrator, chairman); close it after use."""
    spec = replace(ref.endpoint, required=True)
    prepared, notes = await _prepare(spec, rune_dir, env, refresh)
    assert prepared is not None  # a required endpoint raises instead
    choice = _pick(prepared, ref.model)
    if choice is None:
        await prepared.client.aclose()
        raise RuntimeConfigError(
            f"endpoint {ref.endpoint.name}: no model to use"
            + (f" ({'; '.join(notes)})" if notes else "")
        )
    return EndpointModel(
        prepared.client, choice, stream=prepared.spec.stream, max_tokens=prepared.spec.max_tokens
    )


def _key_of(spec: EndpointSpec) -> tuple[str, str]:
    return spec.name, spec.base_url


async def assemble(
    setup: EndpointSetup,
    rune_dir: RuneDir,
    env: Mapping[str, str],
    *,
    refused: str | None = None,
    backoff: Backoff | None = None,
) -> Assembly:
    """Runtimes for every endpoint of the setup; ``refused`` (why consent for external
    dispatch is missing) leaves them all out, with a note, before any request is made."""
    out = Assembly()
    if refused is not None:
        names = {s.name for s in setup.endpoints}
        if setup.subagent is not None:
            names.add(setup.subagent.endpoint.name)
        out.notes.append(
            f"HTTP endpoints configured ({', '.join(sorted(names))}) but not used: consent "
            f"for external dispatch {refused}; to allow it, {HOW_TO_GRANT}"
        )
        return out
    specs: dict[tuple[str, str], EndpointSpec] = {}
    for spec in setup.endpoints:
        specs.setdefault(_key_of(spec), spec)
    sub_ref = setup.subagent
    if sub_ref is not None:
        specs.setdefault(_key_of(sub_ref.endpoint), sub_ref.endpoint)
    results = await asyncio.gather(
        *(_prepare(s, rune_dir, env, setup.refresh, backoff) for s in specs.values()),
        return_exceptions=True,
    )
    prepared: dict[tuple[str, str], _Prepared] = {}
    failure: BaseException | None = None
    for key, outcome in zip(specs, results, strict=True):
        if isinstance(outcome, BaseException):
            failure = failure or outcome
            continue
        ready, notes = outcome
        out.notes.extend(notes)
        if ready is not None:
            prepared[key] = ready
            out.clients.append(ready.client)
    if failure is not None:
        await out.aclose()  # the endpoints that did come up are not used after all
        raise failure

    voice_keys = {_key_of(s) for s in setup.endpoints}
    for key, ready in prepared.items():
        if key not in voice_keys:
            continue
        spec = ready.spec
        pool = CandidatePool(
            list(ready.ranked),
            failover=spec.failover_on_failure,
            max_attempts=spec.max_attempts if spec.failover_on_failure else 1,
        )
        for choice in ready.ranked:
            runtime = HttpRuntime(
                ready.client, choice, pool, stream=spec.stream, max_tokens=spec.max_tokens
            )
            out.runtimes.append(runtime)
            out.detected.append(_report_row(ready, choice, runtime.name))

    if sub_ref is not None:
        ready_sub = prepared.get(_key_of(sub_ref.endpoint))
        sub_choice = _pick(ready_sub, sub_ref.model) if ready_sub is not None else None
        if ready_sub is not None and sub_choice is not None:
            model = EndpointModel(
                ready_sub.client,
                sub_choice,
                stream=ready_sub.spec.stream,
                max_tokens=ready_sub.spec.max_tokens,
            )
            out.subagent = model.as_runtime("subagent")
        elif ready_sub is not None:
            out.notes.append(f"endpoint {sub_ref.endpoint.name}: no model to serve as the subagent")
    return out


@record(frozen=True)
class Survey:
    """One endpoint as ``rune council endpoints`` shows it: what a council would seat."""

    name: str
    base_url: str
    key: str  # where the key comes from, never the key
    source: str
    fetched_at: str | None
    ranked: list[ModelChoice]
    left_out: list[str]
    notes: list[str]


async def survey(setup: EndpointSetup, rune_dir: RuneDir, env: Mapping[str, str]) -> list[Survey]:
    """Discovery and ranking for every endpoint, without asking any model anything."""
    surveys = []
    for spec in setup.endpoints:
        ready, notes = await _prepare(spec, rune_dir, env, setup.refresh)
        if ready is None:
            surveys.append(Survey(spec.name, spec.base_url, "missing", "none", None, [], [], notes))
            continue
        try:
            ranked = {c.model for c in ready.ranked}
            found = ready.discovery
            key = ready.client.key_source or "none"
            left_out = [m for m in dict.fromkeys(found.models) if m not in ranked]
            surveys.append(
                Survey(
                    spec.name,
                    spec.base_url,
                    key,
                    _SOURCE_WORDS[found.source],
                    found.fetched_at,
                    ready.ranked,
                    left_out,
                    notes,
                )
            )
        finally:
            await ready.client.aclose()
    return surveys
