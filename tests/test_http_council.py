"""Whole councils whose voices are models behind one loopback OpenAI-compatible endpoint."""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from rune_council import CouncilOptions, convene
from rune_council.config import trust_file
from rune_council.core.paths import RuneDir
from rune_council.endpoints import EndpointSetup, EndpointSpec, ModelRef, resolve_model
from rune_council.endpoints.discovery import cache_path
from tests.helpers import (
    PLAN,
    QUESTION,
    ROLLBACK,
    SHARDS,
    UNDO,
    answer,
    council_result_schema,
)
from tests.http_server import Behaviour, OpenAIServer, answering
from tests.private_dirs import private_base

SCHEMA = council_result_schema()
Q = QUESTION
KEY = "sk-PLANTED-7f3a9c2e4b1d"

LLAMA = "meta/llama-3.3-70b-instruct"
MISTRAL = "mistralai/mistral-large-2-instruct"
QWEN = "qwen/qwen2.5-72b-instruct"
GEMMA = "google/gemma-2-27b-it"
EMBED = "nvidia/nv-embedqa-e5-v5"


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    srv = OpenAIServer(
        models=[EMBED, LLAMA, MISTRAL, QWEN, GEMMA],
        behaviours={
            LLAMA: answering(answer(Q, "NO, not yet", [ROLLBACK])),
            MISTRAL: Behaviour("status", status=500),
            QWEN: answering(answer(Q, "YES", [SHARDS])),
            GEMMA: answering(answer(Q, "NO", [UNDO])),
        },
    )
    with srv:
        yield srv


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    # Endpoint voices are external dispatch: grant consent explicitly.
    monkeypatch.setenv("RUNE_COUNCIL_ALLOW_EXTERNAL", "1")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # The model lists are kept per user, in a cache no other user can write.
    with private_base() as private:
        yield {
            "rune": tmp_path / ".rune",
            "cache": private / "cache",
            "env": {
                "PATH": f"{bin_dir}:/usr/bin:/bin",
                "HOME": str(tmp_path),
                "XDG_CACHE_HOME": str(private / "cache"),
                "LAB_KEY": KEY,
                "RUNE_COUNCIL_ALLOW_EXTERNAL": "1",
            },
        }


def lab(server: OpenAIServer, **extra: Any) -> EndpointSpec:
    return EndpointSpec(
        name="lab",
        base_url=server.base_url,
        key_env="LAB_KEY",
        prefer=[LLAMA, MISTRAL],  # type: ignore[arg-type]
        **extra,
    )


def run(world: dict[str, Any], setup: EndpointSetup, run_id: str, **kw: Any) -> Any:
    request = {"id": run_id, "question": Q, "artifact": {"name": "plan.md", "text": PLAN}}
    return convene(
        request,
        CouncilOptions(
            runtimes=[], endpoints=setup, rune_dir=world["rune"], env=world["env"], **kw
        ),
    )


def test_one_endpoint_gives_a_multi_family_council_with_a_slot_saved_by_failover(
    server: OpenAIServer, world: dict[str, Any]
) -> None:
    result = run(world, EndpointSetup(endpoints=(lab(server),)), "h1")

    assert result.status == "complete"
    assert result.decorrelation == "MULTI_FAMILY"
    assert result.distinct_families == ["google", "meta", "qwen"]
    v1, v2, v3 = result.voices
    # ALLOCATE seated one family per slot in the endpoint's ranked order.
    assert (v1.model, v1.model_family, v1.family_confidence) == (LLAMA, "meta", "confirmed")
    assert v3.model == QWEN and v1.source == v2.source == "external-http"
    # Mistral answered 500; the slot went to the next model with a family nobody held.
    assert v2.status == "complete" and not v2.is_fallback
    assert (v2.runtime, v2.model, v2.model_family) == (f"lab:{GEMMA}", GEMMA, "google")
    failed, recovered = v2.attempts
    assert (failed.model, failed.outcome, failed.http_status) == (MISTRAL, "http_status", 500)
    assert failed.runtime == f"lab:{MISTRAL}" and "HTTP 500" in failed.detail
    assert failed.latency_ms is not None
    assert (recovered.model, recovered.outcome) == (GEMMA, "ok")
    # The rescued voice counts: its claim meets llama's on the shared evidence.
    [consensus] = result.agreement.consensus_claims
    assert consensus.families == ["google", "meta"]
    # The embedding model was never offered, let alone asked.
    assert EMBED not in server.chat_models()
    assert all(EMBED not in d.runtime for d in result.runtime_report.detected)

    on_disk = json.loads(Path(result.run_file).read_text())
    jsonschema.validate(on_disk, SCHEMA)
    attempts = on_disk["voices"][1]["attempts"]
    assert [(a["model"], a["outcome"], a["http_status"]) for a in attempts] == [
        (MISTRAL, "http_status", 500),
        (GEMMA, "ok", None),
    ]


def test_a_second_run_within_six_hours_does_not_list_models_again(
    server: OpenAIServer, world: dict[str, Any]
) -> None:
    setup = EndpointSetup(endpoints=(lab(server),))
    run(world, setup, "c1")
    assert server.models_calls == 1
    second = run(world, setup, "c2")
    assert server.models_calls == 1
    assert second.decorrelation == "MULTI_FAMILY"
    assert "model list cached" in second.runtime_report.detected[0].detail

    run(world, EndpointSetup(endpoints=(lab(server),), refresh=True), "c3")
    assert server.models_calls == 2

    # Seven hours later the cache is stale and the list is fetched again.
    path = cache_path(lab(server), world["env"])
    assert path is not None and path.is_relative_to(world["cache"])
    doc = json.loads(path.read_text())
    old = dt.datetime.now(dt.UTC) - dt.timedelta(hours=7)
    doc["fetched_at"] = old.isoformat(timespec="seconds")
    path.write_text(json.dumps(doc))
    run(world, setup, "c4")
    assert server.models_calls == 3


def test_failed_discovery_falls_back_to_the_last_cache_and_says_so(
    server: OpenAIServer, world: dict[str, Any]
) -> None:
    run(world, EndpointSetup(endpoints=(lab(server),)), "d1")
    server.models_status = 503
    result = run(world, EndpointSetup(endpoints=(lab(server),), refresh=True), "d2")
    assert result.decorrelation == "MULTI_FAMILY"
    [note] = [n for n in result.notes if "model discovery failed" in n]
    assert "HTTP 503" in note and "using the model list cached at" in note


def test_failed_discovery_without_a_cache_uses_the_configured_models(
    server: OpenAIServer, world: dict[str, Any]
) -> None:
    server.models_status = 500
    spec = lab(server, models=(QWEN, GEMMA))
    result = run(world, EndpointSetup(endpoints=(spec,)), "e1")
    [note] = [n for n in result.notes if "model discovery failed" in n]
    assert "using the 2 configured model(s)" in note
    assert {v.model for v in result.voices if v.status == "complete"} == {GEMMA, QWEN}

    bare = run(world, EndpointSetup(endpoints=(lab(server),)), "e2")
    assert any("no cached or configured models to use" in n for n in bare.notes)
    assert bare.voices_valid == 0


def test_failover_can_be_turned_off(server: OpenAIServer, world: dict[str, Any]) -> None:
    spec = lab(server, failover_on_failure=False)
    result = run(world, EndpointSetup(endpoints=(spec,)), "f1")
    v2 = result.voices[1]
    assert v2.status == "dropped" and v2.model == MISTRAL
    assert [(a.model, a.outcome) for a in v2.attempts] == [(MISTRAL, "http_status")]
    assert GEMMA not in server.chat_models()
    assert "no subagent configured" in (v2.drop_reason or "")


def test_a_planted_key_reaches_the_server_and_nothing_we_write(
    server: OpenAIServer, world: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    server.behaviours[MISTRAL] = Behaviour("echo_key")  # its error body quotes the key
    server.behaviours[QWEN] = answering(answer(Q, f"YES, and my key is {KEY}", [SHARDS]))
    with caplog.at_level(logging.DEBUG):
        result = run(world, EndpointSetup(endpoints=(lab(server),)), "k1")
    assert {s.authorization for s in server.requests()} == {f"Bearer {KEY}"}
    assert result.voices[1].attempts[0].outcome == "http_status"
    written = [p for d in ("rune", "cache") for p in world[d].rglob("*") if p.is_file()]
    assert any(p.name.startswith("models-lab-") for p in written)  # the discovery cache
    assert any(p.name == "run-k1.json" for p in written)
    for path in written:
        assert KEY not in path.read_text(errors="replace"), path
    assert "[redacted]" in Path(result.run_file).read_text()
    assert caplog.records, "the HTTP stack logs at debug level; make sure we looked"
    assert all(KEY not in r.getMessage() for r in caplog.records)
    assert KEY not in result.model_dump_json()


def test_a_configured_endpoint_without_its_key_is_left_out_with_a_note(
    server: OpenAIServer, world: dict[str, Any]
) -> None:
    del world["env"]["LAB_KEY"]
    result = run(world, EndpointSetup(endpoints=(lab(server),)), "n1")
    assert any("endpoint lab: no API key: $LAB_KEY is not set" in n for n in result.notes)
    assert server.requests() == []


def test_an_endpoint_model_can_be_the_subagent(server: OpenAIServer, world: dict[str, Any]) -> None:
    setup = EndpointSetup(subagent=ModelRef(lab(server), QWEN))
    result = run(world, setup, "s1")
    assert [v.source for v in result.voices] == ["subagent"] * 3
    assert {v.runtime for v in result.voices} == {f"subagent@lab:{QWEN}"}
    assert all(v.status == "complete" and v.model == QWEN for v in result.voices)
    assert result.decorrelation == "NO_DECORRELATION"
    assert server.chat_models() == [QWEN] * 3
    # Each subagent seat still got its own persona in the prompt.
    prompts = [s.prompt for s in server.requests("/v1/chat/completions")]
    assert len(set(prompts)) == 3


def test_a_subagent_endpoint_the_caller_names_comes_before_council_toml(
    server: OpenAIServer, world: dict[str, Any]
) -> None:
    world["rune"].mkdir()
    toml = world["rune"] / "council.toml"
    # A command that fails every slot, trusted so that it would be used if its turn came.
    toml.write_text('[subagent]\ncommand = "false"\n', encoding="utf-8")
    trust_file(toml, world["env"])
    options = CouncilOptions(
        endpoints=EndpointSetup(subagent=ModelRef(lab(server), QWEN)),
        rune_dir=world["rune"],
        env=world["env"],
    )
    result = convene({"id": "order", "question": Q, "n": 2}, options)
    assert {v.runtime for v in result.voices} == {f"subagent@lab:{QWEN}"}
    assert result.voices_valid == 2
    # Without the caller's endpoint the file's command takes the slots (and fails them).
    fallback = convene(
        {"id": "order-2", "question": Q, "n": 2},
        CouncilOptions(rune_dir=world["rune"], env=world["env"]),
    )
    assert {v.runtime for v in fallback.voices} == {"subagent-cmd"}
    assert fallback.voices_valid == 0


def test_a_failed_endpoint_slot_falls_to_the_endpoint_subagent(
    server: OpenAIServer, world: dict[str, Any]
) -> None:
    spec = lab(server, failover_on_failure=False)
    setup = EndpointSetup(endpoints=(spec,), subagent=ModelRef(spec, LLAMA))
    result = run(world, setup, "s2")
    v2 = result.voices[1]
    assert v2.status == "complete" and v2.is_fallback
    assert [a.runtime for a in v2.attempts] == [f"lab:{MISTRAL}", f"subagent@lab:{LLAMA}"]


def test_resolve_model_gives_later_stages_a_model_to_complete_prompts(
    server: OpenAIServer, world: dict[str, Any]
) -> None:
    import asyncio

    async def go() -> tuple[str, str]:
        model = await resolve_model(ModelRef(lab(server)), RuneDir(world["rune"]), world["env"])
        try:
            return model.name, await model.complete(f"Chair this: {Q}", timeout_s=10)
        finally:
            await model.aclose()

    name, text = asyncio.run(go())
    assert name == f"lab:{LLAMA}"  # the top-ranked model when none is named
    assert "The plan has no rollback step" in text
    assert server.requests("/v1/chat/completions")[0].prompt == f"Chair this: {Q}"


def test_without_consent_for_external_dispatch_no_endpoint_is_asked(
    server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RUNE_COUNCIL_ALLOW_EXTERNAL", raising=False)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LAB_KEY": KEY}
    setup = EndpointSetup(endpoints=(lab(server),))
    request = {"id": "nc1", "question": Q}
    where = tmp_path / ".rune"
    refused = convene(request, CouncilOptions(endpoints=setup, rune_dir=where, env=env))
    assert server.requests() == []
    assert refused.voices_valid == 0
    [note] = [n for n in refused.notes if "HTTP endpoints configured (lab)" in n]
    assert "consent for external dispatch not granted" in note and "--yes" in note

    granted = convene(
        {**request, "id": "nc2"},
        CouncilOptions(endpoints=setup, rune_dir=where, env=env, allow_external=True),
    )
    assert granted.decorrelation == "MULTI_FAMILY"


def test_cancelling_a_run_abandons_slow_endpoint_voices_at_once(
    server: OpenAIServer, world: dict[str, Any]
) -> None:
    import asyncio
    import time

    from rune_council import aconvene

    server.behaviours[LLAMA] = Behaviour("slow", answer(Q, "NO", [ROLLBACK]), delay_s=30)
    request = {"id": "x1", "question": Q}

    async def go() -> float:
        task = asyncio.ensure_future(
            aconvene(
                request,
                CouncilOptions(
                    runtimes=[],
                    endpoints=EndpointSetup(endpoints=(lab(server),)),
                    rune_dir=world["rune"],
                    env=world["env"],
                ),
            )
        )
        await asyncio.sleep(1.0)
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - started

    assert asyncio.run(go()) < 5
    doc = json.loads((world["rune"] / "council" / "run-x1.json").read_text())
    assert doc["status"] == "cancelled"
    v1 = doc["voices"][0]
    assert v1["status"] == "dropped" and "cancelled" in v1["drop_reason"]
    assert [v["status"] for v in doc["voices"][1:]] == ["complete", "complete"]
