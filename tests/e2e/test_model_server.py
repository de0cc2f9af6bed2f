"""The loopback model server on its own, over plain HTTP (no CLIs needed)."""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.model_server import (
    ANTHROPIC,
    DEFAULT_ANSWER,
    GEMINI,
    OPENAI_CHAT,
    OPENAI_RESPONSES,
    ModelServer,
)

# An opener without proxy handling: requests must go straight to 127.0.0.1.
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as running:
        yield running


def call(
    server: ModelServer, path: str, body: Any = None, method: str | None = None
) -> tuple[int, str, str]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(server.base_url + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    try:
        with _opener.open(request, timeout=10) as response:
            return (
                response.status,
                response.headers.get("Content-Type", ""),
                response.read().decode(),
            )
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Content-Type", ""), error.read().decode()


def sse_data(text: str) -> list[Any]:
    return [
        json.loads(line[len("data: ") :])
        for line in text.splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]


def test_base_url_is_loopback(server: ModelServer) -> None:
    assert server.base_url.startswith("http://127.0.0.1:")
    assert call(server, "/", method="HEAD")[0] == 200


def test_anthropic_stream_and_json(server: ModelServer) -> None:
    server.answers[ANTHROPIC] = "Anthropic says hi."
    body = {"model": "m", "messages": [{"role": "user", "content": "hello"}], "stream": True}

    status, ctype, text = call(server, "/v1/messages?beta=true", body)
    assert (status, ctype) == (200, "text/event-stream")
    events = sse_data(text)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "message_start"
    assert kinds[-2:] == ["message_delta", "message_stop"]
    assert events[-2]["delta"]["stop_reason"] == "end_turn"
    deltas = [e["delta"]["text"] for e in events if e["type"] == "content_block_delta"]
    assert "".join(deltas) == "Anthropic says hi."

    text = call(server, "/v1/messages", {**body, "stream": False})[2]
    assert json.loads(text)["content"][0]["text"] == "Anthropic says hi."
    assert json.loads(call(server, "/v1/messages/count_tokens", body)[2])["input_tokens"] > 0


def test_openai_responses_stream(server: ModelServer) -> None:
    body = {"model": "m", "stream": True, "input": [{"role": "user", "content": "q"}]}
    events = sse_data(call(server, "/v1/responses", body)[2])
    kinds = [e["type"] for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.output_item.done" in kinds
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert deltas == DEFAULT_ANSWER
    assert events[-1]["response"]["usage"]["total_tokens"] > 0


def test_gemini_stream_and_json(server: ModelServer) -> None:
    server.answers[GEMINI] = lambda prompt: f"echo: {prompt}"
    body = {"contents": [{"role": "user", "parts": [{"text": "<ctx>x</ctx>"}, {"text": "ping"}]}]}

    events = sse_data(call(server, "/v1beta/models/g:streamGenerateContent?alt=sse", body)[2])
    assert (
        "".join(e["candidates"][0]["content"]["parts"][0]["text"] for e in events) == "echo: ping"
    )
    assert events[-1]["candidates"][0]["finishReason"] == "STOP"
    assert "usageMetadata" in events[-1]

    reply = json.loads(call(server, "/v1beta/models/g:generateContent", body)[2])
    assert reply["candidates"][0]["content"]["parts"][0]["text"] == "echo: ping"
    assert server.requests.for_protocol(GEMINI)[0].model == "g"


def test_openai_chat_stream_json_and_models(server: ModelServer) -> None:
    server.answers[OPENAI_CHAT] = "chat answer"
    body = {
        "model": "m",
        "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    text = call(server, "/v1/chat/completions", body)[2]
    assert text.rstrip().endswith("data: [DONE]")
    chunks = sse_data(text)
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"]) == (
        "chat answer"
    )
    assert chunks[-1]["usage"]["total_tokens"] > 0

    reply = json.loads(call(server, "/v1/chat/completions", {**body, "stream": False})[2])
    assert reply["choices"][0]["message"]["content"] == "chat answer"
    assert json.loads(call(server, "/v1/models")[2])["data"][0]["id"] == "stub-model"
    assert [r.prompt for r in server.requests.for_protocol(OPENAI_CHAT)][:2] == ["u", "u"]


@pytest.mark.parametrize(
    ("protocol", "path", "error_field"),
    [
        (ANTHROPIC, "/v1/messages", ("error", "type")),
        (OPENAI_RESPONSES, "/v1/responses", ("error", "type")),
        (OPENAI_CHAT, "/v1/chat/completions", ("error", "type")),
        (GEMINI, "/v1beta/models/g:streamGenerateContent?alt=sse", ("error", "status")),
    ],
)
def test_configured_failure_uses_vendor_error_shape(
    server: ModelServer, protocol: str, path: str, error_field: tuple[str, str]
) -> None:
    server.fail[protocol] = 400
    status, ctype, text = call(server, path, {"stream": True, "messages": []})
    assert (status, ctype) == (400, "application/json")
    outer, inner = error_field
    assert json.loads(text)[outer][inner] in ("invalid_request_error", "INVALID_ARGUMENT")
    assert server.requests[-1].status == 400 and server.requests[-1].protocol == protocol


def test_unknown_paths_get_a_recorded_404(server: ModelServer) -> None:
    assert call(server, "/api/event_logging/batch", {"events": []})[0] == 404
    assert call(server, "/v1/nope", method="GET")[0] == 404
    assert [(r.method, r.path, r.protocol, r.status) for r in server.requests] == [
        ("POST", "/api/event_logging/batch", None, 404),
        ("GET", "/v1/nope", None, 404),
    ]


def test_stop_closes_idle_keep_alive_connections() -> None:
    server = ModelServer().start()
    host, port = server.base_url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        connection.request("GET", "/")
        connection.getresponse().read()
        server.stop()
        assert connection.sock is not None
        assert connection.sock.recv(1) == b""
    finally:
        connection.close()
    with pytest.raises(RuntimeError):
        _ = server.base_url
