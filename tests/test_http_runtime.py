"""The http runtime against a real loopback server: failure classes, bounds, failover, reuse."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from rune_council.core.answer import answer_problem
from rune_council.core.contract import PerspectiveRequest
from rune_council.core.errors import EndpointCallError
from rune_council.core.prompts import compose_prompt
from rune_council.core.runtime import ReplyCheck, RuntimeReply
from rune_council.runtimes.http import (
    ApiKey,
    CandidatePool,
    EndpointClient,
    EndpointModel,
    HttpRuntime,
    ModelChoice,
)
from tests.helpers import answer, claim
from tests.http_server import Behaviour, OpenAIServer, answering

Q = "Should we shard the orders table?"
GOOD = answer(Q, "NO, not yet", [claim("There is no rollback step")])
KEY = "sk-test-runtime-0123456789"

BAD = "acme/broken"
GOOD_MODEL = "meta/llama-3.3-70b-instruct"


def choice(model: str, family: str = "meta") -> ModelChoice:
    return ModelChoice(model, family, "confirmed")


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    srv = OpenAIServer(models=[BAD, GOOD_MODEL], behaviours={GOOD_MODEL: answering(GOOD)})
    with srv:
        yield srv


# What a council slot sends: it asks for the voice answer and passes the check for one.
VOICE_PROMPT = compose_prompt(PerspectiveRequest(id="t", question=Q), "standard", None, None)


def ask(
    runtime: HttpRuntime,
    *,
    timeout_s: float = 5.0,
    max_bytes: int = 1_000_000,
    prompt: str = VOICE_PROMPT,
    check: ReplyCheck | None = answer_problem,
) -> RuntimeReply:
    async def go() -> RuntimeReply:
        try:
            return await runtime.ask(
                prompt, timeout_s=timeout_s, max_output_bytes=max_bytes, check=check
            )
        finally:
            await runtime.client.aclose()

    return asyncio.run(go())


# A timeout spends the slot's whole budget, so it is not among the failures that fail over
# (tests/test_security_budget.py covers it).
FAILURES = [
    (Behaviour("status", status=429), "http_status", 429),
    (Behaviour("status", status=500), "http_status", 500),
    (Behaviour("malformed_json"), "malformed", None),
    (Behaviour("truncated_stream", GOOD), "transport_error", None),
    (answering("Sure! I think sharding is fine."), "malformed", None),
]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize(
    ("behaviour", "kind", "status"), FAILURES, ids=[f[1] + str(f[2] or "") for f in FAILURES]
)
def test_each_failure_is_classified_and_the_slot_fails_over(
    server: OpenAIServer, behaviour: Behaviour, kind: str, status: int | None, stream: bool
) -> None:
    server.behaviours[BAD] = behaviour
    pool = CandidatePool([choice(BAD, "acme"), choice(GOOD_MODEL)])
    client = EndpointClient("lab", server.base_url)
    runtime = HttpRuntime(client, choice(BAD, "acme"), pool, stream=stream)
    reply = ask(runtime, timeout_s=1.5)

    assert reply.outcome == "ok"
    first, second = reply.attempts
    assert (first.model, first.outcome, first.http_status) == (BAD, kind, status)
    assert first.latency_ms is not None and first.detail
    assert (second.model, second.outcome) == (GOOD_MODEL, "ok")
    assert reply.answered_by is not None
    assert reply.answered_by.model == GOOD_MODEL
    assert reply.answered_by.runtime == f"lab:{GOOD_MODEL}"
    assert reply.text is not None and "no rollback step" in reply.text
    assert server.chat_models() == [BAD, GOOD_MODEL]


def test_a_status_failure_keeps_the_status_and_the_servers_message(server: OpenAIServer) -> None:
    server.behaviours[BAD] = Behaviour("status", status=503)
    runtime = HttpRuntime(EndpointClient("lab", server.base_url), choice(BAD), None)
    reply = ask(runtime)
    assert reply.outcome == "http_status"
    [only] = reply.attempts
    assert only.http_status == 503
    assert "HTTP 503" in only.detail and "rate limited or broken" in only.detail


def test_an_error_page_over_several_lines_becomes_a_one_line_reason(
    server: OpenAIServer,
) -> None:
    page = "<html>\n<head><title>502 Bad Gateway</title></head>\n<body>\n upstream down\n</body>"
    server.behaviours[BAD] = Behaviour("status_page", text=page, status=502)
    runtime = HttpRuntime(EndpointClient("lab", server.base_url), choice(BAD), None)
    reply = ask(runtime)
    [only] = reply.attempts
    assert only.http_status == 502
    assert "\n" not in only.detail and "\n" not in reply.detail
    assert "HTTP 502" in only.detail and "upstream down" in only.detail


def test_a_rejected_key_does_not_walk_through_every_model(server: OpenAIServer) -> None:
    server.behaviours[BAD] = Behaviour("status", status=401)
    pool = CandidatePool([choice(BAD), choice(GOOD_MODEL, "google")])
    runtime = HttpRuntime(EndpointClient("lab", server.base_url), choice(BAD), pool)
    reply = ask(runtime)
    assert reply.outcome == "http_status"
    assert [a.http_status for a in reply.attempts] == [401]
    assert server.chat_models() == [BAD]


def test_failover_stops_at_max_attempts(server: OpenAIServer) -> None:
    models = [f"acme/m{i}" for i in range(5)]
    server.models = models
    for m in models:
        server.behaviours[m] = Behaviour("status", status=500)
    pool = CandidatePool([choice(m, f"f{i}") for i, m in enumerate(models)], max_attempts=3)
    runtime = HttpRuntime(EndpointClient("lab", server.base_url), pool.ranked[0], pool)
    reply = ask(runtime)
    assert reply.outcome == "http_status"
    assert server.chat_models() == models[:3]
    assert reply.detail.count("http_status") == 3


def test_failover_prefers_a_family_no_other_slot_speaks_for() -> None:
    ranked = [
        choice("meta/a", "meta"),
        choice("mistralai/b", "mistral"),
        choice("meta/c", "meta"),
        choice("acme/x", "unknown"),
        choice("qwen/d", "qwen"),
    ]
    ranked[3] = ModelChoice("acme/x", "unknown", "unknown")
    pool = CandidatePool(ranked)
    pool.hold("meta/a")  # another slot holds meta
    pool.hold("mistralai/b")  # this slot, failing
    pool.release("mistralai/b")
    assert pool.replacement({"mistralai/b"}).model == "qwen/d"
    pool.hold("qwen/d")
    # No new confirmed family left: an unconfirmed model before a second meta seat.
    assert pool.replacement({"mistralai/b", "qwen/d"}).model == "acme/x"


def test_an_oversized_answer_is_refused_not_kept(server: OpenAIServer) -> None:
    server.behaviours[GOOD_MODEL] = answering("x" * 200_000)
    for stream in (True, False):
        runtime = HttpRuntime(
            EndpointClient("lab", server.base_url), choice(GOOD_MODEL), None, stream=stream
        )
        reply = ask(runtime, max_bytes=4096)
        assert reply.outcome == "too_large", stream
        assert reply.text is None


def test_the_key_goes_in_the_header_and_never_into_a_detail_or_answer(
    server: OpenAIServer,
) -> None:
    server.behaviours[BAD] = Behaviour("echo_key")
    server.behaviours[GOOD_MODEL] = answering(lambda p: GOOD.replace("Thanks.", f"key {KEY}"))
    pool = CandidatePool([choice(BAD), choice(GOOD_MODEL, "google")])
    client = EndpointClient("lab", server.base_url, ApiKey(KEY, "$LAB_KEY"))
    reply = ask(HttpRuntime(client, choice(BAD), pool))
    assert {s.authorization for s in server.requests()} == {f"Bearer {KEY}"}
    assert reply.outcome == "ok"
    assert reply.text is not None and KEY not in reply.text
    assert "[redacted]" in reply.attempts[0].detail
    assert KEY not in repr(reply)
    assert KEY not in str(ApiKey(KEY, "x")) and KEY not in repr(ApiKey(KEY, "x"))


def test_one_client_keeps_its_connection_alive_across_calls(server: OpenAIServer) -> None:
    client = EndpointClient("lab", server.base_url)
    model = EndpointModel(client, choice(GOOD_MODEL))

    async def go() -> list[str]:
        try:
            await client.list_models(timeout_s=5)
            return [await model.complete("hi", timeout_s=5) for _ in range(5)]
        finally:
            await client.aclose()

    texts = asyncio.run(go())
    assert texts == [GOOD] * 5
    assert len(server.requests()) == 6
    assert len({s.client_port for s in server.requests()}) == 1
    assert client.clients_made == 1


def test_complete_raises_the_classified_error(server: OpenAIServer) -> None:
    server.behaviours[BAD] = Behaviour("status", status=503)
    model = EndpointModel(EndpointClient("lab", server.base_url), choice(BAD))
    with pytest.raises(EndpointCallError) as caught:
        asyncio.run(model.complete("hi", timeout_s=5))
    assert caught.value.kind == "http_status" and caught.value.http_status == 503


def test_a_server_that_is_not_there_is_a_transport_error() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = EndpointClient("gone", f"http://127.0.0.1:{port}/v1")
    pool = CandidatePool([choice("meta/a"), choice("qwen/b", "qwen")])
    reply = ask(HttpRuntime(client, pool.ranked[0], pool))
    assert reply.outcome == "transport_error"
    # Refused means refused for every model: one attempt, not a walk through the list.
    assert len(reply.attempts) == 1


def test_text_asked_for_in_another_format_is_not_judged_as_a_voice_answer(
    server: OpenAIServer,
) -> None:
    # A later stage asks the same runtime for a ballot: plain text is the right answer there.
    server.behaviours[BAD] = answering("VOTE yes item-1")
    pool = CandidatePool([choice(BAD), choice(GOOD_MODEL, "google")])
    runtime = HttpRuntime(EndpointClient("lab", server.base_url), choice(BAD), pool)
    reply = ask(runtime, prompt="Vote on item-1 with one VOTE line.", check=None)
    assert (reply.outcome, reply.text) == ("ok", "VOTE yes item-1")
    assert server.chat_models() == [BAD]
    # The same text in a council slot is malformed, and the slot fails over.
    assert ask(runtime).attempts[0].outcome == "malformed"


def test_an_endpoint_model_is_a_prompt_to_text_callable(server: OpenAIServer) -> None:
    model = EndpointModel(EndpointClient("lab", server.base_url), choice(GOOD_MODEL))
    assert asyncio.run(model("merge these")) == GOOD
