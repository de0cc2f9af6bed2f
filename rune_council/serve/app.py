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

from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..contract import PerspectiveRequest, is_safe_run_id
from ..errors import CouncilError, RequestError, RunFileError
from .guard import Access, BodyTooLarge, Guard

if TYPE_CHECKING:
    from ..analytics.aggregate import Stats
from .models import (
    Accepted,
    CancelResult,
    CouncilCreate,
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
)
from .pool import Busy, CouncilPool, Duplicate
from .settings import ServeSettings
from .sse import parse_last_event_id, run_events

ASSETS = Path(__file__).with_name("assets")
MAX_PAGE = 200
# A login body is one token; anything bigger is not one.
MAX_LOGIN_BODY = 4096
ROW_STATUSES = {"queued", "running", "complete", "cancelled", "failed", "abandoned", "unreadable"}
STAMPS = {"MULTI_FAMILY", "NO_DECORRELATION"}


class ServerState:
    """What outlives one request: the pool of councils and the signal to stop streaming."""

    def __init__(self, settings: ServeSettings) -> None:
        self.settings = settings
        self.stop = threading.Event()
        self._pool: CouncilPool | None = None

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


def _fields(exc: ValidationError, prefix: str = "") -> list[FieldProblem]:
    out = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"])
        out.append(FieldProblem(field=f"{prefix}{where}" or "body", message=err["msg"]))
    return out


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
    from ..safejson import UnreadableJSON, loads

    try:
        return loads(body, max_bytes=len(body), what="the body")
    except UnreadableJSON as exc:
        raise Reply(422, f"body: {exc}", [FieldProblem(field="body", message=str(exc))]) from None


def _with_overrides(create: CouncilCreate) -> PerspectiveRequest:
    """The request as the caller gave it, overrides applied; only what the caller set counts
    as set, so a template can still fill the rest."""
    from ..deliberation.render import deliberation_request

    data = create.request.model_dump(mode="json", exclude_unset=True)
    if create.n is not None:
        data["n"] = create.n
    if create.mode is not None:
        data["mode"] = create.mode
    if create.timeout is not None:
        data["budget"] = {**(data.get("budget") or {}), "per_voice_timeout_s": create.timeout}
    extra = deliberation_request(
        create.deliberation, create.rounds, create.council_type, None, None, None
    ).get("deliberation")
    if extra:
        merged = dict(data.get("deliberation") or {})
        rounds = {**(merged.get("rounds") or {}), **extra.pop("rounds", {})}
        merged.update(extra)
        if rounds:
            merged["rounds"] = rounds
        data["deliberation"] = merged
    try:
        return PerspectiveRequest.model_validate(data)
    except ValidationError as exc:
        raise _invalid(_fields(exc, "request.")) from None


def _checked_artifact(request: PerspectiveRequest, root: Path | None) -> PerspectiveRequest:
    artifact = request.artifact
    if artifact is None or artifact.path is None:
        return request
    field = "request.artifact.path"
    if root is None:
        raise _invalid(
            [
                FieldProblem(
                    field=field,
                    message="this server takes artifacts as text only (paths need --artifact-root)",
                )
            ]
        )
    base = root.resolve()
    candidate = Path(artifact.path)
    real = (candidate if candidate.is_absolute() else base / candidate).resolve()
    if not real.is_relative_to(base):
        raise _invalid([FieldProblem(field=field, message="outside the server's artifact root")])
    if not real.is_file():
        raise _invalid([FieldProblem(field=field, message="no such file under the artifact root")])
    moved = artifact.model_copy(update={"path": str(real)})
    return request.model_copy(update={"artifact": moved})


def _templated(request: PerspectiveRequest, name: str, state: ServerState) -> PerspectiveRequest:
    """The request with the template ``name`` applied by the library, found the way every door
    finds it (a repository's untrusted council.toml cannot replace a shipped one). Applied
    once, here, so a bad name or a missing artifact is refused before anything is queued and
    the queued run file shows the request the council will run."""
    from ..council import CouncilOptions
    from ..council.templates import apply_template, config_for, find_template

    options = CouncilOptions(rune_dir=state.settings.rune_dir, template=name)
    try:
        found = find_template(name, config_for(options))
    except RequestError as exc:
        raise _invalid([FieldProblem(field="template", message=str(exc))]) from None
    except CouncilError as exc:
        raise Reply(
            422, f"template: the server's council configuration is unusable: {exc}"
        ) from None
    try:
        return apply_template(request, found)
    except RequestError as exc:
        raise _invalid([FieldProblem(field="request", message=str(exc))]) from None


def _checked_endpoints(names: list[str] | None, state: ServerState) -> list[str] | None:
    if names is None:
        return None
    from ..endpoints.config import configured_endpoints
    from ..paths import RuneDir

    try:
        known = configured_endpoints(RuneDir.resolve(state.settings.rune_dir))
    except CouncilError as exc:
        raise Reply(
            422, f"endpoints: the server's endpoint configuration is unusable: {exc}"
        ) from None
    for i, name in enumerate(names):
        if name not in known:
            listed = ", ".join(sorted(known)) or "none"
            raise _invalid(
                [
                    FieldProblem(
                        field=f"endpoints.{i}",
                        message=f"no endpoint named {name!r} is configured (configured: {listed})",
                    )
                ]
            )
    return names


async def create_council(request: Request) -> Response:
    state = _state(request)
    data = _json_body(await _read_body(request, state.settings.max_body_bytes))
    if not isinstance(data, dict):
        raise _invalid([FieldProblem(field="body", message="must be a JSON object")])
    inner = data.get("request")
    if isinstance(inner, dict) and "id" not in inner:
        from ..council import new_run_id

        data["request"] = {**inner, "id": new_run_id()}
    try:
        create = CouncilCreate.model_validate(data)
    except ValidationError as exc:
        raise _invalid(_fields(exc)) from None
    council = _checked_artifact(_with_overrides(create), state.settings.artifact_root)
    if create.template is not None:
        council = _templated(council, create.template, state)
    endpoints = _checked_endpoints(create.endpoints, state)
    pool = state.pool
    try:
        await pool.submit(council, endpoints)
    except Duplicate as exc:
        raise Reply(409, str(exc)) from None
    except Busy as exc:
        raise Reply(
            429, f"busy: {exc}", headers={"Retry-After": str(state.settings.retry_after_s)}
        ) from None
    location = f"/v1/councils/{council.id}"
    accepted = Accepted(
        id=council.id,
        status="queued",
        location=location,
        events=f"{location}/events",
        page=f"/runs/{council.id}",
    )
    return _json(accepted, 202, {"Location": location})


def _run_path(state: ServerState, run_id: str) -> Path:
    from ..paths import RuneDir

    path = RuneDir.resolve(state.settings.rune_dir).run_file(run_id)
    if path.is_symlink() or not path.is_file():
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
    from ..paths import RuneDir
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
    path = _run_path(state, run_id)
    return StreamingResponse(
        run_events(path, last, state.stop),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def cancel_council(request: Request) -> Response:
    from ..runs import UNFINISHED, load, summarise

    state = _state(request)
    run_id = _run_id(request)
    path = _run_path(state, run_id)
    if await state.pool.cancel(run_id):
        status = load(path).status
        return _json(CancelResult(id=run_id, status=status))
    row = summarise(path)
    if row.status in UNFINISHED:
        raise Reply(409, f"run {run_id!r} is run by another process; cancel it where it runs")
    raise Reply(409, f"run {run_id!r} has already ended ({row.status})")


async def runtimes(request: Request) -> Response:
    from ..discovery.assembly import detect_configured
    from ..endpoints.config import configured_endpoints
    from ..paths import RuneDir

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
    from ..paths import RuneDir

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
