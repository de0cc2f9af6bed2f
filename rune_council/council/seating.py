"""SEAT: who may sit on this council — detected CLIs, endpoint models, the caller's voices and
the subagent that takes any slot no voice could serve.

The subagent precedence lives here, once, so the library and every door agree on it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from typing import TYPE_CHECKING

from ..core.contract import DetectedRuntime, RuntimeReport
from ..core.errors import RequestError
from ..core.made import made
from ..core.paths import RuneDir
from ..core.records import record
from ..core.runtime import Runtime
from .lifecycle import now
from .options import CouncilOptions

if TYPE_CHECKING:
    from ..config import CouncilConfig
    from ..endpoints import Assembly, EndpointSetup
    from ..runtimes.subagent import SubagentFn


def as_runtime(
    given: SubagentFn | Runtime, *, name: str, family: str = "unknown", confirmed: bool = False
) -> Runtime:
    if isinstance(given, Runtime):
        return given
    from ..runtimes.subagent import FunctionRuntime

    return FunctionRuntime(
        fn=given,
        name=name,
        model_family=family,
        family_confidence="confirmed" if confirmed and family != "unknown" else "unknown",
    )


def chosen_subagent(options: CouncilOptions, config: CouncilConfig) -> Runtime | None:
    """The subagent before endpoints are looked at; None leaves the slot to an endpoint model.

    First that applies wins:
      1. the caller's ``subagent`` (runtime or callable) or ``subagent_command``;
      2. a subagent model the caller put in ``endpoints`` (the endpoint takes it: None);
      3. ``[subagent] command`` in council.toml;
      4. ``[subagent] endpoint`` in council.toml (through the endpoint setup: None).
    A command's family is ``subagent_family``, else ``[subagent] family``, else unknown.
    """
    if options.subagent is not None and options.subagent_command is not None:
        raise RequestError("give a subagent or a subagent command, not both")
    confirmed = options.subagent_family_confirmed
    if options.subagent is not None:
        family = options.subagent_family or "unknown"
        return as_runtime(options.subagent, name="internal", family=family, confirmed=confirmed)
    command = options.subagent_command
    if command is None and (options.endpoints is None or options.endpoints.subagent is None):
        command = config.subagent.command
    if command is None:
        return None
    family = options.subagent_family or config.subagent.family or "unknown"
    # Loaded only for a council that has a subagent command.
    from ..runtimes.subagent import CommandRuntime

    return CommandRuntime.from_command_line(
        command,
        model_family=family,
        family_confidence="confirmed" if confirmed and family != "unknown" else "unknown",
    )


def _endpoint_setup(
    options: CouncilOptions,
    subagent: Runtime | None,
    where: RuneDir,
    env: Mapping[str, str],
    config: CouncilConfig,
) -> EndpointSetup | None:
    """The endpoints this run draws on, with the subagent model only if nothing else took it."""
    from ..endpoints import load_setup

    setup = options.endpoints
    if setup is None:
        if options.runtimes is not None:
            return None  # caller-supplied voices replace the configured ones, endpoints too
        setup = load_setup(where, env, config=config)
    elif subagent is None and setup.subagent is None:
        configured = load_setup(where, env, config=config).subagent
        if configured is not None:
            setup = dataclasses.replace(setup, subagent=configured)
    if subagent is not None and setup.subagent is not None:
        setup = dataclasses.replace(setup, subagent=None)
    return setup


async def external_recipients(
    options: CouncilOptions, where: RuneDir, env: Mapping[str, str], config: CouncilConfig
) -> list[str]:
    """Who would be sent this council's prompts once consent is given: the external CLIs
    found and every endpoint the run draws on. What a consent question must name; nothing
    is sent to find out (endpoints are read from the setup, not asked)."""
    from ..discovery.assembly import assemble_clis

    names: list[str] = []
    if options.runtimes is None:
        found = await assemble_clis(
            where, env=env, refresh=options.refresh, allow_external=True, config=config
        )
        names += [r.name for r in found.runtimes]
    setup = _endpoint_setup(options, chosen_subagent(options, config), where, env, config)
    if setup is not None:
        specs = [*setup.endpoints, *([setup.subagent.endpoint] if setup.subagent else [])]
        for spec in specs:
            name = f"endpoint {spec.name} ({spec.base_url})"
            if name not in names:
                names.append(name)
    return names


def supplied(runtimes: Sequence[Runtime]) -> list[DetectedRuntime]:
    """Report entries for voices the caller brought itself."""
    return [
        DetectedRuntime(
            runtime=r.name,
            status="available",
            model_family=r.model_family,
            family_confidence=r.family_confidence,
            detail="supplied by the caller",
        )
        for r in runtimes
    ]


@record
class Seating:
    """Everything that may take a seat, and what the run file says about how it was found."""

    available: list[Runtime]
    subagent: Runtime | None
    report: RuntimeReport
    notes: list[str] = field(default_factory=list)
    http: Assembly | None = None

    @property
    def by_name(self) -> dict[str, Runtime]:
        found: dict[str, Runtime] = {r.name: r for r in self.available}
        if self.subagent is not None:
            found.setdefault(self.subagent.name, self.subagent)
        return found

    def rewrapped(self, wrap: Callable[[Runtime], Runtime]) -> Seating:
        """The same seats with every runtime wrapped once: a runtime that is both a voice
        and the subagent stays one object, so dispatch still tells them apart."""
        done: dict[int, Runtime] = {}

        def once(runtime: Runtime) -> Runtime:
            if id(runtime) not in done:
                done[id(runtime)] = wrap(runtime)
            return done[id(runtime)]

        subagent = once(self.subagent) if self.subagent is not None else None
        return dataclasses.replace(
            self, available=[once(r) for r in self.available], subagent=subagent
        )

    async def aclose(self) -> None:
        if self.http is not None:
            await self.http.aclose()


async def seat(
    options: CouncilOptions, where: RuneDir, env: Mapping[str, str], config: CouncilConfig
) -> Seating:
    from ..discovery.assembly import assemble_clis

    subagent = chosen_subagent(options, config)
    consent: str | None = None
    refused: str | None = None
    notes: list[str] = []
    if options.runtimes is None:
        # Detection, user-defined runtimes and the consent gate for external CLIs.
        clis = await assemble_clis(
            where,
            env=env,
            refresh=options.refresh,
            allow_external=options.allow_external,
            config=config,
        )
        available: list[Runtime] = list(clis.runtimes)
        detected, checked_at = list(clis.detected), clis.checked_at
        # What an untrusted project file asked for and did not get, then detection's notes.
        consent, notes = clis.consent.describe(), [*config.notes, *clis.notes]
        # Endpoint voices are external dispatch too: the CLIs' consent covers them.
        refused = None if clis.consent.allowed else clis.consent.describe()
    else:
        available = list(options.runtimes)
        detected, checked_at = supplied(available), now()
    extra = list(options.extra_runtimes)
    names = [r.name for r in [*available, *extra]]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if extra and repeated:
        raise RequestError(
            f"runtime name given twice: {', '.join(repeated)}; an extra runtime needs a name "
            "no other seated runtime has"
        )
    available += extra
    detected += supplied(extra)

    http: Assembly | None = None
    setup = _endpoint_setup(options, subagent, where, env, config)
    if setup is not None and (setup.endpoints or setup.subagent):
        from ..endpoints import assemble

        backoff = options.limits.backoff if options.limits is not None else None
        http = await assemble(setup, where, env, refused=refused, backoff=backoff)
        available += http.runtimes
        detected += http.detected
        notes += http.notes
        if subagent is None:
            subagent = http.subagent
    seating = Seating(
        available=available,
        subagent=subagent,
        report=made(RuntimeReport, detected=detected, checked_at=checked_at, consent=consent),
        notes=notes,
        http=http,
    )
    # Every call of every seat waits for its runtime's shared slot.
    return seating.rewrapped(options.limits.wrap) if options.limits is not None else seating
