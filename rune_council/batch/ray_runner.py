"""Councils as Ray tasks: the same schedule as a local batch, the councils elsewhere.

The driver (this process) keeps everything that must stay consistent: it reads the items,
decides from its own run files what runs (``resume``), holds each run id's lock while its
task runs, and writes the run files and the row when the task comes back. A task gets the
request with its artifact inline (nothing is read from the driver's disk on a node), the
options the intake prepared and the chain if the item asks one, runs the council (or each
step) in a private directory on its node, and returns the finished run files' bytes:
nothing assumes a disk shared with the driver.

Bounds: ``--concurrency`` caps the tasks in flight, as it caps local councils. Every capped
runtime is also a Ray resource ``rune:<name>``, and a council task asks for one unit of each
capped runtime it may seat, so a node never runs more councils using claude than it
declares. A local cluster started here declares the caps itself; nodes of a cluster named by
address declare them when they start (``ray start --resources '{"rune:claude": 4}'``). A cap
the cluster does not declare is still enforced inside each worker process, and said so.

Ray is imported only here, and only when ``--ray`` is given.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .. import runlock
from ..core import safejson
from ..core.contract import CouncilResult
from ..core.errors import CouncilError, RequestError, RunFileError
from ..core.paths import RuneDir
from ..council import CouncilOptions, aconvene
from ..council.chain import aconvene_chain
from ..council.request import claim_run_file
from ..recorder import RunRecorder, artifact_sidecar
from ..runs import MAX_RUN_FILE_BYTES, load
from ..runtimes.limits import Limits, limit_key
from ..runtimes.scratch import scratch_root
from .items import Item
from .scheduler import BatchOptions, CouncilFailed

RESOURCE_PREFIX = "rune:"
# A council mostly waits on its voices: a tenth of a CPU each lets a 2-CPU node hold
# twenty, and --concurrency is the real bound.
TASK_CPUS = 0.1
# What a task reads from its node and the driver takes back: the cap of every run file read.
RUN_FILE_CAP = MAX_RUN_FILE_BYTES


def _node_rune_dir() -> Path:
    # One directory per node user, so detection is cached across the tasks a node runs; in
    # the user's private scratch root, since it holds the questions, artifacts and answers
    # (a name of this shape in the shared temporary root could be another user's first).
    return Path(scratch_root().path) / f"rune-council-ray-{os.getuid()}" / ".rune"


def council_task(
    request: dict[str, Any],
    options: CouncilOptions,
    caps: Mapping[str, int],
    chain: str | None = None,
    run_ids: tuple[str, ...] = (),
) -> tuple[dict[str, bytes], str | None]:
    """Runs on a Ray worker: one council (or a chain's steps), the bytes of each run file
    it wrote among ``run_ids``, and the failure, if any."""
    where = _node_rune_dir()
    opts = dataclasses.replace(
        options, rune_dir=where, limits=Limits(dict(caps)), overwrite=True, on_event=None
    )
    node = RuneDir.resolve(where)
    error: str | None = None
    try:
        if chain is not None:
            asyncio.run(aconvene_chain(request, opts, chain))
        else:
            asyncio.run(aconvene(request, opts))
    except CouncilError as exc:
        error = str(exc)
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
    files: dict[str, bytes] = {}
    for run_id in run_ids or (str(request["id"]),):
        run_file = node.run_file(run_id)
        try:
            # The one reader of run files: capped, and a symlink is refused, not followed;
            # the artifact is put back from its sidecar, which goes with the run file.
            if os.path.lexists(run_file):
                files[run_id] = load(run_file).model_dump_json().encode("utf-8")
        except RunFileError as exc:
            return {}, str(exc)
        finally:
            run_file.unlink(missing_ok=True)
            artifact_sidecar(run_file).unlink(missing_ok=True)
    return files, error


async def capped_runtimes(options: BatchOptions, limits: Limits) -> dict[str, int]:
    """The caps of the runtimes a council may seat, as far as the driver can know them: the
    batch's runtimes, else the CLIs detected here; plus every cap the user named."""
    caps = dict(limits.caps)
    runtimes = list(options.runtimes or [])
    if options.runtimes is None:
        runtimes += await _detected(options)
    for runtime in runtimes:
        cap = limits.cap(runtime)
        if cap is not None:
            caps[limit_key(runtime)] = cap
    return caps


async def _detected(options: BatchOptions) -> list[Any]:
    from ..discovery.assembly import assemble_clis

    door = options.door
    env = dict(os.environ) if door.env is None else dict(door.env)
    clis = await assemble_clis(
        door.where, env=env, allow_external=door.defaults.yes, config=door.config
    )
    return list(clis.runtimes)


class RayConvener:
    """Runs each item's council as a Ray task; called like the local convener."""

    def __init__(self, options: BatchOptions, caps: Mapping[str, int]) -> None:
        try:
            import ray
        except ImportError:
            raise RequestError(
                "--ray needs Ray, which is not installed: pip install 'rune-council[ray]'"
            ) from None
        self._ray = ray
        self.caps = dict(caps)
        self.where = options.door.where
        self.runtimes = options.runtimes
        self.started_here = False
        address = options.ray_address or os.environ.get("RAY_ADDRESS") or None
        if not ray.is_initialized():
            if address:
                ray.init(address=address, log_to_driver=False)
            else:
                ray.init(
                    resources={RESOURCE_PREFIX + k: float(v) for k, v in self.caps.items()},
                    include_dashboard=False,
                    log_to_driver=False,
                    _node_ip_address="127.0.0.1",
                )
            self.started_here = True
        declared = ray.cluster_resources()  # type: ignore[no-untyped-call]
        self.notes = [
            f"the Ray cluster declares no {RESOURCE_PREFIX}{k} resource: its cap of {v} holds "
            "within each worker process only"
            for k, v in self.caps.items()
            if RESOURCE_PREFIX + k not in declared
        ]
        wants = {RESOURCE_PREFIX + k: 1.0 for k in self.caps if RESOURCE_PREFIX + k in declared}
        self._remote = ray.remote(council_task).options(
            num_cpus=TASK_CPUS, resources=wants or None, max_retries=0
        )

    def _options(self, item: Item) -> CouncilOptions:
        # What a task carries: no shared limits (each worker builds its own from the caps)
        # and no callback into this process.
        changes: dict[str, Any] = {"limits": None, "on_event": None}
        if self.runtimes is not None:
            changes.update(runtimes=self.runtimes, endpoints=None)
        return dataclasses.replace(item.prepared.options, **changes)

    async def __call__(self, item: Item, overwrite: bool) -> CouncilResult:
        request = item.full_request()
        run_ids = tuple(run_id for _, run_id in item.prepared.runs())
        paths = {run_id: self.where.run_file(run_id) for run_id in run_ids}
        # The driver holds every id the item writes for the whole task: one council per
        # item at a time, here and against any other batch or council on this machine.
        with contextlib.ExitStack() as held:
            for run_id, path in paths.items():
                held.enter_context(runlock.claim(path))
                claim_run_file(self.where, run_id, overwrite)
            ref = self._remote.remote(
                request, self._options(item), self.caps, item.prepared.chain, run_ids
            )
            try:
                files, error = await ref
            except asyncio.CancelledError:
                # Interrupts the task: its council ends cancelled and kills its voices.
                self._ray.cancel(ref)
                raise
            if item.id not in files:
                raise CouncilFailed(error or "the task sent no run file back")
            results = {
                run_id: CouncilResult.model_validate(
                    safejson.loads(data, max_bytes=RUN_FILE_CAP, what="run file from a Ray task")
                )
                for run_id, data in files.items()
            }
            for run_id, result in results.items():
                result.run_file = str(paths[run_id])
                RunRecorder(paths[run_id]).write(result)
        if error is not None:
            raise CouncilFailed(error)
        return results[item.id]

    def close(self) -> None:
        if self.started_here:
            self._ray.shutdown()
