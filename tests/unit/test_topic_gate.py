"""The on-topic gate compares what the questions are about, not the words they share."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rune_council.core.contract import CouncilResult, PerspectiveRequest, RawOutput, Voice
from rune_council.stages.gate import gate
from rune_council.stages.topic import subject_of, topic_match
from rune_council.stages.verdict import reach_verdict
from tests.helpers import answer, claim

ASKED = "Is the orders sharding plan in plan.md safe to execute as written?"
LOGIN = "Is the login page accessible to screen readers as written?"
DATA = Path(__file__).resolve().parents[2] / "bench" / "data"


def _voice(vid: str, family: str, echo: str, role: str = "standard") -> Voice:
    return Voice(
        id=vid,
        slot_role=role,  # type: ignore[arg-type]
        source="external-cli",
        runtime=f"{family}-cli",
        model_family=family,
        family_confidence="confirmed",
        status="complete",
        raw=RawOutput(text=answer(echo, "YES, it is", [claim("Step 3 is fine", anchor="step-3")])),
    )


def test_a_look_alike_sharing_only_structure_words_is_dropped_with_the_reason() -> None:
    voice = _voice("v2", "openai", LOGIN)
    dropped = gate(voice, PerspectiveRequest(id="t", question=ASKED))
    # Before: word overlap scored this 0.59 >= 0.5 and the voice counted.
    assert dropped is not None and voice.validity.on_topic == "fail"
    assert dropped.reason.startswith("off-topic: answered 'Is the login page")
    assert "shares only structure words (written), no subject" in dropped.reason


def test_an_off_topic_voice_does_not_make_the_council_multi_family() -> None:
    request = PerspectiveRequest(id="t", question=ASKED)
    result = CouncilResult(
        id="t",
        question=ASKED,
        mode="judge",
        request=request,
        voices_requested=2,
        voices=[_voice("v1", "anthropic", ASKED), _voice("v2", "openai", LOGIN)],
        started_at="2026-01-01T00:00:00+00:00",
    )
    reach_verdict(result, None)
    assert result.decorrelation == "NO_DECORRELATION"
    assert [d.voice_id for d in result.voices_dropped] == ["v2"]


def test_the_inverted_framing_of_the_perturbation_slot_stays_on_topic() -> None:
    echo = "What makes the orders sharding plan in plan.md unsafe to execute as written?"
    voice = _voice("v2", "openai", echo, role="perturbation")
    assert gate(voice, PerspectiveRequest(id="t", question=ASKED)) is None
    assert voice.validity.on_topic == "pass"


def test_another_file_or_migration_is_another_question() -> None:
    m = topic_match(
        "Is the migration 0043_drop_legacy_orders reversible without data loss?",
        "Is the migration 0042_add_user_index reversible without data loss?",
    )
    assert not m.on_topic()
    assert m.explain() == (
        "names 0043_drop_legacy_orders where the question names 0042_add_user_index"
    )


def test_subject_leaves_out_framing_and_keeps_named_things() -> None:
    s = subject_of(ASKED)
    assert s.entities == {"plan.md"}
    assert s.terms == {"order", "shard"}
    assert {"safe", "execute", "written"} <= s.structure


@pytest.mark.parametrize("name", ["topic_pairs.json", "topic_pairs_heldout.json"])
def test_labelled_sets_are_large_enough_and_the_gate_holds_its_measured_level(name: str) -> None:
    pairs = json.loads((DATA / name).read_text(encoding="utf-8"))["pairs"]
    kinds = {p["kind"] for p in pairs}
    assert kinds == {"paraphrase", "inverted", "lookalike"}
    kept = [topic_match(p["echo"], p["q"]).on_topic() for p in pairs]
    tp = sum(k and p["on_topic"] for k, p in zip(kept, pairs, strict=True))
    fp = sum(k and not p["on_topic"] for k, p in zip(kept, pairs, strict=True))
    fn = sum(not k and p["on_topic"] for k, p in zip(kept, pairs, strict=True))
    # Floors just under what bench/topic_gate.py measured, so a regression shows here.
    assert tp / (tp + fp) >= 0.95
    assert tp / (tp + fn) >= (0.95 if name == "topic_pairs.json" else 0.85)
    if name == "topic_pairs.json":
        assert len(pairs) >= 40
