"""A loopback OpenAI-compatible server whose models misbehave on request.

Real HTTP on 127.0.0.1 in a background thread: ``GET /v1/models`` lists the models it was
given, ``POST /v1/chat/completions`` answers per model with one of the behaviours below,
streamed (server-sent events) or whole, as the client asks. Every request is recorded with
its Authorization header and the client's port, so tests can check which key was sent and
whether connections were reused.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

Kind = Literal[
    "answer",  # a normal completion
    "slow",  # wait delay_s, then answer
    "status",  # answer with an HTTP error status
    "status_page",  # an HTTP error status whose body is `text` as it is (a proxy's page)
    "malformed_json",  # 200 with a body (or stream event) that is not JSON
    "truncated_stream",  # start the answer, then drop the connection mid-body
    "echo_key",  # an error body that quotes the Authorization header back
    "rate_limited",  # 429 (with Retry-After when given) for the first `times` calls, then answer
]


@dataclass
class Behaviour:
    kind: Kind = "answer"
    text: str | Callable[[str], str] = "hello"
    delay_s: float = 0.0
    status: int = 500
    retry_after: str | None = None
    times: int = 1
    # response_format types answered with a 400 that names them, as a server without
    # structured outputs does; and the finish_reason a normal answer ends with.
    refuse_formats: frozenset[str] = frozenset()
    finish_reason: str = "stop"


def answering(text: str | Callable[[str], str]) -> Behaviour:
    return Behaviour("answer", text)


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    model: str | None
    authorization: str | None
    client_port: int
    stream: bool
    prompt: str
    at: float = field(default_factory=time.monotonic)
    body: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass
class OpenAIServer:
    models: list[str] = field(default_factory=list)
    behaviours: dict[str, Behaviour] = field(default_factory=dict)
    models_status: int | None = None  # set to fail GET /v1/models with this status
    seen: list[Seen] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _httpd: _Server | None = None
    _thread: threading.Thread | None = None
    _refused: dict[str, int] = field(default_factory=dict)

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def record(self, item: Seen) -> None:
        with self._lock:
            self.seen.append(item)

    def refuse(self, model: str, times: int) -> bool:
        """True for the first ``times`` calls to ``model`` (a rate limit that lifts)."""
        with self._lock:
            count = self._refused.get(model, 0)
            self._refused[model] = count + 1
            return count < times

    def requests(self, path: str | None = None) -> list[Seen]:
        with self._lock:
            return [s for s in self.seen if path is None or s.path == path]

    @property
    def models_calls(self) -> int:
        return len(self.requests("/v1/models"))

    def chat_models(self) -> list[str | None]:
        return [s.model for s in self.requests("/v1/chat/completions")]

    def start(self) -> OpenAIServer:
        httpd = _Server(("127.0.0.1", 0), _Handler)
        httpd.app = self  # type: ignore[attr-defined]
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait(self, seconds: float) -> None:
        self._stop.wait(seconds)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (timeout, cancel) leaves a broken pipe behind: expected here.
        pass


def _prompt_of(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            return str(message.get("content", ""))
    return ""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30
    # Headers and body leave in one write, and stream chunks leave at once (no Nagle), as
    # from a real model server; otherwise delayed ACKs add ~40 ms to every call.
    wbufsize = 1 << 16
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    @property
    def app(self) -> OpenAIServer:
        return self.server.app  # type: ignore[attr-defined,no-any-return]

    def _send(self, status: int, payload: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _record(
        self, model: str | None, stream: bool, prompt: str, body: dict[str, Any] | None = None
    ) -> None:
        self.app.record(
            Seen(
                method=self.command,
                path=self.path,
                model=model,
                authorization=self.headers.get("Authorization"),
                client_port=self.client_address[1],
                stream=stream,
                prompt=prompt,
                body=body or {},
            )
        )

    def do_GET(self) -> None:
        self._record(None, False, "")
        if self.path != "/v1/models":
            self._send(404, b'{"error": {"message": "no such route"}}')
            return
        if self.app.models_status is not None:
            self._send(self.app.models_status, b'{"error": {"message": "models are down"}}')
            return
        data = [{"id": m, "object": "model", "owned_by": m.split("/")[0]} for m in self.app.models]
        self._send(200, json.dumps({"object": "list", "data": data}).encode())

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        model = body.get("model")
        stream = bool(body.get("stream"))
        prompt = _prompt_of(body)
        self._record(model, stream, prompt, body)
        if self.path != "/v1/chat/completions":
            self._send(404, b'{"error": {"message": "no such route"}}')
            return
        if model not in self.app.models and model not in self.app.behaviours:
            self._send(404, json.dumps({"error": {"message": f"model {model} not found"}}).encode())
            return
        behaviour = self.app.behaviours.get(model, Behaviour())
        asked = (body.get("response_format") or {}).get("type")
        if asked in behaviour.refuse_formats:
            # Worded as llama.cpp-style servers word it: the parameter and the type.
            message = f"response_format type '{asked}' is not supported by this server"
            error = {"error": {"message": message, "param": "response_format"}}
            self._send(400, json.dumps(error).encode())
            return
        try:
            self._behave(behaviour, model, stream, prompt)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _behave(self, b: Behaviour, model: str, stream: bool, prompt: str) -> None:
        if b.kind == "slow":
            self.app.wait(b.delay_s)
        if b.kind == "status":
            message = {"error": {"message": f"model {model} is rate limited or broken"}}
            self._send(b.status, json.dumps(message).encode())
            return
        if b.kind == "status_page":
            page = b.text if isinstance(b.text, str) else b.text(prompt)
            self._send(b.status, page.encode())
            return
        if b.kind == "rate_limited" and self.app.refuse(model, b.times):
            payload = json.dumps({"error": {"message": "rate limit reached"}}).encode()
            self.send_response(429)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            if b.retry_after is not None:
                self.send_header("Retry-After", b.retry_after)
            self.end_headers()
            self.wfile.write(payload)
            return
        if b.kind == "echo_key":
            auth = self.headers.get("Authorization", "")
            message = {"error": {"message": f"upstream rejected credentials {auth}"}}
            self._send(500, json.dumps(message).encode())
            return
        text = b.text(prompt) if callable(b.text) else b.text
        if b.kind == "malformed_json":
            if stream:
                self._start_stream()
                self._chunk(b"data: {this is not json\n\n")
                self._chunk(b"data: [DONE]\n\n")
                self._chunk(b"")
            else:
                self._send(200, b'{"choices": [{"message": {"content": "trunc')
            return
        common = {"id": "chatcmpl-1", "created": int(time.time()), "model": model}
        if not stream:
            choice = {"index": 0, "message": {"role": "assistant", "content": text}}
            choice["finish_reason"] = b.finish_reason
            payload = json.dumps({**common, "object": "chat.completion", "choices": [choice]})
            if b.kind == "truncated_stream":
                # Promise the whole body, send half of it, hang up.
                data = payload.encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data[: len(data) // 2])
                self._hang_up()
                return
            self._send(200, payload.encode())
            return
        self._start_stream()
        pieces = [text[i : i + 40] for i in range(0, len(text), 40)] or [""]
        if b.kind == "truncated_stream":
            pieces = pieces[: max(1, len(pieces) // 2)]
        for piece in pieces:
            delta = {"index": 0, "delta": {"content": piece}, "finish_reason": None}
            event = {**common, "object": "chat.completion.chunk", "choices": [delta]}
            self._chunk(f"data: {json.dumps(event)}\n\n".encode())
        if b.kind == "truncated_stream":
            # Drop the connection without the terminating chunk: a body cut short.
            self._hang_up()
            return
        end = {"index": 0, "delta": {}, "finish_reason": b.finish_reason}
        self._chunk(
            f"data: {json.dumps({**common, 'object': 'chat.completion.chunk', 'choices': [end]})}"
            "\n\n".encode()
        )
        self._chunk(b"data: [DONE]\n\n")
        self._chunk(b"")

    def _hang_up(self) -> None:
        self.wfile.flush()
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)
        self.close_connection = True

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()
