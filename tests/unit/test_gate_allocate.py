from __future__ import annotations

import pytest

from rune_council.core.contract import PerspectiveRequest, RawOutput, Voice
from rune_council.core.prompts import compose_prompt, numbered_artifact
from rune_council.stages.allocate import Candidate, allocate, roles_for
from rune_council.stages.gate import gate, topic_score
from tests.helpers import answer

Q = "Should we shard the orders table?"


def _voice(text: str) -> Voice:
    return Voice(
        id="v1",
        source="external-cli",
        runtime="claude",
        model_family="anthropic",
        family_confidence="confirmed",
        status="complete",
        raw=RawOutput(text=text),
    )


def test_gate_drops_malformed_with_reason_and_flips_status() -> None:
    v = _voice("Sure! Sharding is great.")
    dropped = gate(v, PerspectiveRequest(id="g", question=Q))
    assert dropped is not None and dropped.dropped_by == "council.gate"
    assert v.status == "dropped" and v.validity.well_formed == "fail"
    assert "malformed" in dropped.reason


def test_gate_drops_an_answer_to_a_different_question() -> None:
    v = _voice(answer("What is the capital of France?", "YES", []))
    dropped = gate(v, PerspectiveRequest(id="g", question=Q))
    assert dropped is not None and dropped.reason.startswith("off-topic")
    assert v.validity.well_formed == "pass" and v.validity.on_topic == "fail"


@pytest.mark.parametrize(
    "echo",
    [
        "Should we shard the orders table?",
        "Whether sharding the orders table is a good idea",
        "Is it wise to split the orders table into shards?",
    ],
)
def test_restated_questions_stay_on_topic(echo: str) -> None:
    assert topic_score(echo, Q) >= 0.5


@pytest.mark.parametrize(
    "echo",
    ["What is the capital of France?", "Review this pull request for style issues", "hello"],
)
def test_other_questions_are_off_topic(echo: str) -> None:
    assert topic_score(echo, Q) < 0.5


def test_gate_reads_position_from_the_stance() -> None:
    v = _voice(answer(Q, "Mixed: only after archiving", []))
    assert gate(v, PerspectiveRequest(id="g", question=Q)) is None
    assert v.position == "mixed" and v.status == "complete"


def C(name: str, family: str, confirmed: bool = True) -> Candidate:
    return Candidate(name, "external-cli", family, "confirmed" if confirmed else "unknown")


def test_roles_follow_the_skill() -> None:
    assert roles_for(2) == ["standard", "perturbation"]
    assert roles_for(3) == ["standard", "perturbation", "devils_advocate"]
    assert roles_for(5).count("standard") == 3


def test_one_voice_per_family_before_doubling_up() -> None:
    req = PerspectiveRequest(id="a", question=Q, n=5)
    cands = [
        C("claude", "anthropic"),
        C("claude2", "anthropic"),
        C("codex", "openai"),
        C("gemini", "google"),
    ]
    plan = allocate(req, cands, None, None)
    assert [v.runtime for v in plan.voices][:3] == ["claude", "codex", "gemini"]
    assert {v.model_family for v in plan.voices[:3]} == {"anthropic", "openai", "google"}
    assert [v.slot_role for v in plan.voices][-2:] == ["perturbation", "devils_advocate"]


def test_preferred_family_is_seated_first_and_unknown_last() -> None:
    req = PerspectiveRequest(
        id="a", question=Q, n=3, diversity={"prefer_model_families": ["google"]}
    )
    cands = [
        C("aider", "unknown", confirmed=False),
        C("claude", "anthropic"),
        C("gemini", "google"),
    ]
    plan = allocate(req, cands, None, None)
    assert [v.runtime for v in plan.voices] == ["gemini", "claude", "aider"]


def test_n_above_five_is_capped_with_a_note() -> None:
    req = PerspectiveRequest(id="a", question=Q, n=9)
    plan = allocate(req, [C("claude", "anthropic")], None, None)
    assert len(plan.voices) == 5 and plan.n_effective == 5
    assert any("capped at 5" in n for n in plan.notes)


def test_subagent_only_when_nothing_external() -> None:
    req = PerspectiveRequest(id="a", question=Q, n=3)
    sub = Candidate("internal", "subagent", "unknown", "unknown")
    plan = allocate(req, [], sub, None)
    assert {v.source for v in plan.voices} == {"subagent"}
    personas = [v.persona for v in plan.voices]
    assert all(personas) and len(set(personas)) == 3
    assert any("subagent-only" in n for n in plan.notes)


def test_prompt_is_self_contained_and_artifact_capped_visibly() -> None:
    big = "\n".join(f"line {i} of the plan" for i in range(10_000))
    req = PerspectiveRequest(
        id="a", question=Q, mode="critique", artifact={"name": "plan.md", "text": big}
    )
    prompt = compose_prompt(req, "perturbation", None, big)
    assert Q in prompt and "critique" in prompt.lower() and "opposite position" in prompt
    assert "[truncated:" in prompt and "plan.md" in prompt
    assert '"question_echo"' in prompt
    assert "see above" not in prompt.lower()


def test_numbered_artifact_keeps_original_line_numbers() -> None:
    out = numbered_artifact("p", "a\nb\nc")
    assert out.splitlines() == ["1 | a", "2 | b", "3 | c"]
