"""The orchestrator: wires the six stages and records every transition in the run file.

Stages are plain functions; this module owns the order, the run-file recorder and the
life of a run (heartbeat, cancellation, the final write).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import secrets
import socket
import threading
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from . import runlock
from .config import CouncilConfig, load_config
from .contract import (
    CouncilResult,
    DetectedRuntime,
    DroppedVoice,
    Orchestrator,
    PerspectiveRequest,
    RunEvent,
    RuntimeReport,
    Voice,
    VoiceProcess,
)
from .errors import NotImplementedModeError, RequestError
from .paths import RuneDir
from .recorder import RunRecorder
from .runtime import Runtime
from .runtimes import lineage
from .runtimes.assembly import assemble_clis
from .runtimes.subagent import FunctionRuntime, SubagentFn
from .safefile import read_capped
from .stages.allocate import Candidate, SlotPrompts, allocate
from .stages.dispatch import dispatch
from .stages.judge import judge

if TYPE_CHECKING:
    from .endpoints import Assembly, EndpointSetup

HEARTBEAT_S = 5.0
MAX_EVENTS = 400
ARTIFACT_READ_CAP = 2_000_000

T = TypeVar("T")

OnEvent = Callable[[CouncilResult, RunEvent], None]


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


def new_run_id() -> str:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{secrets.token_hex(3)}"


def parse_request(request: PerspectiveRequest | Mapping[str, Any]) -> PerspectiveRequest:
    if isinstance(request, PerspectiveRequest):
        req = request
    else:
        try:
            req = PerspectiveRequest.model_validate(dict(request))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'request'}: {e['msg']}"
                for e in exc.errors()
            )
            raise RequestError(f"malformed PerspectiveRequest: {problems}") from exc
    if req.deliberation is not None and req.deliberation.method is not None:
        from .deliberation.registry import lookup

        lookup(req.deliberation.method)  # an unknown method fails before anything runs
    return req


def read_artifact(request: PerspectiveRequest) -> tuple[str | None, str | None]:
    """(name, text) of the artifact as the voices will see it."""
    artifact = request.artifact
    if artifact is None:
        return None, None
    if artifact.text is not None:
        return artifact.name, artifact.text
    assert artifact.path is not None
    path = Path(artifact.path)
    try:
        # A FIFO, a device or a huge sparse file is refused or capped before it is read.
        raw, _cut = read_capped(path, ARTIFACT_READ_CAP)
    except OSError as exc:
        raise RequestError(f"cannot read artifact {artifact.path}: {exc.strerror}") from exc
    return artifact.shown_name, raw.decode("utf-8", errors="replace")


class _Run:
    """Mutable state of one run plus the single place that writes it."""

    def __init__(self, result: CouncilResult, recorder: RunRecorder, on_event: OnEvent | None):
        self.result = result
        self.recorder = recorder
        self.on_event = on_event
        self._seq = 0

    def emit(self, kind: str, voice: Voice | None = None, detail: str = "") -> None:
        self._seq += 1
        event = RunEvent(
            seq=self._seq,
            at=now(),
            kind=kind,  # type: ignore[arg-type]
            voice_id=voice.id if voice else None,
            status=voice.status if voice else self.result.status,
            detail=detail[:500],
        )
        self.result.events.append(event)
        if len(self.result.events) > MAX_EVENTS:
            del self.result.events[: len(self.result.events) - MAX_EVENTS]
        self.write()
        if self.on_event is not None:
            self.on_event(self.result, event)

    def write(self) -> None:
        orch = self.result.orchestrator
        if orch is not None:
            orch.heartbeat_at = now()
            if orch.voice_marker is not None:
                orch.voice_processes = [
                    VoiceProcess(pid=pid, started=started)
                    for pid, started in lineage.live_voices(orch.voice_marker)
                ]
        self.recorder.write(self.result)


def _candidates(
    runtimes: Sequence[Runtime],
) -> list[Candidate]:
    return [Candidate(r.name, r.source, r.model_family, r.family_confidence) for r in runtimes]


async def _heartbeat(run: _Run) -> None:
    while True:
        await asyncio.sleep(HEARTBEAT_S)
        run.write()


def _as_subagent(
    subagent: SubagentFn | Runtime | None, family: str, confirmed: bool
) -> Runtime | None:
    if subagent is None:
        return None
    if isinstance(subagent, Runtime):
        return subagent
    return FunctionRuntime(
        fn=subagent,
        model_family=family,
        family_confidence="confirmed" if confirmed and family != "unknown" else "unknown",
    )


async def aconvene(
    request: PerspectiveRequest | Mapping[str, Any], **options: Any
) -> CouncilResult:
    """Convene a council (options as for ``_aconvene`` below) holding its run id.

    The id is claimed for the whole run before anything is written: a second council with
    the same id fails at once (RunIdError) and touches nothing. Every voice it starts is
    marked as this run's, so whatever outlives an abandoned run can be found and killed.
    """
    req = parse_request(request)
    if req.mode == "generate":
        raise NotImplementedModeError(
            "NOT_IMPLEMENTED: mode 'generate' is declared by the contract but not served; "
            "use critique, review or judge"
        )
    path = RuneDir.resolve(options.get("rune_dir")).run_file(req.id)
    with runlock.claim(path), lineage.run_marker(lineage.new_run_marker()):
        return await _aconvene(req, **options)


async def _aconvene(
    request: PerspectiveRequest | Mapping[str, Any],
    *,
    subagent: SubagentFn | Runtime | None = None,
    subagent_family: str = "unknown",
    subagent_family_confirmed: bool = False,
    runtimes: Sequence[Runtime] | None = None,
    rune_dir: str | os.PathLike[str] | None = None,
    refresh: bool = False,
    env: Mapping[str, str] | None = None,
    on_event: OnEvent | None = None,
    overwrite: bool = False,
    allow_external: bool | None = None,
    endpoints: EndpointSetup | None = None,
    orchestrator: SubagentFn | Runtime | None = None,
    config: CouncilConfig | None = None,
) -> CouncilResult:
    """Convene a council and return its result; the run file tracks every step.

    ``runtimes`` replaces detection with the given voices (custom runtimes, tests).
    ``subagent`` takes any slot that no external runtime can serve or that failed.
    ``allow_external`` grants (or refuses) consent to dispatch detected external CLIs; None
    defers to ``RUNE_COUNCIL_ALLOW_EXTERNAL``, ``council.toml`` or an earlier yes, and without
    any of these the detected CLIs are not used (see ``rune_council.consent``).
    ``endpoints`` adds HTTP endpoint models as voices (default: the endpoints
    ``council.toml`` names, unless ``runtimes`` is given).
    ``orchestrator`` consolidates and writes the verdict when ``request.deliberation`` asks for
    vote / rank stages (default: the runtime that option names, if any).
    ``config`` is the settings of ``council.toml`` (default: ``load_config`` reads them once).
    """
    req = parse_request(request)
    artifact_name, artifact_text = read_artifact(req)
    where = RuneDir.resolve(rune_dir)
    run_path = where.run_file(req.id)
    if run_path.exists() and not overwrite:
        raise RequestError(f"run id {req.id!r} is already used ({run_path}); pick another id")
    parent_env = dict(os.environ) if env is None else dict(env)

    consent: str | None = None
    cli_notes: list[str] = []
    if runtimes is None:
        config = load_config(where, parent_env) if config is None else config
        cli_notes += config.notes  # what an untrusted project file asked for and did not get
        # Detection, user-defined runtimes and the consent gate for external CLIs.
        clis = await assemble_clis(
            where, env=parent_env, refresh=refresh, allow_external=allow_external, config=config
        )
        detected, checked_at = clis.detected, clis.checked_at
        available: list[Runtime] = list(clis.runtimes)
        consent = clis.consent.describe()
        cli_notes += clis.notes
    else:
        available = list(runtimes)
        checked_at = now()
        detected = [
            DetectedRuntime(
                runtime=r.name,
                status="available",
                model_family=r.model_family,
                family_confidence=r.family_confidence,
                detail="supplied by the caller",
            )
            for r in available
        ]

    http: Assembly | None = None
    if endpoints is None and runtimes is None:
        from .endpoints import load_setup

        endpoints = load_setup(where, parent_env, config=config)
    if endpoints is not None and (endpoints.endpoints or endpoints.subagent):
        from .endpoints import assemble

        # Endpoint voices are external dispatch too: the CLIs' consent covers them; voices
        # the caller supplied itself (``runtimes``) are its own decision.
        refused = None if runtimes is not None or clis.consent.allowed else clis.consent.describe()
        http = await assemble(endpoints, where, parent_env, refused=refused)
        available += http.runtimes
        detected = [*detected, *http.detected]
        if subagent is None:
            subagent = http.subagent

    sub = _as_subagent(subagent, subagent_family, subagent_family_confirmed)
    sub_candidate = (
        Candidate(sub.name, sub.source, sub.model_family, sub.family_confidence) if sub else None
    )
    plan = allocate(req, _candidates(available), sub_candidate, artifact_text)
    if req.deliberation is not None:
        from .deliberation.runner import adapt_prompts

        plan.prompts = adapt_prompts(req, plan.prompts)
    runtime_map: dict[str, Runtime] = {r.name: r for r in available}
    if sub is not None:
        runtime_map.setdefault(sub.name, sub)
    for voice in plan.voices:
        model = getattr(runtime_map.get(voice.runtime), "model", None)
        voice.model = model if isinstance(model, str) else None

    started = now()
    result = CouncilResult(
        id=req.id,
        question=req.question,
        mode=req.mode,
        voices_requested=plan.n_effective,
        voices=plan.voices,
        runtime_report=RuntimeReport(detected=detected, checked_at=checked_at, consent=consent),
        notes=list(plan.notes) + cli_notes + (http.notes if http else []),
        request=req,
        artifact_text=artifact_text,
        orchestrator=Orchestrator(
            pid=os.getpid(),
            host=socket.gethostname(),
            started_at=started,
            heartbeat_at=started,
            voice_marker=lineage.current_run_marker(),
        ),
        started_at=started,
        run_file=str(run_path),
    )
    run = _Run(result, RunRecorder(run_path), on_event)
    run.write()  # the skeleton: every slot queued, before anything is dispatched

    heartbeat = asyncio.ensure_future(_heartbeat(run))
    try:
        run.emit("council.dispatched", detail=f"{len(plan.voices)} slot(s)")
        await dispatch(
            plan.voices,
            plan.prompts,
            runtime_map,
            sub,
            req.budget,
            lambda voice, detail: run.emit("voice.status", voice, detail),
            prefer=req.diversity.prefer_model_families,
        )
        _finish(run, req, artifact_name, artifact_text, close=req.deliberation is None)
        if req.deliberation is not None:
            await _deliberate(
                run,
                req,
                artifact_name,
                plan.prompts,
                runtime_map,
                sub,
                orchestrator,
            )
            _close(run)
    except asyncio.CancelledError:
        _abandon(run, "cancelled", "the run was cancelled; completed voices are kept")
        raise
    except BaseException as exc:
        _abandon(run, "failed", f"the run failed: {type(exc).__name__}: {exc}")
        raise
    finally:
        heartbeat.cancel()
        if http is not None:
            await http.aclose()
    return run.result


def _finish(
    run: _Run,
    req: PerspectiveRequest,
    artifact_name: str | None,
    artifact_text: str | None,
    close: bool = True,
) -> None:
    result = run.result
    notes = judge(
        result,
        artifact_name,
        on_drop=lambda voice, dropped: run.emit("voice.status", voice, dropped.reason),
    )
    result.notes.extend(notes)
    if close:
        _close(run)


def _close(run: _Run) -> None:
    from .deliberation.metadata import verdict_metadata

    result = run.result
    result.status = "complete"
    result.finished_at = now()
    result.verdict = verdict_metadata(result)
    run.emit("council.result", detail=f"{result.decorrelation}, {result.voices_valid} valid")


async def _deliberate(
    run: _Run,
    req: PerspectiveRequest,
    artifact_name: str | None,
    prompts: Mapping[str, SlotPrompts],
    runtime_map: Mapping[str, Runtime],
    sub: Runtime | None,
    orchestrator: SubagentFn | Runtime | None,
) -> None:
    """The optional stages after ARBITRATE, reporting through the run's event stream."""
    from .deliberation.runner import Hooks, deliberate

    await deliberate(
        run.result,
        req,
        artifact_name=artifact_name,
        prompts=prompts,
        runtimes=runtime_map,
        subagent=sub,
        orchestrator=orchestrator,
        hooks=Hooks(
            emit=lambda detail: run.emit("deliberation.status", detail=detail),
            voice_change=lambda voice, detail: run.emit("voice.status", voice, detail),
        ),
    )


def _abandon(run: _Run, status: str, note: str) -> None:
    result = run.result
    for voice in result.voices:
        if voice.status in ("queued", "running"):
            voice.status = "dropped"
            voice.dropped_by = "council.dispatch"
            voice.drop_reason = f"run {status} before this voice finished"
            result.voices_dropped.append(
                DroppedVoice(
                    voice_id=voice.id,
                    runtime=voice.runtime,
                    reason=voice.drop_reason,
                    dropped_by="council.dispatch",
                )
            )
    result.status = status  # type: ignore[assignment]
    result.voices_valid = sum(1 for v in result.voices if v.status == "complete")
    result.finished_at = now()
    result.notes.append(note)
    # The original error matters more than a failed last write.
    with contextlib.suppress(Exception):
        from .deliberation.metadata import verdict_metadata

        result.verdict = verdict_metadata(result)
    with contextlib.suppress(Exception):
        run.emit("council.result", detail=note)


def run_blocking(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine to completion from sync code, even inside a running event loop.

    A library caller may already be inside asyncio (a notebook, an async host); there the
    council gets a loop of its own on a worker thread instead of failing.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    box: dict[str, Any] = {}

    def worker() -> None:
        try:
            box["result"] = asyncio.run(make())
        except BaseException as exc:  # handed back to the calling thread
            box["error"] = exc

    thread = threading.Thread(target=worker, name="rune-council")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    result: T = box["result"]
    return result


def convene(request: PerspectiveRequest | Mapping[str, Any], **kwargs: Any) -> CouncilResult:
    """Blocking form of :func:`aconvene`; safe to call from inside a running event loop."""
    return run_blocking(lambda: aconvene(request, **kwargs))
