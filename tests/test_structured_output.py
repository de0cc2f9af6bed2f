"""Endpoint voices ask for the answer's shape, step down when a server refuses it, and
remember the step in the user's own cache; a reply cut at the token limit is `truncated`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from rune_council import CouncilOptions, convene
from rune_council.core.answer import answer_problem
from rune_council.core.contract import VoiceAnswer
from rune_council.core.schema import (
    PACKAGED_WIRE,
    WireSchemaError,
    _inline,
    render_wire_schema,
    wire_schema,
)
from rune_council.endpoints import EndpointSetup, EndpointSpec
from rune_council.endpoints.formats import FORMATS_FILE, UserFormatMemory
from rune_council.runtimes.http import (
    ANSWER_MAX_TOKENS,
    EndpointClient,
    HttpRuntime,
    ModelChoice,
    voice_answer_shape,
)
from tests.helpers import PLAN, QUESTION, ROLLBACK, SHARDS, UNDO, answer, council_result_schema
from tests.http_server import Behaviour, OpenAIServer, Seen, answering

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = council_result_schema()
LLAMA = "meta/llama-3.3-70b-instruct"
QWEN = "qwen/qwen2.5-72b-instruct"
GEMMA = "google/gemma-2-27b-it"


def chats(server: OpenAIServer) -> list[Seen]:
    return server.requests("/v1/chat/completions")


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setenv("RUNE_COUNCIL_ALLOW_EXTERNAL", "1")
    project = tmp_path / "project"
    project.mkdir()
    return {
        "rune": project / ".rune",
        "config": tmp_path / "home" / ".config" / "rune-council",
        "env": {
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path / "home"),
            "RUNE_COUNCIL_ALLOW_EXTERNAL": "1",
        },
    }


def council(world: dict[str, Any], server: OpenAIServer, run_id: str, **spec: Any) -> Any:
    setup = EndpointSetup(endpoints=(EndpointSpec(name="lab", base_url=server.base_url, **spec),))
    request = {"id": run_id, "question": QUESTION, "artifact": {"name": "plan.md", "text": PLAN}}
    options = CouncilOptions(runtimes=[], endpoints=setup, rune_dir=world["rune"], env=world["env"])
    result = convene(request, options)
    jsonschema.validate(result.model_dump(mode="json"), SCHEMA)
    return result


def three_models(**extra: Any) -> OpenAIServer:
    return OpenAIServer(
        models=[LLAMA, QWEN, GEMMA],
        behaviours={
            LLAMA: Behaviour("answer", answer(QUESTION, "NO, not yet", [ROLLBACK]), **extra),
            QWEN: Behaviour("answer", answer(QUESTION, "YES", [SHARDS]), **extra),
            GEMMA: Behaviour("answer", answer(QUESTION, "NO", [UNDO]), **extra),
        },
    )


# --------------------------------------------------------------------------- the shape sent


def test_a_council_slot_sends_the_strict_answer_schema_and_room_for_a_whole_answer(
    world: dict[str, Any],
) -> None:
    with three_models() as server:
        result = council(world, server, "so1")
    assert result.status == "complete" and result.decorrelation == "MULTI_FAMILY"
    sent = chats(server)
    assert len(sent) == 3
    for seen in sent:
        assert seen.body["response_format"] == {
            "type": "json_schema",
            "json_schema": {
                "name": "voice_answer",
                "schema": wire_schema("voice-answer"),
                "strict": True,
            },
        }
        assert seen.body["max_tokens"] == ANSWER_MAX_TOKENS >= 1024
    for voice in result.voices:
        (attempt,) = voice.attempts
        assert attempt.response_format == "json_schema"
        assert attempt.format_fallbacks == [] and not attempt.response_format_remembered


def test_a_configured_max_tokens_is_what_a_slot_sends(world: dict[str, Any]) -> None:
    with three_models() as server:
        council(world, server, "so2", max_tokens=3000)
    assert {s.body["max_tokens"] for s in chats(server)} == {3000}


def test_a_ballot_or_merge_asks_for_no_shape() -> None:
    # Without a check the caller wants free text (RANK lines, a synthesis), not an answer.
    with OpenAIServer(models=[LLAMA], behaviours={LLAMA: answering("RANK A>B")}) as server:

        async def go() -> Any:
            client = EndpointClient("lab", server.base_url)
            runtime = HttpRuntime(client, ModelChoice(LLAMA, "meta", "confirmed"))
            try:
                return await runtime.ask("rank these", timeout_s=10, max_output_bytes=100_000)
            finally:
                await client.aclose()

        reply = asyncio.run(go())
    assert reply.outcome == "ok"
    (seen,) = chats(server)
    assert "response_format" not in seen.body and "max_tokens" not in seen.body
    assert reply.attempts[0].response_format is None


# ------------------------------------------------------------------------- refusals, memory


def test_a_refused_schema_falls_back_once_and_the_next_council_starts_where_it_works(
    world: dict[str, Any],
) -> None:
    with three_models(refuse_formats=frozenset({"json_schema"})) as server:
        first = council(world, server, "so3")
        asked_first = [s.body.get("response_format", {}).get("type") for s in chats(server)]
        second = council(world, server, "so4")
        asked_second = [s.body.get("response_format", {}).get("type") for s in chats(server)][
            len(asked_first) :
        ]

    assert first.status == "complete" and first.decorrelation == "MULTI_FAMILY"
    # Each model was refused once with the schema and answered under json_object.
    assert sorted(asked_first) == ["json_object"] * 3 + ["json_schema"] * 3
    for voice in first.voices:
        assert voice.status == "complete"
        (attempt,) = voice.attempts
        assert attempt.outcome == "ok" and attempt.response_format == "json_object"
        (fallback,) = attempt.format_fallbacks
        assert (fallback.refused, fallback.http_status) == ("json_schema", 400)
        assert "response_format" in fallback.detail
        assert not attempt.response_format_remembered

    # Remembered in the user's own config directory, per base URL and model ...
    stored = json.loads((world["config"] / FORMATS_FILE).read_text())
    assert {(e["base_url"], e["model"], e["start"]) for e in stored["entries"]} == {
        (server.base_url, m, "json_object") for m in (LLAMA, QWEN, GEMMA)
    }
    # ... and nothing about it in the project's .rune/, which a repository can ship.
    assert not list(world["rune"].rglob("*format*"))

    # The next council does not pay for the refusal again.
    assert asked_second == ["json_object"] * 3
    for voice in second.voices:
        (attempt,) = voice.attempts
        assert attempt.response_format == "json_object" and attempt.format_fallbacks == []
        assert attempt.response_format_remembered


def test_a_server_that_takes_no_constraint_is_asked_a_third_time_without_one(
    world: dict[str, Any],
) -> None:
    refuse = frozenset({"json_schema", "json_object"})
    with OpenAIServer(
        models=[LLAMA],
        behaviours={
            LLAMA: Behaviour("answer", answer(QUESTION, "NO", [ROLLBACK]), refuse_formats=refuse)
        },
    ) as server:

        async def go() -> Any:
            client = EndpointClient(
                "lab", server.base_url, formats=UserFormatMemory(world["config"])
            )
            runtime = HttpRuntime(client, ModelChoice(LLAMA, "meta", "confirmed"))
            try:
                return await runtime.ask(
                    "answer", timeout_s=10, max_output_bytes=100_000, check=answer_problem
                )
            finally:
                await client.aclose()

        reply = asyncio.run(go())
        later = UserFormatMemory(world["config"]).recall(server.base_url, LLAMA)
    assert reply.outcome == "ok"
    asked = [s.body.get("response_format") for s in chats(server)]
    assert [a["type"] if a else None for a in asked] == ["json_schema", "json_object", None]
    (attempt,) = reply.attempts
    assert attempt.response_format == "none"
    assert [f.refused for f in attempt.format_fallbacks] == ["json_schema", "json_object"]
    assert later == "none"


def test_an_error_that_does_not_name_the_format_is_not_a_refusal_of_it(
    world: dict[str, Any],
) -> None:
    with OpenAIServer(models=[LLAMA], behaviours={LLAMA: Behaviour("status", status=400)}) as s:

        async def go() -> Any:
            client = EndpointClient("lab", s.base_url, formats=UserFormatMemory(world["config"]))
            runtime = HttpRuntime(client, ModelChoice(LLAMA, "meta", "confirmed"))
            try:
                return await runtime.ask(
                    "answer", timeout_s=10, max_output_bytes=100_000, check=answer_problem
                )
            finally:
                await client.aclose()

        reply = asyncio.run(go())
    assert (reply.outcome, len(chats(s))) == ("http_status", 1)
    assert reply.attempts[0].format_fallbacks == []
    assert not (world["config"] / FORMATS_FILE).exists()


def test_a_memory_entry_planted_in_the_project_is_not_read(world: dict[str, Any]) -> None:
    with three_models() as server:
        planted = {
            "schema_version": "1",
            "entries": [
                {"base_url": server.base_url, "model": m, "start": "none", "learned_at": "x"}
                for m in (LLAMA, QWEN, GEMMA)
            ],
        }
        world["rune"].mkdir(parents=True)
        (world["rune"] / FORMATS_FILE).write_text(json.dumps(planted))
        (world["rune"] / "endpoints").mkdir()
        (world["rune"] / "endpoints" / FORMATS_FILE).write_text(json.dumps(planted))
        council(world, server, "so5")
    assert {s.body["response_format"]["type"] for s in chats(server)} == {"json_schema"}


def test_an_old_memory_entry_is_not_used(tmp_path: Path) -> None:
    import datetime as dt

    then = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    UserFormatMemory(tmp_path, now=then).remember("http://x/v1", "m", "json_object", "no")
    assert UserFormatMemory(tmp_path, now=then).recall("http://x/v1", "m") == "json_object"
    later = then + dt.timedelta(days=8)
    assert UserFormatMemory(tmp_path, now=later).recall("http://x/v1", "m") is None
    assert UserFormatMemory(tmp_path, now=then).recall("http://x/v1", "other") is None


# ---------------------------------------------------------------------------- token limit


@pytest.mark.parametrize("stream", [True, False])
def test_a_reply_cut_at_the_token_limit_is_dropped_as_truncated(
    world: dict[str, Any], stream: bool
) -> None:
    whole = answer(QUESTION, "NO", [ROLLBACK])
    cut = whole[: len(whole) // 2]  # what a model had written when the cap stopped it
    with OpenAIServer(
        models=[LLAMA],
        behaviours={LLAMA: Behaviour("answer", cut, finish_reason="length")},
    ) as server:
        result = council(world, server, f"so6{int(stream)}", stream=stream, max_tokens=64)
    dropped = [v for v in result.voices if v.status == "dropped"]
    assert dropped, result.voices
    for voice in dropped:
        attempt = voice.attempts[0]
        assert attempt.outcome == "truncated"
        assert "token limit" in attempt.detail and "max_tokens 64" in attempt.detail
        assert attempt.output_tail and attempt.output_tail in cut
        assert "truncated" in (voice.drop_reason or "")
        assert "Field required" not in (voice.drop_reason or "")


# ------------------------------------------------------------------------- the wire schema


def test_the_committed_wire_schema_matches_the_contract() -> None:
    committed = (ROOT / "contracts" / "voice-answer.wire.schema.json").read_text()
    assert committed == render_wire_schema("voice-answer"), (
        "contracts/voice-answer.wire.schema.json is stale: run "
        "`python -m rune_council.core.schema contracts`"
    )


def test_the_shape_an_endpoint_is_sent_is_the_contracts_wire_schema() -> None:
    """Endpoint voices read the schema from the package's copy, which must not drift."""
    shipped = PACKAGED_WIRE["voice-answer"].read_text(encoding="utf-8")
    assert shipped == render_wire_schema("voice-answer"), (
        f"{PACKAGED_WIRE['voice-answer']} is stale: run "
        "`python -m rune_council.core.schema contracts`"
    )
    assert voice_answer_shape().schema == wire_schema("voice-answer")


def _nodes(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _nodes(value)
    elif isinstance(node, list):
        for value in node:
            yield from _nodes(value)


def test_the_wire_schema_is_in_the_part_of_json_schema_strict_servers_read() -> None:
    schema = wire_schema("voice-answer")
    text = json.dumps(schema)
    for keyword in ("$ref", "$defs", "anyOf", "allOf", "oneOf", "minLength", "default"):
        assert keyword not in text
    objects = [n for n in _nodes(schema) if n.get("type") == "object"]
    assert len(objects) == 3
    for node in objects:
        assert node["additionalProperties"] is False
        assert node["required"] == list(node["properties"])
    # The order a grammar writes the keys in: the question first.
    assert list(schema["properties"]) == ["question_echo", "stance", "claims"]


def test_what_the_wire_schema_allows_the_contract_reads() -> None:
    schema = wire_schema("voice-answer")
    written = {
        "question_echo": QUESTION,
        "stance": "NO, not yet",
        "claims": [
            {
                "text": "The plan has no rollback step",
                "anchor": None,
                "severity": None,
                "evidence": [{"ref": "plan.md:6", "quote": None}],
            },
            {"text": "Shards", "anchor": "plan.md:2", "severity": "MAY", "evidence": []},
        ],
    }
    jsonschema.validate(written, schema)
    VoiceAnswer.model_validate(written)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**written, "confidence": 0.9}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            {**written, "claims": [{**written["claims"][1], "severity": "HIGH"}]}, schema
        )


@pytest.mark.parametrize(
    "node",
    [
        {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        {"oneOf": [{"type": "string"}]},
        {"$ref": "#/$defs/Missing"},
        {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]},
    ],
)
def test_a_construct_without_a_faithful_wire_form_is_an_error_not_a_guess(node: Any) -> None:
    with pytest.raises(WireSchemaError):
        _inline(node, {}, "x")
