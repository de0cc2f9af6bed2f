"""The MCP server: tool and resource handlers over the library, on the SDK's low-level Server.

Every tool call passes through one handler that turns any exception into a tool error, so
nothing a host sends can stop the server. The convene tool is a door like the command line:
it parses the call into the one intake (``council.intake``), prepares the council as this
door lets a host's model ask it, and runs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import sys
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

from .. import runs
from ..contract import CouncilResult, TallyReport
from ..council.intake import FLAGS, AskDefaults, Door, prepare
from ..errors import CouncilError, ExitCode, RequestError, exit_code_for
from ..paths import RuneDir
from ..safetext import plain
from .consent import ConnectionConsent, Decision
from .progress import ProgressReporter
from .settings import ServerSettings
from .tools import (
    BY_NAME,
    TOOLS,
    DetectArgs,
    Difference,
    ListRunsArgs,
    RunArgs,
    RunList,
    RunRow,
    TallyArgs,
    ToolSpec,
    VerifyOutcome,
    output_schema,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from mcp.server.context import ServerRequestContext

    from ..council.intake import Ask

    Context = ServerRequestContext[Any, Any]

RUN_URI = "rune://runs/"
CONTRACT_URI = "rune://contract/council-result"
# How long councils get to stop their voices and record "cancelled" when the server is told
# to stop; the voices' own kill path takes well under a second.
STOP_GRACE_S = 10.0
INSTRUCTIONS = (
    "rune-council convenes independent AI voices from different model families on one "
    "question. Call convene for a decision, critique or review that deserves a second "
    "opinion; read the decorrelation stamp first: only MULTI_FAMILY agreement is signal."
)

ToolResult = tuple[str, BaseModel]
# What a tool gives back beyond its text and structured part (the runs a chain wrote).
Links = list[types.ResourceLink]


def for_display(text: str) -> str:
    # A host may print tool text on a terminal; the structured part keeps the raw text.
    return plain(text)


def error_result(exc: BaseException) -> types.CallToolResult:
    """The CLI's one-line message, with the class and the exit code the CLI would use."""
    code = exit_code_for(exc)
    if isinstance(exc, CouncilError):
        message = str(exc)
    else:
        what = "I/O error" if code == ExitCode.IO_ERROR else "internal error"
        message = f"{what}: {type(exc).__name__}: {exc}"
    text = f"rune council: {message} [{type(exc).__name__}, CLI exit code {int(code)}]"
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=for_display(text))], is_error=True
    )


class CouncilServer:
    """One server per connection (stdio serves exactly one)."""

    def __init__(self, settings: ServerSettings) -> None:
        from importlib.metadata import version

        self.settings = settings
        self.where = RuneDir.resolve(settings.rune_dir)
        self.consent = ConnectionConsent(settings, self.where)
        # Who asks through this door: a host's model, not the operator. It may name a file
        # only inside the folder the server was started in, and never grant consent or run
        # a program; what the operator started the server with holds for every council.
        self.door = Door(
            name="this MCP server",
            rune_dir=self.where.root,
            artifact_root=settings.workdir,
            trusted_caller=False,
            env=settings.env,
            defaults=AskDefaults(
                subagent_cmd=settings.subagent_cmd,
                subagent_family=settings.subagent_family,
                yes=True if settings.yes else None,
            ),
        )
        self._councils: set[asyncio.Future[CouncilResult]] = set()
        self._stopping: asyncio.Future[None] | None = None
        # convene answers with more than these (see _convene).
        self._tools: dict[str, Callable[[Context, Any], Awaitable[ToolResult]]] = {
            "detect": self._detect,
            "list_runs": self._list_runs,
            "show_run": self._show_run,
            "verify_run": self._verify_run,
            "tally": self._tally,
        }
        self.server: Server[Any] = Server(
            "rune-council",
            version=version("rune-council"),
            instructions=INSTRUCTIONS,
            on_list_tools=self._handle_list_tools,
            on_call_tool=self._handle_call_tool,
            on_list_resources=self._handle_list_resources,
            on_list_resource_templates=self._handle_list_templates,
            on_read_resource=self._handle_read_resource,
        )

    # ------------------------------------------------------------------ tools

    async def _handle_list_tools(
        self, _ctx: Context, _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[_tool(spec) for spec in TOOLS])

    async def _handle_call_tool(
        self, ctx: Context, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        name = params.name
        links: Links = []
        try:
            spec = BY_NAME.get(name)
            if spec is None:
                raise RequestError(f"unknown tool {name!r}; tools: {', '.join(BY_NAME)}")
            args = spec.parse(params.arguments or {})
            if name == "convene":
                text, structured, links = await self._convene(ctx, *args)
            else:
                text, structured = await self._tools[name](ctx, args)
        except Exception as exc:  # every failure is a tool error, never a crash
            return error_result(exc)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=for_display(text)), *links],
            structured_content=structured.model_dump(mode="json"),
            is_error=False,
        )

    async def _convene(
        self, ctx: Context, ask: Ask, as_flags: bool
    ) -> tuple[str, BaseModel, Links]:
        from ..deliberation.render import render_deliberation
        from ..render import render

        # A call that came as a /rune line hears about its mistakes as flags, as typed.
        door = dataclasses.replace(self.door, spelling=FLAGS) if as_flags else self.door
        prepared = prepare(ask, door)
        decision = await self.consent.decide(
            ctx.session, ctx.request_id, undecided=prepared.consent_undecided
        )
        prepared = prepared.with_consent(decision.allow)
        planned = prepared.runs()
        reporter = ProgressReporter(ctx.session.report_progress, [run_id for _, run_id in planned])

        def on_event(result: CouncilResult, event: Any) -> None:
            _record_consent(result, decision)
            reporter.on_event(result, event)

        task: asyncio.Future[CouncilResult] = asyncio.ensure_future(
            prepared.with_options(on_event=on_event).aconvene()
        )
        self._councils.add(task)
        task.add_done_callback(self._councils.discard)
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError:
            # The host cancelled: cancel the council once and let it finish its own
            # clean-up (kill the voices, write the run file as cancelled) before leaving.
            task.cancel()
            with anyio.CancelScope(shield=True), contextlib.suppress(BaseException):
                await task
            reporter.stop()
            raise
        except BaseException:
            reporter.stop()
            raise
        _record_consent(result, decision)
        await reporter.flush()
        # What the intake noted (a capped n) is in the result's own notes, rendered here.
        text = render(result) + render_deliberation(result)
        if prepared.chain is not None:
            text += f"\nChain {prepared.chain}, each run a resource:\n" + "".join(
                f"- {run_id} ({template}): {RUN_URI}{run_id}\n" for template, run_id in planned
            )
        if result.voices_valid == 0:
            text += (
                "\nNo voice produced a usable answer; the Notes say why. The server operator "
                "can add voices (rune council mcp --yes, --subagent-cmd, or endpoints).\n"
            )
        links = (
            [
                types.ResourceLink(
                    name=f"run-{run_id}",
                    title=f"Council run {run_id} ({template})",
                    uri=RUN_URI + run_id,
                    mime_type="application/json",
                )
                for template, run_id in planned
            ]
            if prepared.chain is not None
            else []
        )
        return text, result, links

    async def _detect(self, _ctx: Context, args: DetectArgs) -> ToolResult:
        from ..discovery.assembly import detect_configured

        report, cached = await detect_configured(
            self.where, env=self.settings.env, refresh=args.refresh
        )
        lines = [f"AI CLIs ({'cached today' if cached else 'probed now'}, {report.checked_at}):"]
        for d in report.detected:
            lines.append(
                f"- {d.runtime}: {d.status}, family {d.model_family} ({d.family_confidence})"
                + (f", {d.version}" if d.version else "")
                + (f" — {d.detail}" if d.detail else "")
            )
        if not any(d.status == "available" for d in report.detected):
            lines.append("No AI CLI is available: councils run on subagents only.")
        return "\n".join(lines), report

    async def _list_runs(self, _ctx: Context, args: ListRunsArgs) -> ToolResult:
        from ..runs import list_runs

        rows = [
            RunRow(
                id=r.run_id,
                question=r.question,
                status=r.status,
                decorrelation=r.decorrelation,
                partial=r.partial,
                voices_valid=r.voices_valid,
                voices_requested=r.voices_requested,
                started_at=r.started_at or None,
                duration_s=r.duration_s,
                uri=RUN_URI + r.run_id,
                problem=r.problem,
            )
            for r in list_runs(self.where, args.limit)
        ]
        if not rows:
            return f"No runs in {self.where.council_dir}.", RunList(runs=[])
        lines = [
            f"- {r.id}: {r.status}, {r.decorrelation or '-'}{' (partial)' if r.partial else ''}, "
            f"{r.voices_valid}/{r.voices_requested} valid — {r.problem or r.question[:120]}"
            for r in rows
        ]
        return "\n".join(lines), RunList(runs=rows)

    def _load(self, run_id: str) -> CouncilResult:
        from ..runs import load

        return load(self.where.run_file(run_id))

    async def _show_run(self, _ctx: Context, args: RunArgs) -> ToolResult:
        from ..deliberation.render import render_deliberation
        from ..render import render

        result = self._load(args.run_id)
        return render(result) + render_deliberation(result), result

    async def _verify_run(self, _ctx: Context, args: RunArgs) -> ToolResult:
        from ..verify import verify

        result = self._load(args.run_id)
        outcome = verify(result)
        differences = [
            Difference(
                field=d.field, recorded=_jsonable(d.recorded), recomputed=_jsonable(d.recomputed)
            )
            for d in outcome.differences
        ]
        if outcome.reproduced:
            text = (
                f"run {outcome.run_id}: reproduced — GATE, NORMALIZE and ARBITRATE on the "
                f"recorded raw answers give the recorded result ({result.decorrelation})."
            )
        else:
            text = f"run {outcome.run_id}: NOT reproduced — {len(differences)} field(s) differ:\n"
            text += "\n".join(f"- {d.field}" for d in differences)
        return text, VerifyOutcome(
            run=outcome.run_id,
            reproduced=outcome.reproduced,
            checked=outcome.checked,
            differences=differences,
        )

    async def _tally(self, _ctx: Context, args: TallyArgs) -> ToolResult:
        from ..deliberation.tally import tally_text

        report = tally_text(args.transcript)
        return _tally_summary(report), report

    # ------------------------------------------------------------------ resources

    async def _handle_list_resources(
        self, _ctx: Context, _params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        from ..runs import list_runs

        resources = [
            types.Resource(
                uri=CONTRACT_URI,
                name="council-result-schema",
                title="Voice contract: the CouncilResult JSON Schema",
                description="The JSON Schema every run file follows (contract version in $id).",
                mime_type="application/schema+json",
            )
        ]
        for row in list_runs(self.where):
            if row.problem is not None:
                continue
            resources.append(
                types.Resource(
                    uri=RUN_URI + row.run_id,
                    name=f"run-{row.run_id}",
                    title=f"Council run {row.run_id} ({row.status})",
                    description=for_display(row.question[:300]),
                    mime_type="application/json",
                )
            )
        return types.ListResourcesResult(resources=resources)

    async def _handle_list_templates(
        self, _ctx: Context, _params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        template = types.ResourceTemplate(
            uri_template=RUN_URI + "{id}",
            name="council-run",
            title="A council run file by id",
            mime_type="application/json",
        )
        return types.ListResourceTemplatesResult(resource_templates=[template])

    async def _handle_read_resource(
        self, _ctx: Context, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        try:
            text, mime = self._read(uri)
        except CouncilError as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
        contents = types.TextResourceContents(uri=params.uri, mime_type=mime, text=text)
        return types.ReadResourceResult(contents=[contents])

    def _read(self, uri: str) -> tuple[str, str]:
        if uri == CONTRACT_URI:
            from ..schema import render_schema

            return render_schema("council-result"), "application/schema+json"
        if not uri.startswith(RUN_URI):
            raise RequestError(f"unknown resource {uri!r}; runs are {RUN_URI}<id>")
        path = self.where.run_file(unquote(uri.removeprefix(RUN_URI)))
        # read_bytes refuses a symlinked run file on open, as every reader of run files does.
        return runs.read_bytes(path).decode("utf-8", errors="replace"), "application/json"

    # ------------------------------------------------------------------ running

    async def run_stdio(self) -> None:
        from mcp.server.stdio import stdio_server

        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, self._on_signal, signum)
        async with stdio_server() as (read, write):
            await self.server.run(read, write, self.server.create_initialization_options())

    def _on_signal(self, signum: int) -> None:
        self._stopping = asyncio.ensure_future(self._stop(signum))

    async def _stop(self, signum: int) -> None:
        """A host that quits signals its server: cancel the councils still running (their
        voices are killed and their run files say ``cancelled``), then leave at once."""
        for task in list(self._councils):
            task.cancel()
        if self._councils:
            await asyncio.wait(self._councils, timeout=STOP_GRACE_S)
        sys.stdout.flush()
        # Not a normal exit: the SDK reads stdin on a worker thread that nothing can
        # interrupt, so one would wait until the host closed the pipe.
        os._exit(128 + signum)


def _tool(spec: ToolSpec) -> types.Tool:
    return types.Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=spec.input_schema(),
        output_schema=output_schema(spec),
        annotations=types.ToolAnnotations(
            title=spec.title,
            read_only_hint=spec.name != "convene",
            open_world_hint=spec.name == "convene",
        ),
    )


def _record_consent(result: CouncilResult, decision: Decision) -> None:
    # The library records "the caller" as the source of an explicit decision; this door
    # knows better (the operator's --yes, or the user's answer at the host's prompt), and
    # every later write of the run file carries it.
    if decision.recorded_as is not None:
        result.runtime_report.consent = decision.recorded_as


def _tally_summary(report: TallyReport) -> str:
    """The tally in a few lines for a host model; the structured part has every detail."""
    lines = [f"valid: {'yes' if report.valid else f'no, {len(report.errors)} error(s)'}"]
    if report.scores:
        scores = ", ".join(f"{s.label} {s.score:g}" for s in report.scores)
        lines.append(f"scores (Borda x conf): {scores}")
    lines.append(f"winner: {report.winner or 'none (no ballot, a tie, or all blocked)'}")
    consensus = report.consensus
    if consensus.w is not None:
        lines.append(f"consensus: W = {consensus.w:.4f} ({consensus.label})")
    if report.dissenters:
        lines.append(f"dissenting rankers: {', '.join(report.dissenters)}")
    lines += [f"blocked {b.label}: {b.reason}" for b in report.blocked]
    lines += [f"line {e.line}: {e.reason}" for e in report.errors]
    lines += [f"dropped line {d.line}: {d.reason}" for d in report.dropped]
    return "\n".join(lines)


def _jsonable(value: Any) -> Any:
    try:
        return json.loads(json.dumps(value, default=repr))
    except (TypeError, ValueError):
        return repr(value)


async def serve(settings: ServerSettings) -> None:
    await CouncilServer(settings).run_stdio()
