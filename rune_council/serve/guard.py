"""The edge every request passes: who sent it (browser checks), the token, the body size,
and the headers every answer carries.

A server on loopback is reachable by every web page the user opens. A page cannot read a
cross-origin answer, but it can *send*: a ``text/plain`` or form POST needs no preflight,
and a DNS-rebinding page (``attacker.example`` re-resolved to 127.0.0.1) is same-origin as
far as the browser knows and reads whatever it asks for. So, on every route and before
anything else:

- ``Host`` must be a name this server answers to (its loopback address and ``localhost``
  with its port, plus the operator's ``--allow-host``/``--allow-origin``): a rebinding page
  sends its own name and is refused.
- ``Origin``, when a browser sends one, must be this server's own (or one the operator
  allowed); without ``Origin``, ``Sec-Fetch-Site: cross-site``/``same-site`` is refused too,
  except for a plain top-level navigation, whose answer the other page cannot read.
- A body must be declared ``application/json``: that content type is not CORS-simple, so a
  foreign page cannot send one without a preflight this server never grants.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import secrets
from collections.abc import Iterable
from http.cookies import CookieError, SimpleCookie
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .settings import ServeSettings, host_name, is_loopback, origin_name

# Static files and the health probe carry no council data; the login page and its exchange
# are how a browser gets in.
_OPEN_PREFIXES = ("/assets/",)
_OPEN_PATHS = {"/healthz", "/login"}
_PAGES = ("/", "/docs", "/stats", "/runs/")
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
_READS = ("GET", "HEAD")

_SECURITY_HEADERS = [
    # No inline script or style anywhere: markup smuggled into a voice's answer cannot run.
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        b"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    # A foreign page's <img>, <script> or no-cors fetch of anything here gets nothing.
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"cross-origin-opener-policy", b"same-origin"),
]


class BodyTooLarge(Exception):
    pass


def _is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return host == ""


def allowed_hosts(settings: ServeSettings) -> frozenset[str]:
    """Every ``Host`` value this server answers to."""
    port = settings.port
    bound = settings.host.strip().lower()
    names: set[str] = set()
    if is_loopback(bound) or _is_wildcard(bound):
        # localhost never resolves to anyone else's address, unlike any name a page can pick.
        names.update(_LOOPBACK_NAMES)
    if not _is_wildcard(bound):
        names.add(f"[{bound.strip('[]')}]" if ":" in bound else bound)
    hosts = {f"{name}:{port}" for name in names}
    if port == 80:
        hosts.update(names)
    for given in settings.allow_hosts:
        name = host_name(given)
        hosts.add(name)
        if ":" not in name.rsplit("]", 1)[-1]:
            hosts.add(f"{name}:{port}")
    for origin in settings.allow_origins:
        # A proxy that keeps the browser's Host sends the origin's own name.
        hosts.add(origin_name(origin).split("://", 1)[1])
    return frozenset(hosts)


def allowed_origins(settings: ServeSettings, hosts: Iterable[str]) -> frozenset[str]:
    """Every ``Origin`` this server takes requests from: its own pages under each name it
    answers to, the operator's ``--allow-origin`` and ``--cors-origin``."""
    own = {f"{scheme}://{host}" for host in hosts for scheme in ("http", "https")}
    own.update(origin_name(o, "--allow-origin") for o in settings.allow_origins)
    own.update(origin_name(o, "--cors-origin") for o in settings.cors_origins)
    return frozenset(own)


def _shown(value: str) -> str:
    return repr(value[:100])


class Access:
    """The token, and the session cookie a browser gets for it.

    The cookie carries a secret made when the server starts, never the token itself:
    cookies are shared by every port of a host, so another program on 127.0.0.1 the
    browser visits would receive it; what it receives lets it read until this server
    stops, and never change anything.
    """

    def __init__(self, settings: ServeSettings) -> None:
        self.token = settings.token.encode() if settings.token else None
        self.session = secrets.token_urlsafe(32) if self.token else None
        # Named after the port, so two servers on one host do not log each other out.
        self.cookie_name = f"rune_council_session_{settings.port}"

    def token_matches(self, given: str | bytes) -> bool:
        if self.token is None:
            return False
        raw = given.encode("utf-8", "replace") if isinstance(given, str) else given
        return hmac.compare_digest(raw, self.token)

    def session_matches(self, cookie_header: bytes) -> bool:
        if self.session is None:
            return False
        cookie: SimpleCookie = SimpleCookie()
        try:
            cookie.load(cookie_header.decode("latin-1"))
        except CookieError:
            return False
        morsel = cookie.get(self.cookie_name)
        return morsel is not None and hmac.compare_digest(
            morsel.value.encode("latin-1", "replace"), self.session.encode()
        )


async def _reply(
    send: Send, status: int, body: dict[str, Any], extra: list[tuple[bytes, bytes]]
) -> None:
    payload = json.dumps(body).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
        *extra,
        *_SECURITY_HEADERS,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


def _headers(scope: Scope) -> dict[bytes, list[bytes]]:
    out: dict[bytes, list[bytes]] = {}
    for key, value in scope["headers"]:
        out.setdefault(key.lower(), []).append(value)
    return out


class Guard:
    def __init__(self, app: ASGIApp, settings: ServeSettings, access: Access) -> None:
        self.app = app
        self.settings = settings
        self.access = access
        self.hosts = allowed_hosts(settings)
        self.origins = allowed_origins(settings, self.hosts)

    def _browser_refusal(
        self, scope: Scope, headers: dict[bytes, list[bytes]]
    ) -> tuple[int, str] | None:
        """Why a request that a web page could have sent is refused, or None."""
        hosts = headers.get(b"host", [])
        if len(hosts) != 1:
            return 400, "a request needs exactly one Host header"
        host = hosts[0].decode("latin-1").strip().lower()
        if host not in self.hosts:
            return 400, (
                f"Host {_shown(host)} is not a name this server answers to "
                f"(it listens on {self.settings.host}:{self.settings.port}; "
                "another name needs --allow-host)"
            )
        method: str = scope["method"]
        origins = headers.get(b"origin", [])
        if len(origins) > 1:
            return 403, "a request may carry one Origin header"
        if origins:
            origin = origins[0].decode("latin-1").strip().lower()
            if origin not in self.origins:
                return 403, (
                    f"cross-origin request refused: Origin {_shown(origin)} is not this "
                    "server's (a page elsewhere needs --cors-origin, a proxy --allow-origin)"
                )
        else:
            site = b"".join(headers.get(b"sec-fetch-site", [])).lower()
            if site in (b"cross-site", b"same-site"):
                mode = b"".join(headers.get(b"sec-fetch-mode", [])).lower()
                dest = b"".join(headers.get(b"sec-fetch-dest", [])).lower()
                # Following a link here is fine: the page that held the link cannot read
                # what opens. Anything else from another site (a no-cors fetch, an <img>,
                # a frame) is a request the user did not make.
                if not (method in _READS and mode == b"navigate" and dest == b"document"):
                    return 403, (
                        f"cross-site request refused (Sec-Fetch-Site: {site.decode('latin-1')})"
                    )
        if method not in (*_READS, "OPTIONS"):
            types = headers.get(b"content-type", [])
            media = types[0].split(b";", 1)[0].strip().lower() if types else b""
            length = b"".join(headers.get(b"content-length", [])).strip()
            has_body = b"transfer-encoding" in headers or length not in (b"", b"0")
            declared_json = len(types) == 1 and media == b"application/json"
            if not declared_json and (types or has_body):
                got = media.decode("latin-1")[:60] or "no Content-Type"
                return 415, (
                    f"{method} bodies must be Content-Type: application/json (got {got}); "
                    "with curl, use --json or -H 'Content-Type: application/json'"
                )
        return None

    def _authorised(self, scope: Scope, headers: dict[bytes, list[bytes]]) -> bool:
        if self.access.token is None:
            return True
        path: str = scope["path"]
        if path in _OPEN_PATHS or path.startswith(_OPEN_PREFIXES):
            return True
        if scope["method"] == "OPTIONS" and self.settings.cors_origins:
            return True  # a CORS preflight carries no credentials and returns no data
        given = b"".join(headers.get(b"authorization", []))
        if given[:7].lower() == b"bearer " and self.access.token_matches(given[7:].strip()):
            return True
        # A browser cannot put a header on a page load or an EventSource: reading may use
        # the session cookie. Anything that changes state still needs the header.
        if scope["method"] in _READS and b"cookie" in headers:
            return any(self.access.session_matches(c) for c in headers[b"cookie"])
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        refusal = self._browser_refusal(scope, headers)
        if refusal is not None:
            status, error = refusal
            await _reply(send, status, {"error": error, "fields": []}, [])
            return
        if not self._authorised(scope, headers):
            path: str = scope["path"]
            if scope["method"] == "GET" and (path in _PAGES or path.startswith("/runs/")):
                # The page asks for the token and trades it for the session cookie.
                scope = {**scope, "path": "/login"}
            else:
                await _reply(
                    send,
                    401,
                    {"error": "missing or wrong bearer token", "fields": []},
                    [(b"www-authenticate", b"Bearer")],
                )
                return
        limit = self.settings.max_body_bytes
        declared = b"".join(headers.get(b"content-length", [])) or None
        if declared is not None:
            try:
                too_big = int(declared) > limit
            except ValueError:
                too_big = True
            if too_big:
                await _reply(
                    send, 413, {"error": f"body larger than {limit} bytes", "fields": []}, []
                )
                return
        seen = 0

        async def bounded_receive() -> Message:
            # Chunked bodies carry no length up front: count as they arrive.
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge
            return message

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *_SECURITY_HEADERS]}
            await send(message)

        await self.app(scope, bounded_receive, with_headers)
