"""The council, start to finish: seat -> plan -> skeleton -> execute -> judge -> deliberate ->
finish.

Each step is one short function below; the stages they call are plain functions, and every
transition is written to the run file through ``RunLog``.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .. import runlock
from ..core.contract import CouncilResult, Orchestrator, PartialCouncil, PerspectiveRequest
from ..core.made import made
from ..core.paths import RuneDir
from ..recorder import RunRecorder
from ..runtimes import lineage
from ..stages.allocate import Allocation, Candidate, allocate
from ..stages.dispatch import dispatch, late_voice_ids
from . import templates
from .lifecycle import RunLog, now, run_blocking
from .metering import MeteredRuntime, PromptMeter
from .options import CouncilOptions
from .request import Artifact, claim_run_file, parse_request, read_artifact, refuse_unserved
from .seating import Seating, as_runtime, seat
from .warmup import Warmup

if TYPE_CHECKING:
    from pathlib import Path

    from ..config import CouncilConfig
    from ..core.runtime import Runtime


async def aconvene(
    request: PerspectiveRequest | Mapping[str, Any], options: CouncilOptions | None = None
) -> CouncilResult:
    """Convene a council and return its result; the run file tracks every step.

    Cancelling the task leaves the run file ``cancelled`` with the voices that completed.
    """
    opts = options or CouncilOptions()
    req = parse_request(templates.resolve(request, opts))
    refuse_unserved(req)
    # The id is claimed for the whole run before anything is written: a second council with
    # the same id fails at once (RunIdError) and touches nothing. Every voice it starts is
    # marked as this run's, so whatever outlives an abandoned run can be found and killed.
    path = RuneDir.resolve(opts.rune_dir).run_file(req.id)
    with runlock.claim(path), lineage.run_marker(lineage.new_run_marker()):
        return await _convene(req, opts)


async def _convene(req: PerspectiveRequest, opts: CouncilOptions) -> CouncilResult:
    artifact = read_artifact(req)
    where = RuneDir.resolve(opts.rune_dir)
    run_path = claim_run_file(where, req.id, opts.overwrite)
    env = dict(os.environ) if opts.env is None else dict(opts.env)
    config = _config(opts, where, env)
    req = _with_config_defaults(req, config)
    meter = PromptMeter()
    seats = (await seat(opts, where, env, config)).rewrapped(
        lambda runtime: MeteredRuntime(runtime, meter)
    )
    try:
        plan = _plan(req, seats, artifact)
        run = _skeleton(req, plan, seats, artifact, run_path, opts)
        heartbeat = asyncio.ensure_future(run.heartbeat())
        # The judging step's modules load while the voices think (``warmup``).
        warmup = Warmup().start()
        try:
            await _execute(run, plan, seats)
            run.result.prompt_cost = meter.cost()
            warmup.finish()
            _judge(run, artifact)
            if req.deliberation is not None:
                meter.stage = "deliberation"
                await _deliberate(run, req, artifact, plan, seats, opts, meter)
                run.result.prompt_cost = meter.cost()
            run.complete()
        except asyncio.CancelledError:
            run.abandon("cancelled", "the run was cancelled; completed voices are kept")
            raise
        except BaseException as exc:
            run.abandon("failed", f"the run failed: {type(exc).__name__}: {exc}")
            raise
        finally:
            heartbeat.cancel()
            warmup.finish()
    finally:
        await seats.aclose()
    return run.result


def convene(
    request: PerspectiveRequest | Mapping[str, Any], options: CouncilOptions | None = None
) -> CouncilResult:
    """Blocking form of :func:`aconvene`; safe to call from inside a running event loop."""
    return run_blocking(lambda: aconvene(request, options))


def _config(options: CouncilOptions, where: RuneDir, env: Mapping[str, str]) -> CouncilConfig:
    from ..config import CouncilConfig, load_config

    if options.config is not None:
        return options.config
    if options.runtimes is not None:
        # The caller's voices replace everything council.toml would seat, subagent included.
        return CouncilConfig()
    return load_config(where, env)


def _with_config_defaults(req: PerspectiveRequest, config: CouncilConfig) -> PerspectiveRequest:
    """``[council]`` defaults the request left open, written into it so the run file shows
    what was in effect."""
    deadline = config.council.deadline
    if deadline is None or req.budget.deadline_s is not None:
        return req
    budget = req.budget.model_copy(update={"deadline_s": deadline})
    return req.model_copy(update={"budget": budget})


def _bounded(runtime: Runtime, options: CouncilOptions) -> Runtime:
    """The caller's orchestrator under the shared limits, like every seated runtime."""
    return options.limits.wrap(runtime) if options.limits is not None else runtime


def _candidates(runtimes: Sequence[Runtime]) -> list[Candidate]:
    return [Candidate(r.name, r.source, r.model_family, r.family_confidence) for r in runtimes]


def _plan(req: PerspectiveRequest, seats: Seating, artifact: Artifact) -> Allocation:
    """ALLOCATE: which runtime takes which slot, and the prompt each slot gets."""
    sub = seats.subagent
    sub_candidate = _candidates([sub])[0] if sub is not None else None
    plan = allocate(req, _candidates(seats.available), sub_candidate, artifact.text)
    if req.deliberation is not None:
        from ..deliberation.runner import adapt_prompts

        plan.prompts = adapt_prompts(req, plan.prompts)
    runtimes = seats.by_name
    for voice in plan.voices:
        model = getattr(runtimes.get(voice.runtime), "model", None)
        voice.model = model if isinstance(model, str) else None
    return plan


def _skeleton(
    req: PerspectiveRequest,
    plan: Allocation,
    seats: Seating,
    artifact: Artifact,
    run_path: Path,
    options: CouncilOptions,
) -> RunLog:
    """The first write of the run file: every slot queued, before anything is dispatched."""
    started = now()
    result = made(
        CouncilResult,
        id=req.id,
        question=req.question,
        mode=req.mode,
        voices_requested=plan.n_effective,
        voices=plan.voices,
        runtime_report=seats.report,
        notes=[*options.notes, *plan.notes, *seats.notes],
        request=req,
        artifact_text=artifact.text,
        orchestrator=made(
            Orchestrator,
            pid=os.getpid(),
            host=socket.gethostname(),
            started_at=started,
            heartbeat_at=started,
            voice_marker=lineage.current_run_marker(),
        ),
        started_at=started,
        run_file=str(run_path),
    )
    run = RunLog(result, RunRecorder(run_path), options.on_event)
    run.write()
    return run


async def _execute(run: RunLog, plan: Allocation, seats: Seating) -> None:
    """DISPATCH/DEGRADE: every slot asked in parallel, failures falling to the next candidate."""
    run.emit("council.dispatched", detail=f"{len(plan.voices)} slot(s)")
    await dispatch(
        plan.voices,
        plan.prompts,
        seats.by_name,
        seats.subagent,
        run.result.request.budget,
        lambda voice, detail: run.emit("voice.status", voice, detail),
        prefer=run.result.request.diversity.prefer_model_families,
    )
    late = late_voice_ids(plan.voices)
    deadline = run.result.request.budget.deadline_s
    if late and deadline is not None:
        detail = (
            f"the {deadline:g} s deadline passed with two confirmed families in: "
            f"{', '.join(late)} stopped and left out of the verdict"
        )
        run.result.partial = PartialCouncil(deadline_s=deadline, late_voice_ids=late, detail=detail)
        run.result.notes.append(f"partial council: {detail}")


def _judge(run: RunLog, artifact: Artifact) -> None:
    """GATE -> NORMALIZE -> ARBITRATE on the dispatched voices."""
    from ..stages.verdict import reach_verdict  # loaded while the voices thought (warmup)

    notes = reach_verdict(
        run.result,
        artifact.name,
        on_drop=lambda voice, dropped: run.emit("voice.status", voice, dropped.reason),
    )
    run.result.notes.extend(notes)


async def _deliberate(
    run: RunLog,
    req: PerspectiveRequest,
    artifact: Artifact,
    plan: Allocation,
    seats: Seating,
    options: CouncilOptions,
    meter: PromptMeter,
) -> None:
    """The optional stages after ARBITRATE, reporting through the run's event stream."""
    from ..deliberation.runner import Hooks, deliberate

    given = options.orchestrator
    await deliberate(
        run.result,
        req,
        artifact_name=artifact.name,
        prompts=plan.prompts,
        runtimes=seats.by_name,
        subagent=seats.subagent,
        orchestrator=(
            MeteredRuntime(
                _bounded(as_runtime(given, name="orchestrator"), options), meter, "chair"
            )
            if given is not None
            else None
        ),
        hooks=Hooks(
            emit=lambda detail: run.emit("deliberation.status", detail=detail),
            voice_change=lambda voice, detail: run.emit("voice.status", voice, detail),
        ),
    )
