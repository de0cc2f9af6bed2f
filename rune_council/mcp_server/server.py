"""The MCP server: tool and resource handlers over the library, on the SDK's low-level Server.

Every tool call passes through one handler that turns any exception into a tool error, so
nothing a host sends can stop the server. The convene tool is a door like the command line:
it parses the call into the one intake (``council.intake``), prepares the council as this
door lets a host's model ask it, and runs it. When nothing the operator set up can answer
for a slot, the host's own subagents do, through ``submit_answers`` (see ``subagents``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

from .. import runs
from ..core.contract import CouncilResult, TallyReport
from ..core.errors import CouncilError, ExitCode, RequestError, exit_code_for
from ..core.paths import RuneDir
from ..core.safetext import plain
from ..council.intake import FLAGS, AskDefaults, Door, Prepared, prepare
from .consent import ConnectionConsent, Decision, grant_command
from .progress import ProgressReporter
from .settings import ServerSettings
from .subagents import HostRun, Pending, note_dispatch
from .tools import (
    BY_NAME,
    COUNCIL_TOOLS,
    SUBAGENTS_ONLY,
    TOOLS,
    ConsentNeeded,
    ConveneCall,
    DetectArgs,
    Difference,
    ListRunsArgs,
    RunArgs,
    RunList,
    RunRow,
    SubagentPrompt,
    SubagentWork,
    SubmitArgs,
    TallyArgs,
    ToolSpec,
    VerifyOutcome,
    output_schema,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from mcp.server.context import ServerRequestContext

    Context = ServerRequestContext[Any, Any]

RUN_URI = "rune://runs/"
CONTRACT_URI = "rune://contract/council-result"
# How long councils get to stop their voices and record "cancelled" when the server is told
# to stop; the voices' own kill path takes well under a second.
STOP_GRACE_S = 10.0
INSTRUCTIONS = (
    "rune-council convenes independent AI voices from different model families on one "
    "question. Call convene for a decision, critique or review that deserves a second "
    "opinion; read the decorrelation stamp first: only MULTI_FAMILY agreement is signal. "
    "When convene answers needs_consent, tell the user the command it names (only they can "
    "allow sending the question out); when it answers needs_answers, run each prompt as a "
    "subagent of your own and give the replies to submit_answers."
)

ToolResult = tuple[str, BaseModel]
# What a tool gives back beyond its text and structured part (the runs a chain wrote).
Links = list[types.ResourceLink]


@dataclass
class Reply:
    """A council tool's answer: a verdict, a tool error without one, or the host's work."""

    text: str
    structured: dict[str, Any]
    links: Links = field(default_factory=list)
    is_error: bool = False


@dataclass
class Convening:
    """One convene call's councils, from the call that started them to their result; with
    ``host``, later ``submit_answers`` calls carry them on."""

    prepared: Prepared
    planned: list[tuple[str | None, str]]
    decision: Decision
    task: asyncio.Future[CouncilResult]
    reporter: ProgressReporter
    host: HostRun | None = None


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
        # Councils waiting on the host's subagents, by the run id their prompts carry.
        self._waiting: dict[str, Convening] = {}
        self._stopping: asyncio.Future[None] | None = None
        # convene and submit_answers answer with more than these (see _convene).
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
        try:
            spec = BY_NAME.get(name)
            if spec is None:
                raise RequestError(f"unknown tool {name!r}; tools: {', '.join(BY_NAME)}")
            args = spec.parse(params.arguments or {})
            if name == "convene":
                reply = await self._convene(ctx, args)
            elif name == "submit_answers":
                reply = await self._submit(ctx, args)
            else:
                text, structured = await self._tools[name](ctx, args)
                reply = Reply(text, structured.model_dump(mode="json"))
        except Exception as exc:  # every failure is a tool error, never a crash
            return error_result(exc)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=for_display(reply.text)), *reply.links],
            structured_content=reply.structured,
            is_error=reply.is_error,
        )

    async def _convene(self, ctx: Context, call: ConveneCall) -> Reply:
        # A call that came as a /rune line hears about its mistakes as flags, as typed.
        door = dataclasses.replace(self.door, spelling=FLAGS) if call.as_flags else self.door
        prepared = prepare(call.ask, door)
        decision = await self.consent.decide(
            ctx.session, ctx.request_id, prepared, subagents_only=call.subagents_only
        )
        if decision.needs_consent:
            return self._needs_consent(decision)
        prepared = prepared.with_consent(decision.allow)
        host: HostRun | None = None
        if not _operator_subagent(prepared):
            run_id = prepared.request.id
            if run_id in self._waiting:
                raise RequestError(
                    f"run {run_id} is waiting for subagent answers already (submit_answers); "
                    "give this council another id"
                )
            host = HostRun(run_id)
            prepared = prepared.with_options(subagent=host.runtime())
        planned = prepared.runs()
        reporter = ProgressReporter(ctx.session.report_progress, [run_id for _, run_id in planned])

        def on_event(result: CouncilResult, event: Any) -> None:
            _record_consent(result, decision)
            if host is not None:
                note_dispatch(result, event)
            reporter.on_event(result, event)

        task: asyncio.Future[CouncilResult] = asyncio.ensure_future(
            prepared.with_options(on_event=on_event).aconvene()
        )
        self._councils.add(task)
        task.add_done_callback(self._councils.discard)
        convening = Convening(prepared, planned, decision, task, reporter, host)
        if host is not None:
            self._waiting[host.run_id] = convening
            task.add_done_callback(lambda _: self._release(convening))
        return await self._turn(convening)

    def _release(self, convening: Convening) -> None:
        # The run is over: its tokens expire, and no later call can reach it.
        assert convening.host is not None
        convening.host.close()
        if self._waiting.get(convening.host.run_id) is convening:
            del self._waiting[convening.host.run_id]

    async def _submit(self, ctx: Context, args: SubmitArgs) -> Reply:
        convening = self._waiting.get(args.run_id)
        if convening is None or convening.host is None:
            raise RequestError(
                f"no council run {args.run_id!r} is waiting for subagent answers (it ended, "
                "or never asked for any)"
            )
        host = convening.host
        taken = host.accept(args.run_id, [(a.slot, a.token, a.answer) for a in args.answers])
        if host.outstanding():
            # The host answers the rest in another call (perhaps one running beside this):
            # only the call that completes the set waits for the council.
            return self._work(convening, host.hand_out(), taken)
        convening.reporter.retarget(ctx.session.report_progress)
        return await self._turn(convening)

    async def _turn(self, convening: Convening) -> Reply:
        """Wait for the council's result, or for prompts only the host's subagents can
        answer; the council goes on running between calls while it waits for them."""
        task, reporter = convening.task, convening.reporter
        try:
            if convening.host is not None:
                work = await convening.host.next_turn(task)
            else:
                await asyncio.shield(task)
                work = None
        except asyncio.CancelledError:
            # The host cancelled: cancel the council once and let it finish its own
            # clean-up (kill the voices, write the run file as cancelled) before leaving.
            task.cancel()
            with anyio.CancelScope(shield=True), contextlib.suppress(BaseException):
                await task
            reporter.stop()
            raise
        if work is not None:
            await reporter.drain()
            reporter.retarget(None)  # this call is answered; the next one reports
            return self._work(convening, work)
        try:
            result = task.result()
        except BaseException:
            reporter.stop()
            raise
        _record_consent(result, convening.decision)
        await reporter.flush()
        return self._verdict(convening, result)

    def _verdict(self, convening: Convening, result: CouncilResult) -> Reply:
        from ..deliberation.render import render_deliberation
        from ..render import render

        prepared, planned = convening.prepared, convening.planned
        # What the intake noted (a capped n) is in the result's own notes, rendered here.
        text = render(result) + render_deliberation(result)
        if prepared.chain is not None:
            text += f"\nChain {prepared.chain}, each run a resource:\n" + "".join(
                f"- {run_id} ({template}): {RUN_URI}{run_id}\n" for template, run_id in planned
            )
        no_verdict = result.shown_status() == "no_verdict"
        if no_verdict:
            text += (
                "\nNO VERDICT: no voice produced a usable answer (the Notes and the dropped "
                "voices say why). This is not a council result; do not report one. To add "
                "voices, the user can allow the AI CLIs installed here for this project ("
                f"{grant_command(self.where, self.settings.env)}), or the server's operator "
                "can give it a subagent command or endpoints.\n"
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
        return Reply(text, result.model_dump(mode="json"), links, is_error=no_verdict)

    def _work(
        self, convening: Convening, pending: list[Pending], taken: list[str] | None = None
    ) -> Reply:
        """The prompts the council waits for, for the host to run as its own subagents."""
        assert convening.host is not None
        run_id = convening.host.run_id
        prompts = [
            SubagentPrompt(
                slot=p.slot,
                role=p.role,
                persona=p.persona,
                token=p.token,
                expires_in_s=round(p.expires_in(), 1),
                prompt=p.prompt,
            )
            for p in pending
        ]
        got = f"Taken: {', '.join(taken)}. " if taken else ""
        instructions = (
            f"{got}No verdict yet: council run {run_id} waits for {len(prompts)} answer(s) "
            "from your own subagents (no external voice may answer these slots). For each "
            "prompt, start one subagent with none of this conversation, give it the prompt "
            "exactly as written, and take its reply verbatim; if you cannot start subagents, "
            "answer each prompt yourself from the prompt alone. Then call submit_answers once "
            f"with run_id {run_id!r} and, for every prompt, its slot, its token and the reply "
            "as answer (an empty answer gives a slot up). A slot stops waiting after its "
            "expires_in_s seconds. These answers count as subagent voices of an unknown model "
            "family: they never make a council MULTI_FAMILY."
        )
        text = instructions + "".join(
            f"\n\n----- slot {p.slot} ({p.role}), token {p.token} -----\n{p.prompt}"
            for p in prompts
        )
        work = SubagentWork(run_id=run_id, prompts=prompts, instructions=instructions)
        return Reply(text, work.model_dump(mode="json"))

    def _needs_consent(self, decision: Decision) -> Reply:
        command = grant_command(self.where, self.settings.env)
        names = ", ".join(decision.needs_consent)
        project = self.where.root.parent
        text = (
            "rune council: needs consent, so no council was run. It would send the question "
            f"(and any artifact) to {names}, which pass it to the model services they are "
            f"configured for, and nobody has allowed that for this project ({project}). Only "
            "the user can: ask them to run this in their own terminal (it asks them there), "
            f"then call convene again with the same arguments:\n\n    {command}\n\nIf they "
            f"would rather keep the question on this machine, call convene again with "
            f"{SUBAGENTS_ONLY}: true; your own subagents then answer."
        )
        needed = ConsentNeeded(
            command=command,
            would_send_to=list(decision.needs_consent),
            project=str(project),
            instead=f"call convene again with {SUBAGENTS_ONLY}: true",
        )
        return Reply(text, needed.model_dump(mode="json"), is_error=True)

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
            lines.append(
                "No AI CLI is available: convene hands the council's prompts to your own "
                "subagents (submit_answers takes their replies)."
            )
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
            from ..core.schema import render_schema

            return render_schema("council-result"), "application/schema+json"
        if not uri.startswith(RUN_URI):
            raise RequestError(f"unknown resource {uri!r}; runs are {RUN_URI}<id>")
        path = self.where.run_file(unquote(uri.removeprefix(RUN_URI)))
        # The run as show_run reads it: a file keeping its artifact in a sidecar (2.8) gets
        # it back. load refuses a symlinked run file on open, as every reader of run files does.
        return runs.load(path).model_dump_json(indent=2), "application/json"

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
            read_only_hint=spec.name not in COUNCIL_TOOLS,
            open_world_hint=spec.name == "convene",
        ),
    )


def _operator_subagent(prepared: Prepared) -> bool:
    """Whether something the operator set up takes the slots no voice could serve (a
    subagent command or endpoint, from the server's flags or council.toml)."""
    options, config = prepared.options, prepared.options.config
    configured = config is not None and (
        config.subagent.command is not None or config.subagent.endpoint is not None
    )
    from_endpoints = options.endpoints is not None and options.endpoints.subagent is not None
    given = options.subagent is not None or options.subagent_command is not None
    return given or configured or from_endpoints


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
