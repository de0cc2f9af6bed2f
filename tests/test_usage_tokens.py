"""The tokens an endpoint reports for a call land on the attempt, and only what it reported:
a reply with no usage, or a usage that does not read as a count, leaves the tokens unknown.

A real HTTP server on 127.0.0.1 answers each model with its own ``usage`` object, whole or
streamed (in the final chunk, as OpenAI-style servers send it)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from rune_council.core.contract import Attempt, TokenUsage
from rune_council.runtimes.http import EndpointClient, HttpRuntime, ModelChoice

# Each model answers with this ``usage`` (the key is left out for MISSING).
MISSING = object()
USAGES: dict[str, Any] = {
    "counted": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150},
    "none": MISSING,
    "null": None,
    "negative": {"prompt_tokens": -1, "completion_tokens": -30},
    "strings": {"prompt_tokens": "120", "completion_tokens": "30"},
    "huge": {"prompt_tokens": 10**30, "completion_tokens": 10**30},
    "booleans": {"prompt_tokens": True, "completion_tokens": False},
    "floats": {"prompt_tokens": 12.5, "completion_tokens": 3.0},
    "half": {"prompt_tokens": 77, "completion_tokens": "lots"},
    "not-an-object": [1, 2],
}


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        model = body["model"]
        usage = USAGES[model]
        extra = {} if usage is MISSING else {"usage": usage}
        if body.get("stream"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            events = [
                {"choices": [{"index": 0, "delta": {"content": "fine"}, "finish_reason": None}]},
                {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                {"choices": [], **extra},
            ]
            for event in events:
                self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            return
        reply = {
            "choices": [{"index": 0, "message": {"content": "fine"}, "finish_reason": "stop"}],
            **extra,
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()


def attempt_for(base_url: str, model: str, *, stream: bool) -> Attempt:
    runtime = HttpRuntime(
        EndpointClient("local", base_url), ModelChoice(model, "meta", "confirmed"), stream=stream
    )

    async def go() -> Attempt:
        try:
            reply = await runtime.ask("say fine", timeout_s=10, max_output_bytes=100_000)
        finally:
            await runtime.client.aclose()
        assert reply.outcome == "ok", reply.detail
        [attempt] = reply.attempts
        return attempt

    return asyncio.run(go())


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_the_tokens_an_endpoint_reports_are_kept_on_the_attempt(
    base_url: str, stream: bool
) -> None:
    attempt = attempt_for(base_url, "counted", stream=stream)
    assert attempt.usage == TokenUsage(prompt_tokens=120, completion_tokens=30)
    # And it survives the run file: written and read back as the attempt it is.
    again = Attempt.model_validate_json(attempt.model_dump_json())
    assert again.usage == attempt.usage


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize(
    "model",
    ["none", "null", "negative", "strings", "huge", "booleans", "floats", "not-an-object"],
)
def test_no_usage_or_garbage_usage_leaves_the_tokens_unknown(
    base_url: str, model: str, stream: bool
) -> None:
    assert attempt_for(base_url, model, stream=stream).usage is None


def test_each_count_is_read_on_its_own(base_url: str) -> None:
    attempt = attempt_for(base_url, "half", stream=False)
    assert attempt.usage == TokenUsage(prompt_tokens=77, completion_tokens=None)


def test_a_run_file_count_out_of_bounds_is_refused_not_believed() -> None:
    with pytest.raises(ValueError):
        TokenUsage(prompt_tokens=-1)
    with pytest.raises(ValueError):
        TokenUsage(completion_tokens=10**30)
