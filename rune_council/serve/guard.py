"""The edge every request passes: bearer token, body size, and headers for the browser."""

from __future__ import annotations

import hmac
import json
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import unquote

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .settings import ServeSettings

TOKEN_COOKIE = "rune_council_token"
# Static files and the health probe carry no council data; the login page needs its assets.
_OPEN_PREFIXES = ("/assets/",)
_OPEN_PATHS = {"/healthz"}
_PAGES = ("/", "/docs", "/stats", "/runs/")

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
]


class BodyTooLarge(Exception):
    pass


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


class Guard:
    def __init__(self, app: ASGIApp, settings: ServeSettings) -> None:
        self.app = app
        self.settings = settings
        self._token = settings.token.encode() if settings.token else None

    def _authorised(self, scope: Scope) -> bool:
        if self._token is None:
            return True
        path: str = scope["path"]
        if path in _OPEN_PATHS or path.startswith(_OPEN_PREFIXES):
            return True
        if scope["method"] == "OPTIONS" and self.settings.cors_origins:
            return True  # a CORS preflight carries no credentials and returns no data
        headers = dict(scope["headers"])
        given = headers.get(b"authorization", b"")
        if given[:7].lower() == b"bearer " and hmac.compare_digest(given[7:].strip(), self._token):
            return True
        # A browser cannot put a header on a page load or an EventSource: reading may use a
        # same-site cookie. Anything that changes state still needs the header.
        if scope["method"] in ("GET", "HEAD") and b"cookie" in headers:
            cookie: SimpleCookie = SimpleCookie()
            try:
                cookie.load(headers[b"cookie"].decode("latin-1"))
            except Exception:
                return False
            morsel = cookie.get(TOKEN_COOKIE)
            if morsel is not None:
                return hmac.compare_digest(unquote(morsel.value).encode(), self._token)
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if not self._authorised(scope):
            path: str = scope["path"]
            if scope["method"] == "GET" and (path in _PAGES or path.startswith("/runs/")):
                # The page asks for the token and keeps it in a cookie for the reads.
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
        declared = dict(scope["headers"]).get(b"content-length")
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
