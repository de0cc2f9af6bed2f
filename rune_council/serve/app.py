"""The ASGI app: the API routes, the web view's pages and its static assets."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from pydantic import BaseModel
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..core.contract import is_safe_run_id
from ..core.errors import CouncilError, RequestError, RunFileError
from ..core.paths import RuneDir
from ..council.intake import AskDefaults, Door
from .guard import Access, BodyTooLarge, Guard
from .models import (
    Accepted,
    CancelResult,
    ChainStep,
    ChainView,
    EndpointView,
    FieldProblem,
    Health,
    Problem,
    RunPage,
    RunRow,
    RuntimesView,
    StatsPicture,
    StatsTable,
    StatsView,
    StepLinks,
)
from .pool import Busy, CouncilPool, Duplicate, Plan
from .settings import ServeSettings
from .sse import parse_last_event_id, run_events

if TYPE_CHECKING:
    from ..analytics.aggregate import Stats
    from ..council.intake import Prepared

ASSETS = Path(__file__).with_name("assets")
MAX_PAGE = 200
# A login body is one token; anything bigger is not one.
MAX_LOGIN_BODY = 4096
ROW_STATUSES = {
    "queued",
    "running",
    "complete",
    "no_verdict",
    "cancelled",
    "failed",
    "abandoned",
    "unreadable",
}
STAMPS = {"MULTI_FAMILY", "NO_DECORRELATION"}


class ServerState:
    """What outlives one request: the pool of councils and the signal to stop streaming."""

    def __init__(self, settings: ServeSettings) -> None:
        self.settings = settings
        self.stop = threading.Event()
        self._pool: CouncilPool | None = None
        self.door = Door(
            name="this server",
            rune_dir=settings.rune_dir,
            artifact_root=settings.artifact_root,
            trusted_caller=False,
            # What the operator decided at start: no ask can change it (the intake refuses
            # these keys from anyone but the operator).
            defaults=AskDefaults(
                yes=True if settings.allow_external else None,
                subagent_cmd=settings.subagent_command,
                subagent_family=settings.subagent_family,
            ),
            artifact_hint=" (paths need --artifact-root)",
        )

    @property
    def pool(self) -> CouncilPool:
        # Made inside the running loop: its semaphore and lock belong to that loop.
        if self._pool is None:
            self._pool = CouncilPool(self.settings)
        return self._pool

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
        self.stop.set()


class Reply(Exception):
    """An error answer, raised from anywhere in a handler."""

    def __init__(
        self,
        status: int,
        error: str,
        fields: list[FieldProblem] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(error)
        self.status = status
        self.problem = Problem(error=error, fields=fields or [])
        self.headers = headers or {}


def _json(model: BaseModel, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(
        model.model_dump_json(),
        status_code=status,
        headers=headers,
        media_type="application/json",
    )


def _invalid(fields: list[FieldProblem]) -> Reply:
    first = fields[0]
    more = f" (and {len(fields) - 1} more)" if len(fields) > 1 else ""
    return Reply(422, f"{first.field}: {first.message}{more}", fields)


def _run_id(request: Request) -> str:
    run_id: str = request.path_params["run_id"]
    if not is_safe_run_id(run_id):
        raise Reply(400, "not a valid run id (A-Z a-z 0-9 . _ -, starting with a letter or digit)")
    return run_id


def _state(request: Request) -> ServerState:
    state: ServerState = request.app.state.server
    return state


async def _read_body(request: Request, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise BodyTooLarge
            chunks.append(chunk)
    except BodyTooLarge:
        raise Reply(413, f"body larger than {limit} bytes") from None
    return b"".join(chunks)


def _json_body(body: bytes) -> Any:
    """The body as JSON, read by the project's capped loader: a deep nest of ``[`` is a
    422 like any other bad body, never a RecursionError out of the handler."""
    from ..core.safejson import UnreadableJSON, loads

    try:
        return loads(body, max_bytes=len(body), what="the body")
    except UnreadableJSON as exc:
        raise Reply(422, f"body: {exc}", [FieldProblem(field="body", message=str(exc))]) from None


def _prepared(data: Any, door: Door) -> Prepared:
    """The body as the council it asks for, by the intake every door uses; a mistake is a
    422 naming the key at fault."""
    from ..council.intake import AskError, parse_ask, prepare

    if not isinstance(data, dict):
        raise _invalid([FieldProblem(field="body", message="must be a JSON object")])
    try:
        return prepare(parse_ask(data), door)
    except AskError as exc:
        fields = [FieldProblem(field=p.key, message=p.message) for p in exc.problems]
        raise _invalid(fields) from None
    except CouncilError as exc:
        raise Reply(422, f"the server's council configuration is unusable: {exc}") from None


def _links(run_id: str) -> dict[str, str]:
    location = f"/v1/councils/{run_id}"
    return {"location": location, "events": f"{location}/events", "page": f"/runs/{run_id}"}


async def create_council(request: Request) -> Response:
    state = _state(request)
    data = _json_body(await _read_body(request, state.settings.max_body_bytes))
    # Reads council.toml and checks the artifact's file: off the event loop.
    prepared = await run_in_threadpool(_prepared, data, state.door)
    run_id = prepared.request.id
    try:
        plan = await state.pool.submit(prepared)
    except Duplicate as exc:
        raise Reply(409, str(exc)) from None
    except Busy as exc:
        raise Reply(
            429, f"busy: {exc}", headers={"Retry-After": str(state.settings.retry_after_s)}
        ) from None
    except RequestError as exc:
        raise _invalid([FieldProblem(field="id", message=str(exc))]) from None
    links = _links(run_id)
    steps: list[StepLinks] = []
    if plan.chain is not None:
        links["location"] = f"/v1/chains/{run_id}"
        steps = [StepLinks(template=r.template, id=r.run_id, **_links(r.run_id)) for r in plan.runs]
    accepted = Accepted(
        id=run_id,
        status="queued",
        notes=list(prepared.notes),
        chain=plan.chain,
        runs=steps,
        **links,
    )
    return _json(accepted, 202, {"Location": links["location"]})


async def get_chain(request: Request) -> Response:
    """A chain's runs in order, each with its status and where to follow it: from this
    server's plan while it remembers the chain, else from the plan its last run file
    records."""
    from ..runs import summarise

    state = _state(request)
    chain_id = _run_id(request)
    plan = state.pool.chain(chain_id)
    if plan is None:
        recorded = _recorded_chain(state, chain_id)
        if recorded is None:
            raise Reply(404, f"no chain {chain_id!r}")
        plan = recorded
    steps: list[ChainStep] = []
    for run in plan.runs:
        path = _where(state).run_file(run.run_id)
        status: Any
        if path.is_file() and not path.is_symlink():
            # A run file's status is its text: one this program does not write reads as
            # unreadable, never as a reply the model refuses.
            status = summarise(path).status
            status = status if status in ROW_STATUSES else "unreadable"
        else:
            status = "queued" if state.pool.holds(run.run_id) else "not-run"
        steps.append(
            ChainStep(template=run.template, id=run.run_id, status=status, **_links(run.run_id))
        )
    assert plan.chain is not None
    return _json(
        ChainView(id=chain_id, chain=plan.chain, runs=steps), headers={"Cache-Control": "no-store"}
    )


def _recorded_chain(state: ServerState, chain_id: str) -> Plan | None:
    from ..runs import load

    path = _where(state).run_file(chain_id)
    if path.is_symlink() or not path.is_file():
        return None
    try:
        position = load(path, artifact=False).request.chain
    except RunFileError:
        return None
    # The plan a run file names is data: it counts only if its last run is this very one.
    if position is None or not position.runs or position.runs[-1].run_id != chain_id:
        return None
    if not all(is_safe_run_id(r.run_id) for r in position.runs):
        return None
    return Plan(tuple(position.runs), position.name)


def _where(state: ServerState) -> RuneDir:
    return RuneDir.resolve(state.settings.rune_dir)


def _run_path(state: ServerState, run_id: str) -> Path:
    from ..runs import is_plain_run_file

    path = _where(state).run_file(run_id)
    if not is_plain_run_file(path):
        if state.pool.holds(run_id):
            raise Reply(
                404,
                f"run {run_id!r} is queued and has no run file yet (a later step of a chain); "
                f"its events stream waits for it",
            )
        raise Reply(404, f"no run {run_id!r}")
    return path


async def get_council(request: Request) -> Response:
    from ..runs import load

    state = _state(request)
    path = _run_path(state, _run_id(request))
    try:
        result = load(path)
    except RunFileError as exc:
        raise Reply(409, f"the run file cannot be read: {exc}") from None
    return Response(
        result.model_dump_json(),
        media_type="application/json",
        headers={"Cache-Control": "no-store"},
    )


def _int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise Reply(400, f"{name} must be an integer") from None
    if not low <= value <= high:
        raise Reply(400, f"{name} must be between {low} and {high}")
    return value


async def list_councils(request: Request) -> Response:
    from ..runs import list_runs

    state = _state(request)
    status = request.query_params.get("status")
    stamp = request.query_params.get("stamp")
    if status is not None and status not in ROW_STATUSES:
        raise Reply(400, f"status must be one of {', '.join(sorted(ROW_STATUSES))}")
    if stamp is not None and stamp not in STAMPS:
        raise Reply(400, "stamp must be MULTI_FAMILY or NO_DECORRELATION")
    limit = _int_param(request, "limit", 20, 1, MAX_PAGE)
    offset = _int_param(request, "offset", 0, 0, 10**9)
    rows = list_runs(RuneDir.resolve(state.settings.rune_dir))
    chosen = [
        r
        for r in rows
        if (status is None or r.status == status) and (stamp is None or r.decorrelation == stamp)
    ]
    page = chosen[offset : offset + limit]
    following = None
    if offset + limit < len(chosen):
        query = request.query_params.multi_items()
        kept = [(k, v) for k, v in query if k not in ("offset", "limit")]
        kept += [("limit", str(limit)), ("offset", str(offset + limit))]
        following = "/v1/councils?" + urlencode(kept)
    items = [
        RunRow(
            id=r.run_id,
            question=r.question,
            # runs.py reads the status from an untrusted file as plain text; RunRow accepts
            # only the statuses the contract knows, and pydantic rejects any other here.
            status=r.status,  # type: ignore[arg-type]
            decorrelation=r.decorrelation,
            partial=r.partial,
            halted=r.halted,
            voices_valid=r.voices_valid,
            voices_requested=r.voices_requested,
            started_at=r.started_at,
            duration_s=r.duration_s,
            problem=r.problem,
        )
        for r in page
    ]
    return _json(
        RunPage(items=items, total=len(chosen), offset=offset, limit=limit, next=following)
    )


async def council_events(request: Request) -> Response:
    state = _state(request)
    run_id = _run_id(request)
    try:
        last = parse_last_event_id(request.headers.get("last-event-id"))
    except ValueError:
        raise Reply(400, "Last-Event-ID must be a non-negative integer") from None
    path = _where(state).run_file(run_id)
    pool = state.pool
    if not (pool.holds(run_id) and not path.is_symlink()):
        path = _run_path(state, run_id)
    return StreamingResponse(
        # A run this server will write but has not yet (a chain's later step) is waited
        # for, as long as the server still holds it.
        run_events(path, last, state.stop, expected=lambda: pool.holds(run_id)),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def cancel_council(request: Request) -> Response:
    from ..runs import UNFINISHED, load, summarise

    state = _state(request)
    run_id = _run_id(request)
    path = _run_path(state, run_id)
    if await state.pool.cancel(run_id):
        status = load(path, artifact=False).status
        return _json(CancelResult(id=run_id, status=status))
    row = summarise(path)
    if row.status in UNFINISHED:
        raise Reply(409, f"run {run_id!r} is run by another process; cancel it where it runs")
    raise Reply(409, f"run {run_id!r} has already ended ({row.status})")


async def runtimes(request: Request) -> Response:
    from ..discovery.assembly import detect_configured
    from ..endpoints.config import configured_endpoints

    state = _state(request)
    where = RuneDir.resolve(state.settings.rune_dir)
    try:
        report, _cached = await detect_configured(where, env=dict(os.environ))
        specs = configured_endpoints(where)
    except CouncilError as exc:
        raise Reply(422, f"the server's runtime configuration is unusable: {exc}") from None
    consent = (
        "granted by the operator (--yes)"
        if state.settings.allow_external
        else "the operator's: RUNE_COUNCIL_ALLOW_EXTERNAL, council.toml or an earlier yes"
    )
    view = RuntimesView(
        checked_at=report.checked_at,
        detected=report.detected,
        endpoints=[EndpointView(name=s.name, base_url=s.base_url) for s in specs.values()],
        external_consent=consent,
    )
    return _json(view)


async def health(request: Request) -> Response:
    state = _state(request)
    pool = state.pool
    return _json(
        Health(
            running=pool.running,
            queued=pool.queued,
            max_concurrent=state.settings.max_concurrent,
            max_queued=state.settings.max_queued,
        )
    )


async def openapi(request: Request) -> Response:
    from importlib.metadata import PackageNotFoundError, version

    from .openapi import document

    try:
        ours = version("rune-council")
    except PackageNotFoundError:
        ours = "0"
    return Response(json.dumps(document(ours)), media_type="application/json")


def _history(request: Request) -> Stats:
    """The run history of the server's rune dir, in the window ``?since=`` names."""
    from ..analytics.history import stats
    from ..analytics.since import parse_since

    raw = request.query_params.get("since")
    try:
        since = parse_since(raw) if raw else None
    except RequestError as exc:
        raise Reply(400, str(exc)) from None
    return stats([RuneDir.resolve(_state(request).settings.rune_dir)], since=since)


async def get_stats(request: Request) -> Response:
    # Reading thousands of run files the first time takes seconds: off the event loop.
    result = await run_in_threadpool(_history, request)
    return _json(result, headers={"Cache-Control": "no-store"})


async def stats_tables(request: Request) -> Response:
    from ..analytics import charts
    from ..analytics.tables import summary_line, tables

    result = await run_in_threadpool(_history, request)
    window = request.query_params.get("since")
    query = "?" + urlencode({"since": window}) if window else ""
    drawn = charts.available()
    view = StatsView(
        summary=summary_line(result),
        tables=[
            StatsTable(title=t.title, headers=t.headers, rows=t.rows, note=t.note)
            for t in tables(result)
        ],
        pictures=[
            StatsPicture(name=name, caption=caption, url=f"/v1/stats/pictures/{name}{query}")
            for name, (caption, _) in charts.PICTURES.items()
        ]
        if drawn
        else [],
        note=None if drawn else charts.INSTALL_HINT,
    )
    return _json(view, headers={"Cache-Control": "no-store"})


async def stats_picture(request: Request) -> Response:
    from ..analytics import charts

    name = request.path_params["name"]
    if name not in charts.PICTURES:
        raise Reply(404, f"no picture {name[:60]!r}")
    if not charts.available():
        raise Reply(501, charts.INSTALL_HINT)
    draw = charts.PICTURES[name][1]

    def render() -> bytes:
        return draw(_history(request))

    png = await run_in_threadpool(render)
    return Response(png, media_type="image/png", headers={"Cache-Control": "no-store"})


async def login(request: Request) -> Response:
    """Trade the token for the session cookie the web view reads with (the token itself
    never goes into a cookie)."""
    access: Access = request.app.state.access
    if access.token is None or access.session is None:
        raise Reply(404, "this server takes no token")
    data = _json_body(await _read_body(request, MAX_LOGIN_BODY))
    token = data.get("token") if isinstance(data, dict) else None
    if not isinstance(token, str) or not access.token_matches(token):
        raise Reply(401, "wrong token", headers={"WWW-Authenticate": "Bearer"})
    response = Response(status_code=204, headers={"Cache-Control": "no-store"})
    response.set_cookie(
        access.cookie_name,
        access.session,
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.headers.get("origin", "").startswith("https://"),
    )
    return response


def _page(name: str) -> Any:
    async def serve(request: Request) -> Response:
        if "run_id" in request.path_params:
            _run_id(request)
        return FileResponse(ASSETS / name, headers={"Cache-Control": "no-cache"})

    return serve


async def _on_reply(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Reply)
    return _json(exc.problem, exc.status, exc.headers)


def create_app(settings: ServeSettings) -> Starlette:
    settings.check()
    state = ServerState(settings)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        state.pool  # noqa: B018  (made inside the loop that will run the councils)
        yield
        await state.close()

    routes = [
        Route("/v1/councils", create_council, methods=["POST"]),
        Route("/v1/councils", list_councils, methods=["GET"]),
        Route("/v1/councils/{run_id}", get_council, methods=["GET"]),
        Route("/v1/councils/{run_id}/events", council_events, methods=["GET"]),
        Route("/v1/councils/{run_id}/cancel", cancel_council, methods=["POST"]),
        Route("/v1/chains/{run_id}", get_chain, methods=["GET"]),
        Route("/v1/runtimes", runtimes, methods=["GET"]),
        Route("/v1/stats", get_stats, methods=["GET"]),
        Route("/v1/stats/tables", stats_tables, methods=["GET"]),
        Route("/v1/stats/pictures/{name}", stats_picture, methods=["GET"]),
        Route("/healthz", health, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/", _page("index.html"), methods=["GET"]),
        Route("/runs/{run_id}", _page("run.html"), methods=["GET"]),
        Route("/docs", _page("docs.html"), methods=["GET"]),
        Route("/stats", _page("stats.html"), methods=["GET"]),
        Route("/login", _page("login.html"), methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Mount("/assets", StaticFiles(directory=ASSETS), name="assets"),
    ]
    access = Access(settings)
    middleware = [Middleware(Guard, settings=settings, access=access)]
    if settings.cors_origins:
        from starlette.middleware.cors import CORSMiddleware

        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(settings.cors_origins),
                allow_methods=["GET", "POST"],
                allow_headers=["Authorization", "Content-Type", "Last-Event-ID"],
            )
        )
    app = Starlette(
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers={Reply: _on_reply},
    )
    app.state.server = state
    app.state.access = access
    return app
