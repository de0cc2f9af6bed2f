"""A loopback model server that speaks the wire protocols of the real AI CLIs.

The end-to-end tests point claude, codex and gemini (and later OpenAI-compatible
CLIs) at this server through the CLIs' own configuration, so that a whole run
stays on 127.0.0.1 and the answer each CLI prints is one the test chose.

Protocols and the paths that select them:

* ``anthropic``         ``POST /v1/messages`` and ``/v1/messages/count_tokens``
* ``openai-responses``  ``POST /v1/responses``
* ``openai-chat``       ``POST /v1/chat/completions`` and ``GET /v1/models``
* ``gemini``            ``POST /v1beta/models/{model}:streamGenerateContent``,
                        ``:generateContent`` and ``:countTokens``

Anything else gets a quick 404 (``HEAD /`` and ``GET /`` get a 200, since claude
probes them), and every request is recorded in ``server.requests``.

A test can script a turn that calls a tool instead of answering with text
(``server.tool_calls[protocol]``, see ToolCall): that is how the tests drive a real CLI
acting as an MCP host.
"""

from __future__ import annotations

import contextlib
import gzip
import itertools
import json
import re
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

ANTHROPIC = "anthropic"
OPENAI_RESPONSES = "openai-responses"
OPENAI_CHAT = "openai-chat"
GEMINI = "gemini"
PROTOCOLS = (ANTHROPIC, OPENAI_RESPONSES, GEMINI, OPENAI_CHAT)

DEFAULT_ANSWER = "The stub model has spoken."
PROMPT_EXCERPT_CHARS = 2000

Answer = str | Callable[[str], str]

_GEMINI_PATH = re.compile(
    r"^/v1(?:beta|alpha)?/models/(?P<model>[^/:]+):"
    r"(?P<method>streamGenerateContent|generateContent|countTokens)$"
)


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    """The path including its query string."""
    protocol: str | None
    """One of PROTOCOLS, or None for requests no protocol claims (probes, 404s)."""
    prompt: str
    """Start of the last user turn's text, as the server extracted it."""
    model: str | None
    stream: bool
    status: int
    body: Any = field(default=None, repr=False, compare=False)
    """The decoded JSON body, kept only when the server was made with keep_bodies=True."""


@dataclass(frozen=True)
class ToolCall:
    """A scripted model turn: ask the client to call tool ``name`` with ``arguments``."""

    name: str
    arguments: dict[str, Any]
    id: str = field(default_factory=lambda: _new_id("toolu"))


ToolScript = Callable[[Any], "ToolCall | None"]


class RequestLog:
    """The requests a server has seen; safe to read while handler threads append."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[RecordedRequest] = []

    def append(self, item: RecordedRequest) -> None:
        with self._lock:
            self._items.append(item)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def snapshot(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._items)

    def for_protocol(self, protocol: str) -> list[RecordedRequest]:
        return [r for r in self.snapshot() if r.protocol == protocol]

    def __iter__(self) -> Iterator[RecordedRequest]:
        return iter(self.snapshot())

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def __getitem__(self, index: int) -> RecordedRequest:
        with self._lock:
            return self._items[index]

    def __repr__(self) -> str:
        return f"RequestLog({self.snapshot()!r})"


class ModelServer:
    """Serves canned answers on 127.0.0.1 in a background thread.

    ``answers[protocol]`` is the text (or a callable from prompt text to text) that
    protocol answers with; ``fail[protocol] = status`` makes that protocol's model
    calls answer that HTTP status with the vendor's error body instead.
    ``tool_calls[protocol]`` is called with each model request's decoded body; when it
    returns a ToolCall, that request is answered with a call of that tool instead of text
    (anthropic, gemini and openai-responses so far).
    """

    def __init__(self, *, keep_bodies: bool = False) -> None:
        self.answers: dict[str, Answer] = {}
        self.fail: dict[str, int] = {}
        self.tool_calls: dict[str, ToolScript] = {}
        self.requests = RequestLog()
        self.keep_bodies = keep_bodies
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("ModelServer is not started")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self) -> ModelServer:
        if self._httpd is not None:
            return self
        httpd = _Server(("127.0.0.1", 0), _Handler)
        httpd.model_server = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="model-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, thread = self._httpd, self._thread
        self._httpd = self._thread = None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.close_open_connections()
        httpd.server_close()
        if thread is not None:
            thread.join(timeout=5)

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def answer_for(self, protocol: str, prompt: str) -> str:
        answer = self.answers.get(protocol, DEFAULT_ANSWER)
        return answer(prompt) if callable(answer) else answer


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    model_server: ModelServer

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def close_open_connections(self) -> None:
        # Clients keep connections alive; closing them ends the handler threads
        # waiting on the next request instead of leaving them to time out.
        with self._connections_lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


_ids = itertools.count(1)


def _new_id(prefix: str) -> str:
    return f"{prefix}_stub{next(_ids):06d}"


def _token_count(text: str) -> int:
    return max(1, len(text.split()))


def _chunks(text: str, pieces: int = 3) -> list[str]:
    """Split text into a few deltas so clients have to join a real stream."""
    if len(text) < pieces:
        return [text]
    step = -(-len(text) // pieces)
    return [text[i : i + step] for i in range(0, len(text), step)]


def _text_of(content: Any) -> str:
    """Join the text out of the content shapes the vendors use."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        if isinstance(content.get("text"), str):
            return str(content["text"])
        for key in ("content", "parts"):
            if key in content:
                return _text_of(content[key])
        return ""
    if isinstance(content, list):
        return "\n".join(t for t in (_text_of(part) for part in content) if t)
    return ""


# CLIs wrap context they add on their own (date, cwd, directory listing) in one
# XML-ish element per text part: <system-reminder>, <session_context>, ...
_INJECTED_CONTEXT = re.compile(r"^\s*<(?P<tag>[A-Za-z_-]+)>.*</(?P=tag)>\s*$", re.DOTALL)


def _user_text(content: Any) -> str:
    """The user's own text in one turn, leaving out parts the CLI injected."""
    if isinstance(content, list):
        texts = [_text_of(part) for part in content]
        own = [t for t in texts if t and not _INJECTED_CONTEXT.match(t)]
        return "\n".join(own or [t for t in texts if t])
    return _text_of(content)


def _last_user_text(turns: Any) -> str:
    if isinstance(turns, str):
        return turns
    if not isinstance(turns, list):
        return ""
    for turn in reversed(turns):
        if isinstance(turn, dict) and turn.get("role", "user") == "user":
            text = _user_text(turn.get("content", turn.get("parts")))
            if text:
                return text
    return ""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    # An idle keep-alive connection gives up after this long.
    timeout = 30

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # -- plumbing ---------------------------------------------------------

    @property
    def model_server(self) -> ModelServer:
        return self.server.model_server

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                data += self.rfile.read(size)
                self.rfile.readline()
            raw = bytes(data)
        else:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        encoding = self.headers.get("Content-Encoding", "").lower()
        if encoding == "gzip":
            raw = gzip.decompress(raw)
        elif encoding == "deflate":
            raw = zlib.decompress(raw)
        return raw

    def _json_body(self) -> Any:
        try:
            raw = self._read_body()
        except (ValueError, OSError, zlib.error, EOFError):
            self.close_connection = True
            return None
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return None

    def _record(
        self,
        protocol: str | None,
        status: int,
        *,
        prompt: str = "",
        model: str | None = None,
        stream: bool = False,
        body: Any = None,
    ) -> None:
        self.model_server.requests.append(
            RecordedRequest(
                method=self.command,
                path=self.path,
                protocol=protocol,
                prompt=prompt[:PROMPT_EXCERPT_CHARS],
                model=model,
                stream=stream,
                status=status,
                body=body if self.model_server.keep_bodies else None,
            )
        )

    def _send_json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _send_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _sse(self, payload: Any, event: str | None = None) -> None:
        text = f"data: {json.dumps(payload)}\n\n"
        if event is not None:
            text = f"event: {event}\n{text}"
        self._send_chunk(text.encode())

    def _not_found(self, body: Any = None) -> None:
        self._record(None, 404, body=body)
        self._send_json(404, {"error": {"message": f"no route for {self.path}", "code": 404}})

    # -- dispatch ---------------------------------------------------------

    def do_HEAD(self) -> None:
        self._dispatch()

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_PUT(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def do_PATCH(self) -> None:
        self._dispatch()

    def do_OPTIONS(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        try:
            self._route()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:
            # Most likely a test's answer callable raised: say so instead of
            # dropping the connection, which clients would retry or hang on.
            self.close_connection = True
            self._record(None, 500, prompt=f"{type(exc).__name__}: {exc}")
            with contextlib.suppress(OSError):
                self._send_json(500, {"error": {"message": f"stub server error: {exc!r}"}})

    def _route(self) -> None:
        path = urlsplit(self.path).path.rstrip("/") or "/"
        method = self.command
        body = self._json_body()

        if path == "/" and method in ("GET", "HEAD"):
            self._record(None, 200)
            self._send_json(200, {"ok": True})
        elif method == "POST" and path == "/v1/messages":
            self._anthropic_messages(body)
        elif method == "POST" and path == "/v1/messages/count_tokens":
            self._anthropic_count_tokens(body)
        elif method == "POST" and path == "/v1/responses":
            self._openai_responses(body)
        elif method == "POST" and path == "/v1/chat/completions":
            self._openai_chat(body)
        elif method == "GET" and path == "/v1/models":
            self._record(OPENAI_CHAT, 200)
            models = [{"id": "stub-model", "object": "model", "created": 0, "owned_by": "stub"}]
            self._send_json(200, {"object": "list", "data": models})
        elif method == "POST" and (match := _GEMINI_PATH.match(path)):
            self._gemini(match["model"], match["method"], body)
        else:
            self._not_found(body)

    def _failure(self, protocol: str, **record: Any) -> bool:
        """Answer with the configured failure status, if there is one for protocol."""
        status = self.model_server.fail.get(protocol)
        if status is None:
            return False
        self._record(protocol, status, **record)
        try:
            reason = HTTPStatus(status).phrase
        except ValueError:
            reason = "Error"
        message = f"stub server configured to fail with {status} {reason}"
        if protocol == ANTHROPIC:
            error = {
                "type": "error",
                "error": {"type": _anthropic_error_type(status), "message": message},
            }
        elif protocol == GEMINI:
            error = {
                "error": {"code": status, "message": message, "status": _google_status(status)}
            }
        else:
            error = {
                "error": {
                    "message": message,
                    "type": _openai_error_type(status),
                    "param": None,
                    "code": None,
                }
            }
        self._send_json(status, error)
        return True

    # -- anthropic ---------------------------------------------------------

    def _anthropic_messages(self, body: Any) -> None:
        body = body if isinstance(body, dict) else {}
        prompt = _last_user_text(body.get("messages"))
        model = str(body.get("model") or "stub-model")
        stream = bool(body.get("stream"))
        record = {"prompt": prompt, "model": model, "stream": stream, "body": body}
        if self._failure(ANTHROPIC, **record):
            return
        self._record(ANTHROPIC, 200, **record)
        message_id = _new_id("msg")
        input_tokens = _token_count(json.dumps(body.get("messages", "")))
        script = self.model_server.tool_calls.get(ANTHROPIC)
        call = script(body) if script is not None else None
        if call is not None:
            block = {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
            self._anthropic_reply(
                message_id,
                model,
                stream,
                block,
                {**block, "input": {}},
                [
                    {"type": "input_json_delta", "partial_json": piece}
                    for piece in _chunks(json.dumps(call.arguments))
                ],
                "tool_use",
                {"input_tokens": input_tokens, "output_tokens": 10},
            )
            return
        answer = self.model_server.answer_for(ANTHROPIC, prompt)
        self._anthropic_reply(
            message_id,
            model,
            stream,
            {"type": "text", "text": answer},
            {"type": "text", "text": ""},
            [{"type": "text_delta", "text": piece} for piece in _chunks(answer)],
            "end_turn",
            {"input_tokens": input_tokens, "output_tokens": _token_count(answer)},
        )

    def _anthropic_reply(
        self,
        message_id: str,
        model: str,
        stream: bool,
        block: dict[str, Any],
        opening: dict[str, Any],
        deltas: list[dict[str, Any]],
        stop_reason: str,
        usage: dict[str, int],
    ) -> None:
        """An assistant message of one content block (text or a tool call): whole, or as the
        events the Messages API streams, where ``opening`` starts the block and ``deltas``
        fill it in."""
        message = {"id": message_id, "type": "message", "role": "assistant", "model": model}
        if not stream:
            reply = {"content": [block], "stop_reason": stop_reason, "stop_sequence": None}
            self._send_json(200, {**message, **reply, "usage": usage})
            return
        self._start_stream()
        started: dict[str, Any] = {"content": [], "stop_reason": None, "stop_sequence": None}
        first = {"input_tokens": usage["input_tokens"], "output_tokens": 1}
        self._sse(
            {"type": "message_start", "message": {**message, **started, "usage": first}},
            "message_start",
        )
        self._sse(
            {"type": "content_block_start", "index": 0, "content_block": opening},
            "content_block_start",
        )
        for delta in deltas:
            self._sse(
                {"type": "content_block_delta", "index": 0, "delta": delta}, "content_block_delta"
            )
        self._sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
        self._sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": usage,
            },
            "message_delta",
        )
        self._sse({"type": "message_stop"}, "message_stop")
        self._end_stream()

    def _anthropic_count_tokens(self, body: Any) -> None:
        body = body if isinstance(body, dict) else {}
        prompt = _last_user_text(body.get("messages"))
        record = {"prompt": prompt, "model": body.get("model"), "body": body}
        if self._failure(ANTHROPIC, **record):
            return
        self._record(ANTHROPIC, 200, **record)
        self._send_json(200, {"input_tokens": _token_count(json.dumps(body))})

    # -- openai responses --------------------------------------------------

    def _openai_responses(self, body: Any) -> None:
        body = body if isinstance(body, dict) else {}
        prompt = _last_user_text(body.get("input"))
        model = str(body.get("model") or "stub-model")
        stream = bool(body.get("stream"))
        record = {"prompt": prompt, "model": model, "stream": stream, "body": body}
        if self._failure(OPENAI_RESPONSES, **record):
            return
        self._record(OPENAI_RESPONSES, 200, **record)
        script = self.model_server.tool_calls.get(OPENAI_RESPONSES)
        call = script(body) if script is not None else None
        answer = "" if call is not None else self.model_server.answer_for(OPENAI_RESPONSES, prompt)
        response_id, item_id = _new_id("resp"), _new_id("msg")
        input_tokens = _token_count(json.dumps(body.get("input", "")))
        output_tokens = _token_count(answer)
        item: dict[str, Any] = {
            "id": item_id,
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": answer, "annotations": []}],
        }
        if call is not None:
            item = {
                "id": _new_id("fc"),
                "type": "function_call",
                "status": "completed",
                "call_id": call.id,
                "name": call.name,
                "arguments": json.dumps(call.arguments),
            }
        response: dict[str, Any] = {
            "id": response_id,
            "object": "response",
            "created_at": int(time.time()),
            "status": "completed",
            "model": model,
            "output": [item],
            "usage": {
                "input_tokens": input_tokens,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": output_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": input_tokens + output_tokens,
            },
        }
        if not stream:
            self._send_json(200, response)
            return
        seq = itertools.count()

        def event(kind: str, **fields: Any) -> None:
            self._sse({"type": kind, "sequence_number": next(seq), **fields}, kind)

        self._start_stream()
        event(
            "response.created",
            response={**response, "status": "in_progress", "output": [], "usage": None},
        )
        if call is not None:
            event(
                "response.output_item.added",
                output_index=0,
                item={**item, "status": "in_progress", "arguments": ""},
            )
            event(
                "response.function_call_arguments.delta",
                item_id=item["id"],
                output_index=0,
                delta=item["arguments"],
            )
            event(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=0,
                arguments=item["arguments"],
            )
            event("response.output_item.done", output_index=0, item=item)
            event("response.completed", response=response)
            self._end_stream()
            return
        event(
            "response.output_item.added",
            output_index=0,
            item={**item, "status": "in_progress", "content": []},
        )
        event(
            "response.content_part.added",
            item_id=item_id,
            output_index=0,
            content_index=0,
            part={"type": "output_text", "text": "", "annotations": []},
        )
        for piece in _chunks(answer):
            event(
                "response.output_text.delta",
                item_id=item_id,
                output_index=0,
                content_index=0,
                delta=piece,
            )
        event(
            "response.output_text.done",
            item_id=item_id,
            output_index=0,
            content_index=0,
            text=answer,
        )
        event("response.output_item.done", output_index=0, item=item)
        event("response.completed", response=response)
        self._end_stream()

    # -- openai chat completions -------------------------------------------

    def _openai_chat(self, body: Any) -> None:
        body = body if isinstance(body, dict) else {}
        prompt = _last_user_text(body.get("messages"))
        model = str(body.get("model") or "stub-model")
        stream = bool(body.get("stream"))
        record = {"prompt": prompt, "model": model, "stream": stream, "body": body}
        if self._failure(OPENAI_CHAT, **record):
            return
        self._record(OPENAI_CHAT, 200, **record)
        answer = self.model_server.answer_for(OPENAI_CHAT, prompt)
        completion_id, created = _new_id("chatcmpl"), int(time.time())
        prompt_tokens = _token_count(json.dumps(body.get("messages", "")))
        completion_tokens = _token_count(answer)
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        common = {"id": completion_id, "created": created, "model": model}
        if not stream:
            message = {"role": "assistant", "content": answer}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            self._send_json(
                200, {**common, "object": "chat.completion", "choices": [choice], "usage": usage}
            )
            return

        def chunk(delta: dict[str, Any], finish: str | None) -> None:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            self._sse({**common, "object": "chat.completion.chunk", "choices": [choice]})

        self._start_stream()
        chunk({"role": "assistant", "content": ""}, None)
        for piece in _chunks(answer):
            chunk({"content": piece}, None)
        chunk({}, "stop")
        if (body.get("stream_options") or {}).get("include_usage"):
            self._sse({**common, "object": "chat.completion.chunk", "choices": [], "usage": usage})
        self._send_chunk(b"data: [DONE]\n\n")
        self._end_stream()

    # -- gemini ------------------------------------------------------------

    def _gemini_function_call(
        self, call: ToolCall, model: str, stream: bool, prompt_tokens: int
    ) -> None:
        part = {"functionCall": {"name": call.name, "args": call.arguments, "id": call.id}}
        usage = {
            "promptTokenCount": prompt_tokens,
            "candidatesTokenCount": 10,
            "totalTokenCount": prompt_tokens + 10,
        }
        payload = _gemini_candidate([part], model, usage)
        if not stream:
            self._send_json(200, payload)
            return
        self._start_stream()
        self._sse(payload)
        self._end_stream()

    def _gemini(self, model: str, method: str, body: Any) -> None:
        body = body if isinstance(body, dict) else {}
        contents = body.get("contents")
        if contents is None and isinstance(body.get("generateContentRequest"), dict):
            contents = body["generateContentRequest"].get("contents")
        prompt = _last_user_text(contents)
        stream = method == "streamGenerateContent"
        record = {"prompt": prompt, "model": model, "stream": stream, "body": body}
        if self._failure(GEMINI, **record):
            return
        self._record(GEMINI, 200, **record)
        prompt_tokens = _token_count(json.dumps(contents or ""))
        if method == "countTokens":
            self._send_json(200, {"totalTokens": prompt_tokens})
            return
        script = self.model_server.tool_calls.get(GEMINI)
        call = script(body) if script is not None else None
        if call is not None:
            self._gemini_function_call(call, model, stream, prompt_tokens)
            return
        answer = self.model_server.answer_for(GEMINI, prompt)
        output_tokens = _token_count(answer)
        usage = {
            "promptTokenCount": prompt_tokens,
            "candidatesTokenCount": output_tokens,
            "totalTokenCount": prompt_tokens + output_tokens,
        }

        def response(text: str, final: bool) -> dict[str, Any]:
            candidate: dict[str, Any] = {
                "content": {"role": "model", "parts": [{"text": text}]},
                "index": 0,
            }
            result: dict[str, Any] = {"candidates": [candidate], "modelVersion": model}
            if final:
                candidate["finishReason"] = "STOP"
                result["usageMetadata"] = usage
            return result

        if not stream:
            self._send_json(200, response(answer, final=True))
            return
        self._start_stream()
        pieces = _chunks(answer)
        for i, piece in enumerate(pieces):
            self._sse(response(piece, final=i == len(pieces) - 1))
        self._end_stream()


def _gemini_candidate(parts: list[dict[str, Any]], model: str, usage: dict[str, int]) -> Any:
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "index": 0, "finishReason": "STOP"}
        ],
        "usageMetadata": usage,
        "modelVersion": model,
    }


def _anthropic_error_type(status: int) -> str:
    return {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        413: "request_too_large",
        429: "rate_limit_error",
        529: "overloaded_error",
    }.get(status, "api_error")


def _openai_error_type(status: int) -> str:
    if status == 429:
        return "rate_limit_exceeded"
    if status == 401:
        return "authentication_error"
    return "server_error" if status >= 500 else "invalid_request_error"


def _google_status(status: int) -> str:
    return {
        400: "INVALID_ARGUMENT",
        401: "UNAUTHENTICATED",
        403: "PERMISSION_DENIED",
        404: "NOT_FOUND",
        429: "RESOURCE_EXHAUSTED",
        503: "UNAVAILABLE",
        504: "DEADLINE_EXCEEDED",
    }.get(status, "INTERNAL")
