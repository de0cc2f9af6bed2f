"""The MCP server: tool and resource handlers over the library, on the SDK's low-level Server.

Handlers are registered in ``request_handlers`` directly rather than through the SDK's
decorators: every tool call then passes through one place that turns any exception into a
tool error, so nothing a host sends can stop the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.session import ServerSession
from mcp.shared.exceptions import McpError
from pydantic import AnyUrl, BaseModel, ValidationError

from .. import runs
from ..contract import CouncilResult, TallyReport
from ..errors import CouncilError, ExitCode, RequestError, exit_code_for
from ..paths import RuneDir
from ..safetext import plain
from .consent import ConnectionConsent, Decision
from .progress import ProgressReporter
from .settings import ServerSettings
from .tools import (
    BY_NAME,
    TOOLS,
    ConveneArgs,
    DetectArgs,
    Difference,
    ListRunsArgs,
    RunArgs,
    RunList,
    RunRow,
    TallyArgs,
    ToolSpec,
    VerifyOutcome,
    input_schema,
    output_schema,
)

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


def for_display(text: str) -> str:
    # A host may print tool text on a terminal; the structured part keeps the raw text.
    return plain(text)


def _bad_args(exc: ValidationError) -> RequestError:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
    )
    return RequestError(f"malformed arguments: {problems}")


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
        content=[types.TextContent(type="text", text=for_display(text))], isError=True
    )


class CouncilServer:
    """One server per connection (stdio serves exactly one)."""

    def __init__(self, settings: ServerSettings) -> None:
        from importlib.metadata import version

        self.settings = settings
        self.where = RuneDir.resolve(settings.rune_dir)
        self.consent = ConnectionConsent(settings, self.where)
        self._councils: set[asyncio.Future[CouncilResult]] = set()
        self._stopping: asyncio.Future[None] | None = None
        self.server: Server[Any, Any] = Server(
            "rune-council", version=version("rune-council"), instructions=INSTRUCTIONS
        )
        self._tools: dict[str, Callable[[Any], Awaitable[ToolResult]]] = {
            "convene": self._convene,
            "detect": self._detect,
            "list_runs": self._list_runs,
            "show_run": self._show_run,
            "verify_run": self._verify_run,
            "tally": self._tally,
        }
        handlers = self.server.request_handlers
        handlers[types.ListToolsRequest] = self._handle_list_tools
        handlers[types.CallToolRequest] = self._handle_call_tool
        handlers[types.ListResourcesRequest] = self._handle_list_resources
        handlers[types.ListResourceTemplatesRequest] = self._handle_list_templates
        handlers[types.ReadResourceRequest] = self._handle_read_resource

    # ------------------------------------------------------------------ tools

    async def _handle_list_tools(self, _req: Any) -> types.ServerResult:
        return types.ServerResult(types.ListToolsResult(tools=[_tool(spec) for spec in TOOLS]))

    async def _handle_call_tool(self, req: types.CallToolRequest) -> types.ServerResult:
        name = req.params.name
        try:
            spec = BY_NAME.get(name)
            if spec is None:
                raise RequestError(f"unknown tool {name!r}; tools: {', '.join(BY_NAME)}")
            try:
                args = spec.args.model_validate(req.params.arguments or {})
            except ValidationError as exc:
                raise _bad_args(exc) from None
            text, structured = await self._tools[name](args)
        except Exception as exc:  # every failure is a tool error, never a crash
            return types.ServerResult(error_result(exc))
        return types.ServerResult(
            types.CallToolResult(
                content=[types.TextContent(type="text", text=for_display(text))],
                structuredContent=structured.model_dump(mode="json"),
                isError=False,
            )
        )

    async def _convene(self, args: ConveneArgs) -> ToolResult:
        from ..council import CouncilOptions, aconvene, new_run_id
        from ..deliberation.render import render_deliberation
        from ..render import render

        request = self._request(args, new_run_id)
        ctx = self.server.request_context
        decision = await self.consent.decide(ctx.session, ctx.request_id)
        reporter = ProgressReporter(_progress_sender(ctx.session, ctx))

        def on_event(result: CouncilResult, event: Any) -> None:
            _record_consent(result, decision)
            reporter.on_event(result, event)

        task: asyncio.Future[CouncilResult] = asyncio.ensure_future(
            aconvene(
                request,
                CouncilOptions(
                    subagent=self._subagent(),
                    rune_dir=self.where.root,
                    env=self.settings.env,
                    on_event=on_event,
                    allow_external=decision.allow,
                    template=args.template,
                ),
            )
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
        text = render(result) + render_deliberation(result)
        if result.voices_valid == 0:
            text += (
                "\nNo voice produced a usable answer; the Notes say why. The server operator "
                "can add voices (rune council mcp --yes, --subagent-cmd, or endpoints).\n"
            )
        return text, result

    def _request(self, args: ConveneArgs, new_id: Callable[[], str]) -> dict[str, Any]:
        request: dict[str, Any] = {
            "id": args.id or new_id(),
            "question": args.question,
            "budget": {"per_voice_timeout_s": args.timeout_s, "deadline_s": args.deadline_s},
            "diversity": {"prefer_model_families": args.prefer_families},
        }
        # A template fills what the call leaves out, so only arguments given are passed on.
        for key in ("mode", "n"):
            if args.template is None or key in args.model_fields_set:
                request[key] = getattr(args, key)
        if args.artifact_text is not None and args.artifact_path is not None:
            raise RequestError("give artifact_text or artifact_path, not both")
        if args.artifact_text is not None:
            request["artifact"] = {
                "name": args.artifact_name or "artifact",
                "text": args.artifact_text,
            }
        elif args.artifact_path is not None:
            path = self._inside_workdir(args.artifact_path)
            request["artifact"] = {"name": args.artifact_name or path.name, "path": str(path)}
        if args.deliberation is not None:
            request["deliberation"] = args.deliberation.model_dump(mode="json")
        return request

    def _inside_workdir(self, given: str) -> Path:
        """The artifact file, resolved (symlinks too) and checked to lie inside the workdir."""
        if "\x00" in given:
            raise RequestError("artifact_path contains a NUL byte")
        root = self.settings.workdir.resolve()
        path = (root / given).resolve()
        if not path.is_relative_to(root):
            raise RequestError(
                f"artifact_path {given!r} is outside the server's working directory {root}"
            )
        if not path.is_file():
            raise RequestError(f"artifact_path {given!r} is not a file inside {root}")
        return path

    def _subagent(self) -> Any:
        from ..config import load_config
        from ..runtimes.subagent import CommandRuntime

        config = load_config(self.where, self.settings.env)
        command = self.settings.subagent_cmd or config.subagent.command
        if not command:
            return None
        family = self.settings.subagent_family or config.subagent.family or "unknown"
        return CommandRuntime.from_command_line(command, model_family=family)

    async def _detect(self, args: DetectArgs) -> ToolResult:
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

    async def _list_runs(self, args: ListRunsArgs) -> ToolResult:
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

    async def _show_run(self, args: RunArgs) -> ToolResult:
        from ..deliberation.render import render_deliberation
        from ..render import render

        result = self._load(args.run_id)
        return render(result) + render_deliberation(result), result

    async def _verify_run(self, args: RunArgs) -> ToolResult:
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

    async def _tally(self, args: TallyArgs) -> ToolResult:
        from ..deliberation.tally import tally_text

        report = tally_text(args.transcript)
        return _tally_summary(report), report

    # ------------------------------------------------------------------ resources

    async def _handle_list_resources(self, _req: Any) -> types.ServerResult:
        from ..runs import list_runs

        resources = [
            types.Resource(
                uri=AnyUrl(CONTRACT_URI),
                name="council-result-schema",
                title="Voice contract: the CouncilResult JSON Schema",
                description="The JSON Schema every run file follows (contract version in $id).",
                mimeType="application/schema+json",
            )
        ]
        for row in list_runs(self.where):
            if row.problem is not None:
                continue
            resources.append(
                types.Resource(
                    uri=AnyUrl(RUN_URI + row.run_id),
                    name=f"run-{row.run_id}",
                    title=f"Council run {row.run_id} ({row.status})",
                    description=for_display(row.question[:300]),
                    mimeType="application/json",
                )
            )
        return types.ServerResult(types.ListResourcesResult(resources=resources))

    async def _handle_list_templates(self, _req: Any) -> types.ServerResult:
        template = types.ResourceTemplate(
            uriTemplate=RUN_URI + "{id}",
            name="council-run",
            title="A council run file by id",
            mimeType="application/json",
        )
        return types.ServerResult(types.ListResourceTemplatesResult(resourceTemplates=[template]))

    async def _handle_read_resource(self, req: types.ReadResourceRequest) -> types.ServerResult:
        uri = str(req.params.uri)
        try:
            text, mime = self._read(uri)
        except CouncilError as exc:
            raise McpError(types.ErrorData(code=types.INVALID_PARAMS, message=str(exc))) from None
        contents = types.TextResourceContents(uri=req.params.uri, mimeType=mime, text=text)
        return types.ServerResult(types.ReadResourceResult(contents=[contents]))

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
        inputSchema=input_schema(spec),
        outputSchema=output_schema(spec),
        annotations=types.ToolAnnotations(
            title=spec.title,
            readOnlyHint=spec.name != "convene",
            openWorldHint=spec.name == "convene",
        ),
    )


def _progress_sender(
    session: ServerSession, ctx: Any
) -> Callable[[float, float | None, str], Awaitable[None]] | None:
    token = ctx.meta.progressToken if ctx.meta is not None else None
    if token is None:
        return None

    async def send(progress: float, total: float | None, message: str) -> None:
        await session.send_progress_notification(
            token, progress, total, for_display(message), related_request_id=ctx.request_id
        )

    return send


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
