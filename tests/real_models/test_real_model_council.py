"""Real language models answer councils: SmolLM2-135M-Instruct and the base Gemma 3 270M,
served on 127.0.0.1 by server.mjs (node-llama-cpp), one model load for the whole module.

What is checked is what the pipeline did with real answers, never what the models think:
every attempt is a real request with a latency, the council's strict schema reached the
server and was honoured by its grammar, a voice that parsed was gated on its merits, every
drop names its true reason (a cut reply is ``truncated``; a base model that copies the
prompt's placeholders is off-topic), and the stamp is what the counted families give.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from rune_council import CouncilOptions, convene
from rune_council.core.contract import CouncilResult
from rune_council.core.prompts import ANSWER_SHAPE
from rune_council.core.schema import SCHEMAS, wire_schema
from rune_council.endpoints import EndpointSetup, EndpointSpec
from rune_council.runs import load
from rune_council.runtimes.http import response_format, voice_answer_shape
from rune_council.verify import verify
from tests.helpers import PLAN, council_result_schema
from tests.real_models.serving import GEMMA, SMOLLM, ModelsMissing, RealModelServer

pytestmark = pytest.mark.real_models

RESULT_SCHEMA = council_result_schema()
# What the issue found fits a whole answer; what is sent unless the endpoint says otherwise
# is larger, but each token costs a busy two-core machine 50-100 ms.
ANSWER_TOKENS = 1024
VOICE_TIMEOUT_S = 240.0
FAMILIES = {SMOLLM: "huggingface", GEMMA: "google"}
# The placeholder the prompt's answer shape shows for question_echo.
ECHO_PLACEHOLDER = re.search(r'"question_echo": "([^"]+)"', ANSWER_SHAPE).group(1)  # type: ignore[union-attr]


@dataclass
class Ran:
    """One council and the requests the server logged while it ran."""

    result: CouncilResult
    requests: list[dict[str, Any]]
    run_file: Path


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealModelServer]:
    try:
        running = RealModelServer(tmp_path_factory.mktemp("real-models")).start()
    except ModelsMissing as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield running
    finally:
        running.stop()


def logged(server: RealModelServer) -> list[dict[str, Any]]:
    if not server.log_path.exists():
        return []
    return [json.loads(line) for line in server.log_path.read_text().splitlines()]


def run_council(
    server: RealModelServer, where: Path, run_id: str, request: dict[str, Any], max_tokens: int
) -> Ran:
    before = len(logged(server))
    setup = EndpointSetup(
        endpoints=(EndpointSpec(name="local", base_url=server.base_url, max_tokens=max_tokens),)
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(where / "home"), "RUNE_COUNCIL_ALLOW_EXTERNAL": "1"}
    options = CouncilOptions(runtimes=[], endpoints=setup, rune_dir=where / ".rune", env=env)
    body = {"id": run_id, "n": 2, "budget": {"per_voice_timeout_s": VOICE_TIMEOUT_S}, **request}
    result = convene(body, options)
    return Ran(result, logged(server)[before:], where / ".rune" / "council" / f"run-{run_id}.json")


@pytest.fixture(scope="module")
def councils(
    server: RealModelServer, tmp_path_factory: pytest.TempPathFactory, monkeypatch_module: Any
) -> dict[str, Ran]:
    """Three councils: a judgement, a critique of an artifact, and one whose token limit is
    far too small for any answer."""
    where = tmp_path_factory.mktemp("councils")
    judge = {
        "question": "Should a web service store passwords hashed with bcrypt rather than "
        "with a single round of SHA-256?",
        "mode": "judge",
    }
    critique = {
        "question": "Should we shard the orders table?",
        "mode": "critique",
        "artifact": {"name": "plan.md", "text": PLAN},
    }
    return {
        "judge": run_council(server, where, "real-judge", judge, ANSWER_TOKENS),
        "critique": run_council(server, where, "real-critique", critique, ANSWER_TOKENS),
        "cut": run_council(server, where, "real-cut", judge, 24),
    }


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    # Endpoint voices are external dispatch: consent is given the way a user gives it.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RUNE_COUNCIL_ALLOW_EXTERNAL", "1")
        yield patch


# ------------------------------------------------------------------------------- the server


def test_the_server_lists_both_models_and_says_how_each_turns_a_chat_into_a_prompt(
    server: RealModelServer,
) -> None:
    listed = httpx.get(f"{server.base_url}/models", timeout=10).json()["data"]
    formats = {m["id"]: m["prompt_format"] for m in listed}
    assert set(formats) == {SMOLLM, GEMMA}
    assert formats[SMOLLM].startswith("chat template from the GGUF")
    # The base model has no chat template: the server says what it does instead.
    assert formats[GEMMA].startswith("plain: no chat template")


def test_the_councils_exact_schema_becomes_the_servers_grammar(server: RealModelServer) -> None:
    sent = response_format(voice_answer_shape(), "json_schema")
    prompt = "Answer as JSON: is the sky blue? Restate the question, give a stance, no claims."
    whole = 0
    for model in (GEMMA, SMOLLM):
        reply = httpx.post(
            f"{server.base_url}/chat/completions",
            json={
                "model": model,
                "messages": [{"role": "user", "content": prompt}],
                "response_format": sent,
                "max_tokens": 300,
            },
            timeout=VOICE_TIMEOUT_S,
        )
        assert reply.status_code == 200, reply.text
        assert reply.headers["x-prompt-format"] == reply.json()["prompt_format"]
        choice = reply.json()["choices"][0]
        assert choice["finish_reason"] in {"stop", "length"}
        if choice["finish_reason"] == "stop":
            # Held by the grammar, a reply that ended by itself is the schema's shape.
            jsonschema.validate(
                json.loads(choice["message"]["content"]), wire_schema("voice-answer")
            )
            whole += 1
    assert whole, "neither model ended a reply by itself within 300 tokens"
    (gemma_log, smollm_log) = logged(server)[-2:]
    assert gemma_log["grammar"] == smollm_log["grammar"] == "json_schema"


def test_json_object_is_any_object_and_no_format_is_free_text(server: RealModelServer) -> None:
    def ask(max_tokens: int, **extra: Any) -> dict[str, Any]:
        reply = httpx.post(
            f"{server.base_url}/chat/completions",
            json={
                "model": GEMMA,
                "messages": [{"role": "user", "content": "Describe the sky as JSON."}],
                "max_tokens": max_tokens,
                **extra,
            },
            timeout=VOICE_TIMEOUT_S,
        )
        assert reply.status_code == 200, reply.text
        return dict(reply.json()["choices"][0])

    as_object = ask(200, response_format={"type": "json_object"})
    free = ask(8)
    json_object_log, free_log = logged(server)[-2:]
    assert (json_object_log["grammar"], free_log["grammar"]) == ("json_object", "none")
    if as_object["finish_reason"] == "stop":
        assert isinstance(json.loads(as_object["message"]["content"]), dict)
    # Eight tokens end no answer: the server says the cap cut it.
    assert free["finish_reason"] == "length" and free_log["completion_tokens"] <= 8


def test_the_contracts_raw_schema_is_refused_naming_what_the_converter_would_misread(
    server: RealModelServer,
) -> None:
    # pydantic writes optional fields as anyOf, which node-llama-cpp's converter would read
    # as "null": the reason the council sends the wire form instead.
    raw = SCHEMAS["voice-answer"].model_json_schema()
    reply = httpx.post(
        f"{server.base_url}/chat/completions",
        json={
            "model": GEMMA,
            "messages": [{"role": "user", "content": "hi"}],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "raw", "schema": raw, "strict": True},
            },
        },
        timeout=30,
    )
    assert reply.status_code == 400
    assert "response_format" in reply.text and "anyOf" in reply.text


# ---------------------------------------------------------------------------- the councils


@pytest.mark.parametrize("name", ["judge", "critique", "cut"])
def test_every_voice_is_a_real_request_that_carried_the_strict_schema(
    councils: dict[str, Ran], name: str
) -> None:
    ran = councils[name]
    result = ran.result
    # A council none of whose voices held up is honestly no verdict, never "complete".
    assert result.status == ("complete" if result.voices_valid else "no_verdict")
    jsonschema.validate(json.loads(ran.run_file.read_text()), RESULT_SCHEMA)
    # ALLOCATE seated one voice per model, each in its maker's family.
    assert sorted(v.model or "" for v in result.voices) == sorted(FAMILIES)
    for voice in result.voices:
        assert voice.model is not None
        assert (voice.model_family, voice.family_confidence) == (FAMILIES[voice.model], "confirmed")
        for attempt in voice.attempts:
            assert attempt.latency_ms is not None and attempt.latency_ms > 0
            assert attempt.response_format == "json_schema" and attempt.format_fallbacks == []
    # One logged request per attempt, each held to the council's schema by a grammar.
    assert len(ran.requests) == sum(len(v.attempts) for v in result.voices)
    expected = response_format(voice_answer_shape(), "json_schema")
    for request in ran.requests:
        assert request["response_format"] == expected
        assert request["response_format"]["json_schema"]["strict"] is True
        assert request["grammar"] == "json_schema"
        assert request["max_tokens"] == (24 if name == "cut" else ANSWER_TOKENS)


def test_a_voice_that_parsed_was_gated_on_its_merits(councils: dict[str, Ran]) -> None:
    parsed = [
        v
        for ran in (councils["judge"], councils["critique"])
        for v in ran.result.voices
        if v.validity.well_formed == "pass"
    ]
    assert parsed, "no real answer parsed in two councils"
    for voice in parsed:
        # Parsed means the topic gate ran on what the model wrote.
        assert voice.question_echo is not None and voice.stance is not None
        assert voice.validity.on_topic in {"pass", "fail"}
        if voice.validity.on_topic == "fail":
            assert voice.status == "dropped"
            assert (voice.drop_reason or "").startswith("off-topic: answered")
        else:
            assert voice.status == "complete" and voice.drop_reason is None


@pytest.mark.parametrize("name", ["judge", "critique", "cut"])
def test_every_drop_names_its_true_reason(councils: dict[str, Ran], name: str) -> None:
    ran = councils[name]
    # How the server says each model's replies ended is how the attempts record them (a
    # slot may fail over to the other model, so they are compared per model).
    for model in FAMILIES:
        ended = Counter(r["finish_reason"] for r in ran.requests if r["model"] == model)
        outcomes = Counter(
            a.outcome for v in ran.result.voices for a in v.attempts if a.model == model
        )
        assert (
            outcomes == Counter({"truncated": ended["length"], "ok": ended["stop"]}) - Counter()
        ), (model, ended, outcomes)
    for voice in ran.result.voices:
        reason = voice.drop_reason or ""
        if voice.status != "dropped":
            assert voice.attempts[-1].outcome == "ok" and not reason
            continue
        assert reason and voice.dropped_by
        if voice.attempts[-1].outcome == "truncated":
            assert "truncated" in reason and "token limit" in reason
            assert "Field required" not in reason
        elif voice.validity.well_formed == "fail":
            assert reason.startswith("malformed:")
        if voice.question_echo == ECHO_PLACEHOLDER:
            # A base model that copies the prompt's placeholder has not answered this question.
            assert reason.startswith("off-topic:")


def test_a_token_limit_too_small_for_any_answer_drops_every_voice_as_truncated(
    councils: dict[str, Ran],
) -> None:
    ran = councils["cut"]
    assert [r["finish_reason"] for r in ran.requests] == ["length"] * len(ran.requests)
    for voice in ran.result.voices:
        assert voice.status == "dropped" and voice.attempts[-1].outcome == "truncated"
        assert voice.attempts[-1].output_tail  # the start of what the model wrote
    assert ran.result.decorrelation == "NO_DECORRELATION"


@pytest.mark.parametrize("name", ["judge", "critique", "cut"])
def test_the_stamp_is_what_the_counted_families_give_and_verify_agrees(
    councils: dict[str, Ran], name: str
) -> None:
    ran = councils[name]
    counted = sorted(
        {
            v.model_family
            for v in ran.result.voices
            if v.status == "complete"
            and not v.is_fallback
            and v.family_confidence == "confirmed"
            and v.model_family != "unknown"
        }
    )
    assert ran.result.distinct_families == counted
    assert ran.result.decorrelation == ("MULTI_FAMILY" if len(counted) >= 2 else "NO_DECORRELATION")
    # As a reader gets it: the artifact kept beside the run file (contract 2.8) put back.
    recorded = load(ran.run_file)
    checked = verify(recorded)
    assert checked.differences == [], checked.differences
