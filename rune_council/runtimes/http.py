"""HTTP voices: models behind an OpenAI-compatible ``/chat/completions`` endpoint.

One ``EndpointClient`` per endpoint holds one keep-alive ``httpx.AsyncClient`` that every
voice, failover and discovery call of a run shares, and every client in the process shares
one TLS context: loading the CA bundle is the expensive part of making a client.

Every call ends in one of the attempt outcomes a CLI voice can have, plus three of its own:
``timeout`` (the per-voice deadline covers connect, wait and the whole stream),
``transport_error`` (refused, reset, or a stream cut short), ``http_status`` (with the
status) and ``malformed`` (a body that is not the expected JSON, or text the caller's
``check`` rejects: a council slot passes one that wants a voice answer, so a model that
answers in prose hands the slot to the next model). Later stages ask the same runtimes for
ballots and merges without a check; those come back as text for the stage to judge. The key
goes only into the Authorization header; every detail and answer we keep is scrubbed of it.
Bodies are read raw and decoded by ``content_coding``, so a compressed reply is held to the
same cap (and so the same memory and time) as a plain one.

``EndpointClient(transport=...)`` takes any httpx transport (``httpx.MockTransport`` in a
caller's tests, say) instead of the network.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import email.utils
import functools
import ipaddress
import ssl
import sys
import time
import types
from collections import Counter
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from .. import safejson
from ..contract import Attempt, AttemptOutcome, FamilyConfidence, VoiceSource
from ..errors import EndpointCallError
from ..runtime import Answerer, ReplyCheck, RuntimeReply
from ..safetext import one_line
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
# A rejected key or a refused connection fails every model of the endpoint alike.
ENDPOINT_WIDE_STATUSES = frozenset({401, 403, 407})
# A 429's Retry-After is honoured up to this long, and at most this many times per call.
MAX_RETRY_AFTER_S = 300.0
RATE_LIMIT_WAITS = 3
# Requests in flight to one endpoint across a batch unless council.toml says otherwise.
DEFAULT_ENDPOINT_CONCURRENCY = 8


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


@dataclass(frozen=True)
class ApiKey:
    """A key whose text form is masked; only the HTTP client reads the value."""

    _value: str = field(repr=False)
    source: str

    def reveal(self) -> str:
        return self._value

    def __str__(self) -> str:
        return f"<key from {self.source}>"


@dataclass(frozen=True)
class ModelChoice:
    model: str
    family: str
    confidence: FamilyConfidence
    why: str = ""


@dataclass(frozen=True)
class ChatResult:
    outcome: AttemptOutcome
    text: str | None
    detail: str
    latency_ms: int
    http_status: int | None = None
    endpoint_wide: bool = False
    retry_after: float | None = None  # seconds a 429 asked callers to wait, if it said


class _TooLarge(Exception):
    pass


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


def _completion_text(raw: bytes) -> str:
    try:
        payload = safejson.loads(raw, what="response")
    except ValueError as exc:
        raise _Malformed(f"response is not JSON ({exc}): {raw[:120]!r}") from None
    message = _error_message(payload)
    if message is not None:
        raise _ErrorReported(message)
    try:
        content = payload["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise _Malformed("response has no choices[0].message.content") from None
    text = _content_text(content)
    if not text.strip():
        raise _Malformed("the model returned an empty answer")
    return text


async def _stream_text(response: httpx.Response, cap: int) -> str:
    """Join the deltas of a server-sent-event stream; a stream cut short is an error."""
    pieces: list[str] = []
    pending = b""
    finished = done = False
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
                for choice in event.get("choices") or []:
                    if not isinstance(choice, dict):
                        continue
                    delta = choice.get("delta") or {}
                    if isinstance(delta, dict):
                        pieces.append(_content_text(delta.get("content")))
                    if choice.get("finish_reason"):
                        finished = True
    if not (done or finished):
        raise httpx.RemoteProtocolError("the stream ended before the answer was complete")
    text = "".join(pieces)
    if not text.strip():
        raise _Malformed("the model returned an empty answer")
    return text


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
    ) -> None:
        self.name = name
        self.base_url = base_url.rstrip("/")
        # Shared by every council of a batch (``runtimes.limits``), else this client's own.
        self.backoff = backoff if backoff is not None else Backoff()
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

    async def chat(
        self,
        model: str,
        prompt: str,
        *,
        timeout_s: float,
        max_output_bytes: int,
        stream: bool = True,
        max_tokens: int | None = None,
    ) -> ChatResult:
        """One completion within ``timeout_s``, honouring 429 for everyone sharing the backoff.

        A 429 with ``Retry-After`` pauses the whole endpoint that long and the same model
        is asked again if the deadline allows (at most ``RATE_LIMIT_WAITS`` times). A 429
        without it pauses only this model (doubling while it keeps refusing) and goes back
        at once, so the slot can fail over to another model. A call that meets a pause
        waits it out, or fails at once when the pause outlasts its deadline.
        """
        deadline = time.monotonic() + timeout_s
        model_key = f"{self.base_url} {model}"
        waits = 0
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
            result = await self._chat_once(
                model,
                prompt,
                timeout_s=left,
                max_output_bytes=max_output_bytes,
                stream=stream,
                max_tokens=max_tokens,
            )
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
    ) -> ChatResult:
        body: dict[str, Any] = {
            "model": model,
            "messages": [{"role": "user", "content": prompt}],
            "stream": stream,
        }
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        started = time.monotonic()

        def done(
            outcome: AttemptOutcome,
            detail: str,
            text: str | None = None,
            status: int | None = None,
            endpoint_wide: bool = False,
            retry_after: float | None = None,
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
                        text = await _stream_text(response, max_output_bytes)
                    else:
                        text = _completion_text(await _read_capped(response, max_output_bytes))
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
        return done("ok", "answered", text=text)

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


@dataclass
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


@dataclass(frozen=True)
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
        while True:
            result = await self.client.chat(
                current.model,
                prompt,
                timeout_s=max(deadline - time.monotonic(), 0.001),
                max_output_bytes=max_output_bytes,
                stream=self.stream,
                max_tokens=self.max_tokens,
            )
            outcome, detail = result.outcome, result.detail
            if outcome == "ok" and result.text is not None and check is not None:
                problem = check(result.text)
                if problem is not None:
                    outcome, detail = "malformed", problem
            name = self._name_of(current)
            attempts.append(
                Attempt(
                    runtime=name,
                    source=self.source,
                    outcome=outcome,
                    detail=detail[:DETAIL_CAP],
                    latency_ms=result.latency_ms,
                    model=current.model,
                    http_status=result.http_status,
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


@dataclass(frozen=True)
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
