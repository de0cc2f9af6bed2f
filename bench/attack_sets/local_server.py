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
from collections.abc import Callable, Iterator

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


# What a hostile page can make the browser send without a preflight, each request with the
# status it must get: (method, path, body, headers, status). A request may depend on the
# server it is sent to (a rebinding Host names the server's own port).
Probe = tuple[str, str, str | None, dict[str, str], int]
Probes = Callable[[Server], list[Probe]]
PLANTED = "/v1/councils/planted"
READS = ("/v1/councils", PLANTED, f"{PLANTED}/events")
NO_CORS = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}
FORM = '{"request": {"id": "evil", "n": 3, "question": "x="}}\r\n'
URLENCODED = {"Content-Type": "application/x-www-form-urlencoded"}


def _rebound(server: Server) -> dict[str, str]:
    return {"Host": f"attacker.example:{port_of(server)}"}


def _foreign_origins() -> list[str]:
    return [f"http://localhost:{free_port()}", "null"]


def _post(body: str, headers: dict[str, str], status: int) -> Probe:
    return ("POST", "/v1/councils", body, headers, status)


# (attack, what holding it means, its requests), in the order the rows are shown.
REFUSED: list[tuple[str, str, Probes]] = [
    (
        "rebinding Host reads the run list, a run, its events",
        "400 on all three reads with Host attacker.example; marker unread",
        lambda s: [("GET", path, None, _rebound(s), 400) for path in READS],
    ),
    (
        "rebinding Host posts a council (JSON)",
        "400, no run started",
        lambda s: [_post(evil_body(), {**_rebound(s), **JSON}, 400)],
    ),
    (
        "foreign Origin posts a council (localhost:other, null)",
        "403 for both origins, no run started",
        lambda s: [_post(evil_body(), {"Origin": o, **JSON}, 403) for o in _foreign_origins()],
    ),
    (
        "foreign Origin reads a run",
        "403, the run's artifact not in the reply",
        lambda s: [("GET", PLANTED, None, {"Origin": _foreign_origins()[0]}, 403)],
    ),
    (
        "no-cors read (Sec-Fetch-Site: cross-site)",
        "403 on the run list and the run",
        lambda s: [("GET", path, None, NO_CORS, 403) for path in READS[:2]],
    ),
    (
        "CORS-simple text/plain POST of a valid council",
        "415, no run started",
        lambda s: [_post(evil_body(), TEXT, 415)],
    ),
    (
        "text/plain form body (name=value inside the JSON)",
        "415, no run started",
        lambda s: [_post(FORM, TEXT, 415)],
    ),
    (
        "urlencoded form POST",
        "415, no run started",
        lambda s: [_post("request=%7B%7D", URLENCODED, 415)],
    ),
]


def _refused(name: str, held: str, probes: Probes) -> None:
    """Registers the attack ``name``: each of its requests gets its status, and no council
    starts."""

    @attack(name, SECTION)
    def _(w: World) -> Row:
        failures: list[str] = []
        with _serving(w, "--yes") as server:
            for method, path, body, headers, status in probes(server):
                got = _send(w, server, method, path, body, headers=headers)
                sent = ", ".join(f"{key}: {value}" for key, value in headers.items())
                _expect_status(failures, got, status, f"{method} {path} ({sent})")
            _nothing_started(failures, server)
        return w.row(failures, held)


for _name, _held, _probes in REFUSED:
    _refused(_name, _held, _probes)


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
