"""A web page against ``rune council serve``: a real server on a loopback port.

Each attack starts ``rune council serve --yes`` (the test suite's fake CLIs as its voices),
plants one finished council whose artifact holds a marker (tests/test_serve_browser_attacks.py
``plant``), then sends what a hostile page could make the user's browser send: a rebinding
``Host``, a foreign ``Origin``, ``Sec-Fetch-*`` of a no-cors fetch, CORS-simple bodies that
need no preflight, a deep nest of brackets; and, with ``--require-token``, no credentials
or a wrong token.

Held: every reply has the expected status, no run file was added, ``/healthz`` says nothing
is running or queued, and the marker is in no reply body. The peak is the server's own
high-water mark (VmHWM) read just before the bench stops it; the voices are not in it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Iterator

import httpx

from tests.test_serve_browser_attacks import SECRET as MARK
from tests.test_serve_browser_attacks import assert_nothing_started, evil_body, plant, port_of
from tests.web.serving import Server, base_env, free_port, install_voices, start

from .kit import OFFLINE, Ran, Row, World, asserted, attack, expect, wait_reaped

SECTION = "the local server and a browser"
JSON = {"Content-Type": "application/json"}
TEXT = {"Content-Type": "text/plain"}
# How a server the bench stops with SIGTERM may end: uvicorn shuts down gracefully and then
# re-raises the signal, so "killed by SIGTERM" is a clean stop here, within its 30 s bound.
STOPPED = (0, 143, -signal.SIGTERM)


@contextlib.contextmanager
def _serving(w: World, *args: str, planted: bool = True) -> Iterator[Server]:
    install_voices(w.tmp / "bin")
    w.file_roots = []  # the planted run file holds the marker by design; replies must not
    if MARK not in w.secrets:
        w.secrets.append(MARK)
    server = start(w.tmp, *args, env=base_env(w.tmp, **OFFLINE))
    began = time.monotonic()
    w.cleanups.append(lambda: _kill(server))
    try:
        if planted:
            plant(server)
        yield server
    finally:
        peak = _high_water_mb(server.proc.pid)
        server.proc.send_signal(signal.SIGTERM)
        code, _forked_peak, timed_out = wait_reaped(server.proc, 30)
        server.client.close()
        seconds = time.monotonic() - began
        log = server.log.read_bytes()
        w.ran.append(Ran(("serve", *args), code, STOPPED, log, b"", seconds, peak, timed_out))


def _high_water_mb(pid: int) -> float:
    """The server's own peak RSS so far (VmHWM). Not ``wait4``: the suite's helper starts
    the server straight from the bench, and a child's ru_maxrss counts from its parent's."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _kill(server: Server) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(server.proc.pid, signal.SIGKILL)


def _send(
    w: World,
    server: Server,
    method: str,
    path: str,
    content: str | None = None,
    *,
    client: httpx.Client | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, str, httpx.Headers]:
    """One request, its body read to at most 1 MB or 20 s (an event stream that does not
    end cannot hold the bench), kept for the leak search."""
    body = bytearray()
    deadline = time.monotonic() + 20
    with (client or server.client).stream(
        method, path, content=content, headers=headers or {}, timeout=20
    ) as reply:
        for chunk in reply.iter_bytes():
            body += chunk
            if len(body) > 1 << 20 or time.monotonic() > deadline:
                break
        text = body.decode("utf-8", "replace")
        w.seen.append(text)
        return reply.status_code, text, reply.headers


def _expect_status(
    failures: list[str], got: tuple[int, str, httpx.Headers], want: int, what: str
) -> None:
    expect(failures, got[0] == want, f"{what}: {got[0]}, expected {want}")


def _nothing_started(failures: list[str], server: Server) -> None:
    asserted(failures, lambda: assert_nothing_started(server))


@attack("rebinding Host reads the run list, a run, its events", SECTION)
def _(w: World) -> Row:
    failures: list[str] = []
    with _serving(w, "--yes") as server:
        host = f"attacker.example:{port_of(server)}"
        for path in ("/v1/councils", "/v1/councils/planted", "/v1/councils/planted/events"):
            got = _send(w, server, "GET", path, headers={"Host": host})
            _expect_status(failures, got, 400, f"GET {path}")
        _nothing_started(failures, server)
    return w.row(failures, "400 on all three reads with Host attacker.example; marker unread")


@attack("rebinding Host posts a council (JSON)", SECTION)
def _(w: World) -> Row:
    failures: list[str] = []
    with _serving(w, "--yes") as server:
        host = f"attacker.example:{port_of(server)}"
        got = _send(w, server, "POST", "/v1/councils", evil_body(), headers={"Host": host, **JSON})
        _expect_status(failures, got, 400, "POST")
        _nothing_started(failures, server)
    return w.row(failures, "400, no run started")


@attack("foreign Origin posts a council (localhost:other, null)", SECTION)
def _(w: World) -> Row:
    failures: list[str] = []
    with _serving(w, "--yes") as server:
        for origin in (f"http://localhost:{free_port()}", "null"):
            got = _send(
                w, server, "POST", "/v1/councils", evil_body(), headers={"Origin": origin, **JSON}
            )
            _expect_status(failures, got, 403, f"POST with Origin {origin}")
        _nothing_started(failures, server)
    return w.row(failures, "403 for both origins, no run started")


@attack("foreign Origin reads a run", SECTION)
def _(w: World) -> Row:
    failures: list[str] = []
    with _serving(w, "--yes") as server:
        origin = f"http://localhost:{free_port()}"
        got = _send(w, server, "GET", "/v1/councils/planted", headers={"Origin": origin})
        _expect_status(failures, got, 403, "GET planted")
        _nothing_started(failures, server)
    return w.row(failures, "403, the run's artifact not in the reply")


@attack("no-cors read (Sec-Fetch-Site: cross-site)", SECTION)
def _(w: World) -> Row:
    failures: list[str] = []
    fetch = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}
    with _serving(w, "--yes") as server:
        for path in ("/v1/councils", "/v1/councils/planted"):
            got = _send(w, server, "GET", path, headers=fetch)
            _expect_status(failures, got, 403, f"GET {path}")
        _nothing_started(failures, server)
    return w.row(failures, "403 on the run list and the run")


@attack("CORS-simple text/plain POST of a valid council", SECTION)
def _(w: World) -> Row:
    failures: list[str] = []
    with _serving(w, "--yes") as server:
        got = _send(w, server, "POST", "/v1/councils", evil_body(), headers=TEXT)
        _expect_status(failures, got, 415, "POST text/plain")
        _nothing_started(failures, server)
    return w.row(failures, "415, no run started")


@attack("text/plain form body (name=value inside the JSON)", SECTION)
def _(w: World) -> Row:
    failures: list[str] = []
    form = '{"request": {"id": "evil", "n": 3, "question": "x="}}\r\n'
    with _serving(w, "--yes") as server:
        got = _send(w, server, "POST", "/v1/councils", form, headers=TEXT)
        _expect_status(failures, got, 415, "POST form")
        _nothing_started(failures, server)
    return w.row(failures, "415, no run started")


@attack("urlencoded form POST", SECTION)
def _(w: World) -> Row:
    failures: list[str] = []
    ctype = {"Content-Type": "application/x-www-form-urlencoded"}
    with _serving(w, "--yes") as server:
        got = _send(w, server, "POST", "/v1/councils", "request=%7B%7D", headers=ctype)
        _expect_status(failures, got, 415, "POST urlencoded")
        _nothing_started(failures, server)
    return w.row(failures, "415, no run started")


@attack("deep nest: 400,000 x [ as application/json", SECTION)
def _(w: World) -> Row:
    failures: list[str] = []
    with _serving(w, planted=False) as server:
        status, text, _ = _send(w, server, "POST", "/v1/councils", "[" * 400_000, headers=JSON)
        expect(failures, status == 422, f"POST: {status}, expected 422")
        try:
            error = str(json.loads(text).get("error", ""))
        except ValueError:
            error = text[:80]
        expect(failures, error.startswith("body: "), f"the error is {error[:80]!r}, not body: ...")
        up = _send(w, server, "GET", "/healthz")
        expect(failures, up[0] == 200, f"/healthz after: {up[0]}")
        runs = list(server.council_dir.glob("run-*.json")) if server.council_dir.exists() else []
        expect(failures, not runs, f"{len(runs)} run file(s) appeared")
    log = server.log.read_text(errors="replace")
    expect(failures, "Traceback" not in log, "the server log has a Traceback")
    return w.row(failures, "422 'body: ...', server still up, no Traceback in its log")


@attack("token mode: no credentials, wrong token at /login", SECTION)
def _(w: World) -> Row:
    failures: list[str] = []
    with _serving(w, "--yes"):
        pass
    with _serving(w, "--require-token", planted=False) as server:
        anon = httpx.Client(base_url=server.base, timeout=20)
        try:
            got = _send(w, server, "GET", "/v1/councils/planted", client=anon)
            _expect_status(failures, got, 401, "GET planted without credentials")
            wrong = '{"token": "not-the-token"}'
            login = _send(w, server, "POST", "/login", wrong, client=anon, headers=JSON)
            _expect_status(failures, login, 401, "POST /login with a wrong token")
            expect(failures, "set-cookie" not in login[2], "a wrong token got a cookie")
        finally:
            anon.close()
        _nothing_started(failures, server)
    return w.row(failures, "401 without credentials, 401 and no Set-Cookie for a wrong token")
