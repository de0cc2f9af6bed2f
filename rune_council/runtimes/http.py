"""HTTP voices: models behind an OpenAI-compatible ``/chat/completions`` endpoint.

One ``EndpointClient`` per endpoint holds one keep-alive ``httpx.AsyncClient`` that every
voice, failover and discovery call of a run shares, and every client in the process shares
one TLS context: loading the CA bundle is the expensive part of making a client.

Every call ends in one of the attempt outcomes a CLI voice can have, plus four of its own:
``timeout`` (the per-voice deadline covers connect, wait and the whole stream),
``transport_error`` (refused, reset, or a stream cut short), ``http_status`` (with the
status), ``truncated`` (the server stopped the reply at its token limit,
``finish_reason: "length"``) and ``malformed`` (a body that is not the expected JSON, or text
the caller's ``check`` rejects: a council slot passes one that wants a voice answer, so a
model that answers in prose hands the slot to the next model). Later stages ask the same
runtimes for ballots and merges without a check; those come back as text for the stage to
judge. The key goes only into the Authorization header; every detail and answer we keep is
scrubbed of it. Bodies are read raw and decoded by ``content_coding``, so a compressed reply
is held to the same cap (and so the same memory and time) as a plain one.

A call that wants a voice answer asks for its shape (``response_format``): the answer's wire
schema, strict (``schema.wire_schema``); a server that refuses that (a 400 or 422 naming the
format) is asked again with ``json_object``, then with no constraint, each refusal kept in
the attempt, and the step down is remembered for that endpoint and model
(``FormatMemory``: the user's own cache, see ``endpoints.formats``) so later councils start
where it works. Such a call also sends ``max_tokens`` (``ANSWER_MAX_TOKENS`` unless the
endpoint's config says otherwise), so a server's small default cannot cut the answer.

``EndpointClient(transport=...)`` takes any httpx transport (``httpx.MockTransport`` in a
caller's tests, say) instead of the network.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import email.utils
import functools
import ipaddress
import json
import re
import ssl
import sys
import time
import types
from collections import Counter
from collections.abc import AsyncGenerator, Mapping
from dataclasses import field
from typing import Any, Protocol
from urllib.parse import urlsplit

from ..core import safejson
from ..core.contract import (
    MAX_REPORTED_TOKENS,
    Attempt,
    AttemptOutcome,
    FamilyConfidence,
    FormatFallback,
    ResponseFormatKind,
    TokenUsage,
    VoiceSource,
)
from ..core.errors import EndpointCallError
from ..core.made import made
from ..core.records import record
from ..core.runtime import Answerer, ReplyCheck, RuntimeReply
from ..core.safetext import one_line
from .base import redact, remember_secrets
from .content_coding import ACCEPT_ENCODING, BodyDecoder, BodyTooLarge, BodyUnreadable
from .limits import Backoff


def _without_httpx_command_line() -> None:
    """``import httpx`` also imports httpx's own command-line tool whenever click is installed
    (the serve extra brings it), and that tool loads rich, pygments and click: about a tenth
    of a second of every ``rune`` start spent on code no council calls. A placeholder in its
    place keeps the import cheap; calling it says why it is not there."""
    if "httpx" in sys.modules or "httpx._main" in sys.modules:
        return
    placeholder = types.ModuleType("httpx._main")

    def main(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("httpx's command-line tool is not loaded in rune-council")

    placeholder.main = main  # type: ignore[attr-defined]  # a module's attributes are open
    sys.modules["httpx._main"] = placeholder


_without_httpx_command_line()

import httpx  # noqa: E402  # after the placeholder above

USER_AGENT = "rune-council"
ERROR_BODY_CAP = 16_000
MODELS_BODY_CAP = 8_000_000
DETAIL_CAP = 1000
# How much of a reply cut at the token limit its attempt keeps, to show where it stopped.
TRUNCATED_TAIL_CAP = 2000
# A rejected key or a refused connection fails every model of the endpoint alike.
ENDPOINT_WIDE_STATUSES = frozenset({401, 403, 407})
# A 429's Retry-After is honoured up to this long, and at most this many times per call.
MAX_RETRY_AFTER_S = 300.0
RATE_LIMIT_WAITS = 3
# Requests in flight to one endpoint across a batch unless council.toml says otherwise.
DEFAULT_ENDPOINT_CONCURRENCY = 8
# Tokens a voice answer may take unless the endpoint's config sets max_tokens: a full answer
# (several claims with quotes) takes 500-1,000; a 400-token cap was seen to cut one before
# its JSON closed. Room is left for a model that thinks aloud first, and the figure stays
# under the 4k context of small local models, where a server refuses a larger request.
ANSWER_MAX_TOKENS = 2048
# Output constraints from the one that holds a model closest to the answer to none at all.
FORMAT_LADDER: tuple[ResponseFormatKind, ...] = ("json_schema", "json_object", "none")
# A 400 or 422 whose message names one of these is the server refusing the constraint, not
# the request: llama.cpp, vLLM, Ollama and OpenAI word it in these terms.
_FORMAT_REFUSAL = re.compile(
    r"response_format|json_schema|json_object|structured output|guided|grammar|schema",
    re.IGNORECASE,
)
_FORMAT_REFUSAL_STATUSES = frozenset({400, 422})


@functools.cache
def shared_tls_context() -> ssl.SSLContext:
    return httpx.create_ssl_context()


@functools.cache
def _plain_http_context() -> ssl.SSLContext:
    # An http:// endpoint never negotiates TLS (redirects are not followed), so it need not
    # load the CA bundle; this context verifies as strictly and trusts no certificate at all.
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def tls_context_for(base_url: str) -> ssl.SSLContext:
    return shared_tls_context() if urlsplit(base_url).scheme == "https" else _plain_http_context()


def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@record(frozen=True)
class ApiKey:
    """A key whose text form is masked; only the HTTP client reads the value."""

    _value: str = field(repr=False)
    source: str

    def reveal(self) -> str:
        return self._value

    def __str__(self) -> str:
        return f"<key from {self.source}>"


@record(frozen=True)
class ModelChoice:
    model: str
    family: str
    confidence: FamilyConfidence
    why: str = ""


@record(frozen=True)
class OutputShape:
    """The shape a caller wants a reply in: a JSON Schema in its wire form, named."""

    name: str
    schema: Mapping[str, Any]


@functools.cache
def voice_answer_shape() -> OutputShape:
    # Read on first use from the copy the package ships (generating it from the models costs
    # pydantic a schema build in every process); a test holds that copy to the models.
    from ..core.schema import PACKAGED_WIRE

    shipped = PACKAGED_WIRE["voice-answer"].read_text(encoding="utf-8")
    return OutputShape("voice_answer", json.loads(shipped))


def response_format(shape: OutputShape, kind: ResponseFormatKind) -> dict[str, Any] | None:
    """The ``response_format`` member for one rung of ``FORMAT_LADDER``."""
    if kind == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": shape.name, "schema": dict(shape.schema), "strict": True},
        }
    if kind == "json_object":
        return {"type": "json_object"}
    return None


class FormatMemory(Protocol):
    """Where an endpoint's refusals of an output constraint are remembered across runs."""

    def recall(self, base_url: str, model: str) -> ResponseFormatKind | None: ...

    def remember(self, base_url: str, model: str, kind: ResponseFormatKind, why: str) -> None: ...


def is_format_refusal(status: int | None, detail: str) -> bool:
    return status in _FORMAT_REFUSAL_STATUSES and bool(_FORMAT_REFUSAL.search(detail))


@record(frozen=True)
class ChatResult:
    outcome: AttemptOutcome
    text: str | None
    detail: str
    latency_ms: int
    http_status: int | None = None
    endpoint_wide: bool = False
    retry_after: float | None = None  # seconds a 429 asked callers to wait, if it said
    # The constraint the final request carried (None: the call asked for no shape), the
    # ones refused before it, and whether the starting rung came from the memory.
    response_format: ResponseFormatKind | None = None
    format_fallbacks: tuple[FormatFallback, ...] = ()
    format_remembered: bool = False
    output_tail: str | None = None  # the end of a reply cut at the token limit
    usage: TokenUsage | None = None  # the tokens the reply said it used, when it said


class _TooLarge(Exception):
    pass


class _Truncated(Exception):
    """The server stopped at its token limit; ``text`` is what it had written by then."""

    def __init__(self, text: str, usage: TokenUsage | None) -> None:
        super().__init__("finish_reason length")
        self.text = text
        self.usage = usage


class _Malformed(Exception):
    pass


class _ErrorReported(Exception):
    pass


async def _decoded_chunks(
    response: httpx.Response, cap: int, what: str = "response"
) -> AsyncGenerator[bytes, None]:
    """The body as the server meant it, chunk by chunk: raw bytes read and decoded here,
    never past ``cap`` in any layer (see ``content_coding``), instead of by httpx's
    unbounded decoders."""
    try:
        # A reply built in this process (a transport a caller injected, such as httpx's
        # MockTransport) arrives already read and decoded: there are no raw bytes left.
        body = response.content
    except httpx.ResponseNotRead:
        pass
    else:
        if len(body) > cap:
            raise _TooLarge(f"{what} exceeded {cap} bytes")
        if body:
            yield body
        return
    try:
        decoder = BodyDecoder(response.headers.get_list("content-encoding"), cap, what)
        async for raw in response.aiter_raw():
            data = decoder.feed(raw)
            if data:
                yield data
        decoder.finish()
    except BodyTooLarge as exc:
        raise _TooLarge(str(exc)) from None
    except BodyUnreadable as exc:
        raise _Malformed(str(exc)) from None


async def _read_capped(response: httpx.Response, cap: int) -> bytes:
    data = bytearray()
    async for chunk in _decoded_chunks(response, cap):
        data += chunk
    return bytes(data)


async def _error_body(response: httpx.Response) -> bytes:
    """The first ``ERROR_BODY_CAP`` bytes of an error reply: enough for its message. A body
    too long or unreadable still leaves the status to report."""
    data = bytearray()
    try:
        async for chunk in _decoded_chunks(response, ERROR_BODY_CAP, "error body"):
            data += chunk
    except _TooLarge:
        pass
    except _Malformed as exc:
        return f"(body not shown: {exc})".encode()
    return bytes(data[:ERROR_BODY_CAP])


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts, as some servers send them
        return "".join(
            p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return ""


def _error_message(payload: Any) -> str | None:
    if isinstance(payload, dict) and "error" in payload:
        err = payload["error"]
        if isinstance(err, dict):
            return str(err.get("message") or err.get("type") or err)
        return str(err)
    return None


def _token_count(value: Any) -> int | None:
    # JSON's true is a Python int, and a float or a string is no count a server keeps.
    if isinstance(value, int) and not isinstance(value, bool):
        return value if 0 <= value <= MAX_REPORTED_TOKENS else None
    return None


def reported_usage(payload: Any) -> TokenUsage | None:
    """The token counts a reply (or a stream event) reports in its ``usage`` object, each
    read on its own: one that is missing or not a whole number in bounds is unknown (None),
    never guessed. None when neither count reads."""
    usage = payload.get("usage") if isinstance(payload, dict) else None
    if not isinstance(usage, dict):
        return None
    prompt = _token_count(usage.get("prompt_tokens"))
    completion = _token_count(usage.get("completion_tokens"))
    if prompt is None and completion is None:
        return None
    return TokenUsage(prompt_tokens=prompt, completion_tokens=completion)


def _completion_text(raw: bytes) -> tuple[str, TokenUsage | None]:
    try:
        payload = safejson.loads(raw, what="response")
    except ValueError as exc:
        raise _Malformed(f"response is not JSON ({exc}): {raw[:120]!r}") from None
    message = _error_message(payload)
    if message is not None:
        raise _ErrorReported(message)
    try:
        choice = payload["choices"][0]
        content = choice["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise _Malformed("response has no choices[0].message.content") from None
    text = _content_text(content)
    usage = reported_usage(payload)
    if isinstance(choice, dict) and choice.get("finish_reason") == "length":
        raise _Truncated(text, usage)
    if not text.strip():
        raise _Malformed("the model returned an empty answer")
    return text, usage


async def _stream_text(response: httpx.Response, cap: int) -> tuple[str, TokenUsage | None]:
    """Join the deltas of a server-sent-event stream; a stream cut short is an error. The
    usage is the last one an event reported (servers send it in the final chunk)."""
    pieces: list[str] = []
    usage: TokenUsage | None = None
    pending = b""
    finished = done = cut = False
    async with contextlib.aclosing(_decoded_chunks(response, cap, "stream")) as chunks:
        async for chunk in chunks:
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                line = line.strip()
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    done = True
                    continue
                try:
                    event = safejson.loads(data, what="stream event")
                except ValueError:
                    raise _Malformed(f"stream event is not JSON: {data[:120]!r}") from None
                message = _error_message(event)
                if message is not None:
                    raise _ErrorReported(message)
                usage = reported_usage(event) or usage
                if not isinstance(event, dict):
                    continue
                for choice in event.get("choices") or []:
                    if not isinstance(choice, dict):
                        continue
                    delta = choice.get("delta") or {}
                    if isinstance(delta, dict):
                        pieces.append(_content_text(delta.get("content")))
                    if choice.get("finish_reason"):
                        finished = True
                        cut = cut or choice.get("finish_reason") == "length"
    if not (done or finished):
        raise httpx.RemoteProtocolError("the stream ended before the answer was complete")
    text = "".join(pieces)
    if cut:
        raise _Truncated(text, usage)
    if not text.strip():
        raise _Malformed("the model returned an empty answer")
    return text, usage


class EndpointClient:
    """One endpoint, one shared keep-alive client (per event loop, since clients are bound
    to the loop that made them)."""

    def __init__(
        self,
        name: str,
        base_url: str,
        key: ApiKey | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        backoff: Backoff | None = None,
        formats: FormatMemory | None = None,
    ) -> None:
        self.name = name
        self.base_url = base_url.rstrip("/")
        # Shared by every council of a batch (``runtimes.limits``), else this client's own.
        self.backoff = backoff if backoff is not None else Backoff()
        # What this endpoint refused: learnt here, kept across runs by ``formats``.
        self.formats = formats
        self._refused_formats: dict[str, ResponseFormatKind] = {}
        self._key = key
        if key is not None:
            # Known as in play before the first call, so every output net can mask it.
            remember_secrets([key.reveal()])
        self._transport = transport
        self._http: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.clients_made = 0

    @property
    def key_source(self) -> str | None:
        return self._key.source if self._key is not None else None

    def scrub(self, text: str) -> str:
        return redact(text, [self._key.reveal()] if self._key else [])

    def _client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._http is None or self._http.is_closed or self._loop is not loop:
            headers = {
                "User-Agent": USER_AGENT,
                "Accept": "application/json",
                # Only what content_coding undoes with a bound; httpx would add br or zstd
                # whenever their packages happen to be installed.
                "Accept-Encoding": ACCEPT_ENCODING,
            }
            if self._key is not None:
                headers["Authorization"] = f"Bearer {self._key.reveal()}"
            self._http = httpx.AsyncClient(
                headers=headers,
                # The caller's deadline bounds each call as a whole (asyncio.timeout).
                timeout=httpx.Timeout(None),
                verify=tls_context_for(self.base_url),
                # A local server is never reached through the user's proxy.
                trust_env=not is_loopback(urlsplit(self.base_url).hostname),
                follow_redirects=False,
                limits=httpx.Limits(max_connections=16, max_keepalive_connections=8),
                transport=self._transport,
            )
            self._loop = loop
            self.clients_made += 1
        return self._http

    async def aclose(self) -> None:
        http, self._http = self._http, None
        if http is not None and self._loop is asyncio.get_running_loop():
            await http.aclose()

    def _first_format(self, model: str) -> tuple[ResponseFormatKind, bool]:
        """Where on ``FORMAT_LADDER`` a call starts: below what this model refused before
        (in this process, else in the memory), and whether that came from the memory."""
        known = self._refused_formats.get(model)
        if known is not None:
            return known, False
        if self.formats is not None:
            recalled = self.formats.recall(self.base_url, model)
            if recalled is not None:
                self._refused_formats[model] = recalled
                return recalled, True
        return FORMAT_LADDER[0], False

    def _learn_format(self, model: str, kind: ResponseFormatKind, why: str) -> None:
        self._refused_formats[model] = kind
        if self.formats is not None:
            self.formats.remember(self.base_url, model, kind, why)

    async def chat(
        self,
        model: str,
        prompt: str,
        *,
        timeout_s: float,
        max_output_bytes: int,
        stream: bool = True,
        max_tokens: int | None = None,
        shape: OutputShape | None = None,
    ) -> ChatResult:
        """One completion within ``timeout_s``, honouring 429 for everyone sharing the backoff.

        A 429 with ``Retry-After`` pauses the whole endpoint that long and the same model
        is asked again if the deadline allows (at most ``RATE_LIMIT_WAITS`` times). A 429
        without it pauses only this model (doubling while it keeps refusing) and goes back
        at once, so the slot can fail over to another model. A call that meets a pause
        waits it out, or fails at once when the pause outlasts its deadline.

        With ``shape`` the request carries it as ``response_format``, stepping down
        ``FORMAT_LADDER`` once per refusal within the same deadline.
        """
        deadline = time.monotonic() + timeout_s
        model_key = f"{self.base_url} {model}"
        waits = 0
        kind: ResponseFormatKind | None = None
        remembered = False
        fallbacks: list[FormatFallback] = []
        if shape is not None:
            kind, remembered = self._first_format(model)
        while True:
            pause = self.backoff.remaining(self.base_url, model_key)
            if pause > 0:
                if time.monotonic() + pause >= deadline:
                    return ChatResult(
                        "http_status",
                        None,
                        f"HTTP 429: rate limited; the endpoint asked callers to wait "
                        f"{pause:.1f} s more, past this call's deadline",
                        0,
                        429,
                    )
                await asyncio.sleep(pause)
            left = max(deadline - time.monotonic(), 0.001)
            once = await self._chat_once(
                model,
                prompt,
                timeout_s=left,
                max_output_bytes=max_output_bytes,
                stream=stream,
                max_tokens=max_tokens,
                response_format=(
                    response_format(shape, kind) if shape is not None and kind is not None else None
                ),
            )
            result = dataclasses.replace(
                once,
                response_format=kind,
                format_fallbacks=tuple(fallbacks),
                format_remembered=remembered,
            )
            if (
                kind is not None
                and kind != "none"
                and is_format_refusal(result.http_status, result.detail)
                and time.monotonic() < deadline
            ):
                fallbacks.append(
                    FormatFallback(
                        refused="json_schema" if kind == "json_schema" else "json_object",
                        http_status=result.http_status,
                        detail=result.detail[:DETAIL_CAP],
                    )
                )
                kind = FORMAT_LADDER[FORMAT_LADDER.index(kind) + 1]
                self._learn_format(model, kind, result.detail)
                continue
            if result.http_status != 429:
                if result.outcome == "ok":
                    self.backoff.served(model_key)
                return result
            if result.retry_after is None:
                self.backoff.refused(model_key)
                return result
            self.backoff.pause(self.base_url, result.retry_after)
            waits += 1
            if waits > RATE_LIMIT_WAITS or time.monotonic() + result.retry_after >= deadline:
                return result

    async def _chat_once(
        self,
        model: str,
        prompt: str,
        *,
        timeout_s: float,
        max_output_bytes: int,
        stream: bool,
        max_tokens: int | None,
        response_format: dict[str, Any] | None = None,
    ) -> ChatResult:
        body: dict[str, Any] = {
            "model": model,
            "messages": [{"role": "user", "content": prompt}],
            "stream": stream,
        }
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        if response_format is not None:
            body["response_format"] = response_format
        started = time.monotonic()

        def done(
            outcome: AttemptOutcome,
            detail: str,
            text: str | None = None,
            status: int | None = None,
            endpoint_wide: bool = False,
            retry_after: float | None = None,
            tail: str | None = None,
            usage: TokenUsage | None = None,
        ) -> ChatResult:
            ms = int((time.monotonic() - started) * 1000)
            kept = self.scrub(text) if text is not None else None
            return ChatResult(
                outcome,
                kept,
                self.scrub(detail)[:DETAIL_CAP],
                ms,
                status,
                endpoint_wide,
                retry_after,
                output_tail=self.scrub(tail[-TRUNCATED_TAIL_CAP:]) if tail else None,
                usage=usage,
            )

        try:
            async with asyncio.timeout(timeout_s):
                client = self._client()
                request = client.build_request(
                    "POST", f"{self.base_url}/chat/completions", json=body
                )
                response = await client.send(request, stream=True)
                try:
                    if not response.is_success:
                        raw = await _error_body(response)
                        return done(
                            "http_status",
                            _status_detail(response, raw),
                            status=response.status_code,
                            endpoint_wide=response.status_code in ENDPOINT_WIDE_STATUSES,
                            retry_after=_retry_after(response)
                            if response.status_code == 429
                            else None,
                        )
                    if "text/event-stream" in response.headers.get("content-type", ""):
                        text, usage = await _stream_text(response, max_output_bytes)
                    else:
                        text, usage = _completion_text(
                            await _read_capped(response, max_output_bytes)
                        )
                finally:
                    await response.aclose()
        except TimeoutError:
            return done("timeout", f"no complete answer within {timeout_s:g} s")
        except httpx.ConnectError as exc:
            return done("transport_error", f"cannot connect: {exc}", endpoint_wide=True)
        except httpx.TimeoutException as exc:
            return done("timeout", f"{type(exc).__name__}: {exc}")
        except httpx.HTTPError as exc:
            return done("transport_error", f"{type(exc).__name__}: {exc}")
        except _TooLarge as exc:
            return done("too_large", str(exc))
        except _Malformed as exc:
            return done("malformed", str(exc))
        except _ErrorReported as exc:
            return done("error_reported", f"the server reported an error: {exc}")
        except _Truncated as exc:
            limit = f" (max_tokens {max_tokens})" if max_tokens is not None else ""
            return done(
                "truncated",
                f"the reply stopped at the token limit{limit} before it was complete "
                '(finish_reason "length"); a larger max_tokens for this endpoint leaves room '
                "for a whole answer",
                tail=exc.text,
                usage=exc.usage,
            )
        return done("ok", "answered", text=text, usage=usage)

    async def list_models(self, *, timeout_s: float) -> list[str]:
        """Model ids from ``GET /models``; EndpointCallError says why when it fails."""
        try:
            async with asyncio.timeout(timeout_s):
                client = self._client()
                request = client.build_request("GET", f"{self.base_url}/models")
                response = await client.send(request, stream=True)
                try:
                    if not response.is_success:
                        raw = await _error_body(response)
                        raise EndpointCallError(
                            self.scrub(f"GET /models: {_status_detail(response, raw)}"),
                            kind="http_status",
                            http_status=response.status_code,
                        )
                    raw = await _read_capped(response, MODELS_BODY_CAP)
                finally:
                    await response.aclose()
        except TimeoutError:
            raise EndpointCallError(
                f"GET /models: no answer within {timeout_s:g} s", kind="timeout"
            ) from None
        except httpx.HTTPError as exc:
            raise EndpointCallError(
                self.scrub(f"GET /models: {type(exc).__name__}: {exc}"), kind="transport_error"
            ) from None
        except _TooLarge as exc:
            raise EndpointCallError(f"GET /models: {exc}", kind="too_large") from None
        except _Malformed as exc:
            raise EndpointCallError(f"GET /models: {exc}", kind="malformed") from None
        try:
            payload = safejson.loads(raw, what="model list")
            entries = payload["data"]
            ids = [e["id"] for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str)]
        except (ValueError, KeyError, TypeError):
            raise EndpointCallError(
                "GET /models: the answer is not an OpenAI-style model list", kind="malformed"
            ) from None
        # An id that carries the key (in any disguise) would go to the cache and the screen.
        return [i for i in ids if self.scrub(i) == i]


def _retry_after(response: httpx.Response) -> float | None:
    """Seconds from a ``Retry-After`` header (a number or an HTTP date), capped; None when
    absent or unreadable."""
    value = response.headers.get("retry-after", "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            return None
        seconds = (when - dt.datetime.now(dt.UTC)).total_seconds()
    if seconds != seconds:  # NaN
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


def _status_detail(response: httpx.Response, raw: bytes) -> str:
    message: str | None = None
    with contextlib.suppress(ValueError):
        message = _error_message(safejson.loads(raw, what="error body"))
    if message is None:
        message = raw.decode("utf-8", errors="replace").strip()[:300]
    phrase = response.reason_phrase or ""
    # A server's error body can span lines (a stack trace, an HTML page): the reason is one.
    return one_line(f"HTTP {response.status_code} {phrase}: {message}".strip().rstrip(":"), 400)


def runtime_name(endpoint: str, model: str) -> str:
    return f"{endpoint}:{model}"


@record
class CandidatePool:
    """An endpoint's ranked models and which of them hold a slot right now.

    A failed slot takes the best-ranked model nobody holds, preferring one whose family no
    other slot already speaks for, so failover keeps the spread ALLOCATE made.
    """

    ranked: list[ModelChoice]
    failover: bool = True
    max_attempts: int = 3
    _held: Counter[str] = field(default_factory=Counter)

    def hold(self, model: str) -> None:
        self._held[model] += 1

    def release(self, model: str) -> None:
        self._held[model] -= 1
        if self._held[model] <= 0:
            del self._held[model]

    def replacement(self, tried: set[str]) -> ModelChoice | None:
        held_families = {
            c.family for c in self.ranked if c.model in self._held and c.confidence == "confirmed"
        }
        fresh = [c for c in self.ranked if c.model not in tried and c.model not in self._held]
        new_family = [
            c for c in fresh if c.confidence == "confirmed" and c.family not in held_families
        ]
        unconfirmed = [c for c in fresh if c.confidence != "confirmed"]
        for group in (new_family, unconfirmed, fresh):
            if group:
                return group[0]
        return None


@record(frozen=True)
class HttpRuntime:
    """One endpoint model as a council voice; on failure it hands the slot to the next
    eligible model of its endpoint and reports every try."""

    client: EndpointClient
    choice: ModelChoice
    pool: CandidatePool | None = None
    source: VoiceSource = "external-http"
    stream: bool = True
    max_tokens: int | None = None
    label: str | None = None

    @property
    def name(self) -> str:
        return self.label or runtime_name(self.client.name, self.choice.model)

    @property
    def limit_key(self) -> str:
        """A server's rate limit counts requests to it: its models share one cap."""
        return self.client.name

    @property
    def default_max_concurrent(self) -> int:
        return DEFAULT_ENDPOINT_CONCURRENCY

    @property
    def model(self) -> str:
        return self.choice.model

    @property
    def reseats(self) -> bool:
        """Whether a slot this model failed may go on to other runtimes (the endpoint's
        ``failover_on_failure``)."""
        return self.pool.failover if self.pool is not None else True

    @property
    def model_family(self) -> str:
        return self.choice.family

    @property
    def family_confidence(self) -> FamilyConfidence:
        return self.choice.confidence

    def _name_of(self, choice: ModelChoice) -> str:
        if choice.model == self.choice.model:
            return self.name
        return runtime_name(self.client.name, choice.model)

    async def ask(
        self,
        prompt: str,
        *,
        timeout_s: float,
        max_output_bytes: int,
        check: ReplyCheck | None = None,
    ) -> RuntimeReply:
        pool = self.pool
        current = self.choice
        attempts: list[Attempt] = []
        tried: set[str] = set()
        if pool is not None:
            pool.hold(current.model)
        # The timeout is the slot's whole budget: failover gets what the failed tries left.
        deadline = time.monotonic() + timeout_s
        # The council passes a check only when it wants a voice answer (a slot); ballots and
        # merges come without one and are free text, so only a slot asks for the shape.
        shape = voice_answer_shape() if check is not None else None
        max_tokens = self.max_tokens
        if shape is not None and max_tokens is None:
            max_tokens = ANSWER_MAX_TOKENS
        while True:
            result = await self.client.chat(
                current.model,
                prompt,
                timeout_s=max(deadline - time.monotonic(), 0.001),
                max_output_bytes=max_output_bytes,
                stream=self.stream,
                max_tokens=max_tokens,
                shape=shape,
            )
            outcome, detail = result.outcome, result.detail
            if outcome == "ok" and result.text is not None and check is not None:
                problem = check(result.text)
                if problem is not None:
                    outcome, detail = "malformed", problem
            name = self._name_of(current)
            attempts.append(
                made(
                    Attempt,
                    runtime=name,
                    source=self.source,
                    outcome=outcome,
                    detail=detail[:DETAIL_CAP],
                    latency_ms=result.latency_ms,
                    model=current.model,
                    http_status=result.http_status,
                    output_tail=result.output_tail,
                    response_format=result.response_format,
                    format_fallbacks=list(result.format_fallbacks),
                    response_format_remembered=result.format_remembered,
                    usage=result.usage,
                )
            )
            latency = sum(a.latency_ms or 0 for a in attempts)
            if outcome == "ok":
                return RuntimeReply(
                    outcome="ok",
                    text=result.text,
                    detail="answered"
                    if len(attempts) == 1
                    else f"answered after {len(attempts) - 1} failover(s)",
                    latency_ms=latency,
                    attempts=tuple(attempts),
                    answered_by=Answerer(name, current.model, current.family, current.confidence),
                )
            tried.add(current.model)
            nxt: ModelChoice | None = None
            if pool is not None:
                pool.release(current.model)
                if (
                    pool.failover
                    and not result.endpoint_wide
                    and len(attempts) < pool.max_attempts
                    and time.monotonic() < deadline
                ):
                    nxt = pool.replacement(tried)
            if nxt is None or pool is None:
                summary = "; ".join(f"{a.model}: {a.outcome}: {a.detail}" for a in attempts)
                return RuntimeReply(
                    outcome=outcome,
                    detail=summary[:DETAIL_CAP],
                    latency_ms=latency,
                    attempts=tuple(attempts),
                )
            pool.hold(nxt.model)
            current = nxt


@record(frozen=True)
class EndpointModel:
    """One endpoint model for callers that want text, not a voice: ``await complete(p)``.

    Later stages (orchestrator, chairman) use it; failures raise EndpointCallError with the
    same ``kind`` a voice attempt would record.
    """

    client: EndpointClient
    choice: ModelChoice
    stream: bool = True
    max_tokens: int | None = None

    @property
    def name(self) -> str:
        return runtime_name(self.client.name, self.choice.model)

    async def complete(
        self, prompt: str, *, timeout_s: float = 180.0, max_output_bytes: int = 1_000_000
    ) -> str:
        result = await self.client.chat(
            self.choice.model,
            prompt,
            timeout_s=timeout_s,
            max_output_bytes=max_output_bytes,
            stream=self.stream,
            max_tokens=self.max_tokens,
        )
        if result.outcome != "ok" or result.text is None:
            raise EndpointCallError(
                f"{self.name}: {result.outcome}: {result.detail}",
                kind=result.outcome,
                http_status=result.http_status,
            )
        return result.text

    async def __call__(self, prompt: str) -> str:
        """So an endpoint model can go wherever a prompt-to-text callable does."""
        return await self.complete(prompt)

    def as_runtime(self, source: VoiceSource = "subagent") -> HttpRuntime:
        label = f"subagent@{self.name}" if source == "subagent" else None
        return HttpRuntime(
            self.client,
            self.choice,
            None,
            source=source,
            stream=self.stream,
            max_tokens=self.max_tokens,
            label=label,
        )

    async def aclose(self) -> None:
        await self.client.aclose()
