"""The runtime protocol in the core: one test of what a runtime is, keyword-built replies,
an explicit reply check, and an endpoint client that takes an httpx transport."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from rune_council import CommandRuntime, FunctionRuntime
from rune_council.core.answer import answer_problem
from rune_council.core.runtime import Runtime, RuntimeReply, is_runtime
from rune_council.runtimes.bridge import BridgeRuntime
from rune_council.runtimes.cli import CliRuntime
from rune_council.runtimes.clis import BUILTIN
from rune_council.runtimes.http import (
    CandidatePool,
    EndpointClient,
    EndpointModel,
    HttpRuntime,
    ModelChoice,
)
from tests.helpers import answer

Q = "Should we shard the orders table?"
VOICE = answer(Q, "NO", [])


def test_one_test_says_what_a_runtime_is() -> None:
    client = EndpointClient("lab", "http://127.0.0.1:9/v1")
    choice = ModelChoice("meta/llama-3.3-70b-instruct", "meta", "confirmed")
    runtimes: list[object] = [
        FunctionRuntime(lambda p: p),
        CommandRuntime(["cat"]),
        CliRuntime(BUILTIN["claude"], "/usr/bin/claude"),
        BridgeRuntime("/usr/bin/1devtool-agent", "claude", "anthropic", "confirmed"),
        HttpRuntime(client, choice),
    ]
    assert all(isinstance(r, Runtime) and is_runtime(r) for r in runtimes)
    # A prompt-to-text callable is a subagent function, not a runtime: the council wraps it.
    not_runtimes: list[object] = [lambda p: p, EndpointModel(client, choice), "claude", None]
    assert not any(is_runtime(r) for r in not_runtimes)


def test_a_reply_is_built_with_keywords_only() -> None:
    reply = RuntimeReply(outcome="ok", text="hi", detail="answered")
    assert (reply.exit_code, reply.latency_ms, reply.attempts) == (None, 0, ())
    with pytest.raises(TypeError):
        RuntimeReply("ok", "hi", "answered")  # type: ignore[misc]


def test_the_reply_check_is_the_answer_contract() -> None:
    assert answer_problem(VOICE) is None
    problem = answer_problem("Sure, sharding is fine.")
    assert problem is not None and problem.startswith("not a voice answer: no JSON object")


def _mock_endpoint(seen: list[dict[str, object]]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json={"data": [{"id": "prose/model"}, {"id": "json/m"}]})
        body = json.loads(request.content)
        seen.append(body)
        text = "I think it is fine." if body["model"] == "prose/model" else VOICE
        return httpx.Response(200, json={"choices": [{"message": {"content": text}}]})

    return httpx.MockTransport(handle)


def test_an_endpoint_client_takes_a_transport_so_callers_test_without_a_server() -> None:
    seen: list[dict[str, object]] = []
    client = EndpointClient("mock", "https://models.invalid/v1", transport=_mock_endpoint(seen))
    pool = CandidatePool(
        [
            ModelChoice("prose/model", "meta", "confirmed"),
            ModelChoice("json/m", "qwen", "confirmed"),
        ]
    )
    runtime = HttpRuntime(client, pool.ranked[0], pool, stream=False)

    async def go() -> tuple[list[str], RuntimeReply, RuntimeReply]:
        try:
            models = await client.list_models(timeout_s=5)
            plain = await runtime.ask("Vote on item-1.", timeout_s=5, max_output_bytes=10_000)
            voice = await runtime.ask(
                "Answer as JSON.", timeout_s=5, max_output_bytes=10_000, check=answer_problem
            )
            return models, plain, voice
        finally:
            await client.aclose()

    models, plain, voice = asyncio.run(go())
    assert models == ["prose/model", "json/m"]
    # Without a check, prose is the answer; with the voice-answer check it fails over.
    assert (plain.outcome, plain.text) == ("ok", "I think it is fine.")
    assert [a.outcome for a in voice.attempts] == ["malformed", "ok"]
    assert voice.answered_by is not None and voice.answered_by.model == "json/m"
    assert [b["model"] for b in seen] == ["prose/model", "prose/model", "json/m"]
