"""The reading rules of answer.py, one by one: what each repair reads, what it records, and
what is still not an answer (with the reason a user is shown)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from rune_council.core.answer import SEVERITY_WORDS, extract_answer, read_severity
from rune_council.core.contract import PerspectiveRequest, RawOutput, Voice, VoiceAnswer
from rune_council.stages.gate import gate
from rune_council.stages.normalize import normalize
from tests.helpers import PLAN

Q = "Should we shard the orders table?"
CONTRACT = Path(__file__).resolve().parents[2] / "contracts" / "council-voice-contract.md"
CANONICAL = {
    "question_echo": Q,
    "stance": "NO, not without a rollback",
    "claims": [
        {
            "text": "The plan has no rollback step",
            "anchor": "plan.md:6",
            "severity": "MUST",
            "evidence": [{"ref": "plan.md:6", "quote": "No rollback step is defined."}],
        }
    ],
}


def read(text: str) -> tuple[VoiceAnswer, list[tuple[str, str]]]:
    got = extract_answer(text)
    assert got.answer is not None, got.reason
    return got.answer, [(r.kind, r.at) for r in got.repairs]


def canonical() -> VoiceAnswer:
    return VoiceAnswer.model_validate(CANONICAL)


def test_the_canonical_shape_needs_no_repair() -> None:
    answer, repairs = read(json.dumps(CANONICAL))
    assert answer == canonical() and repairs == []


# --------------------------------------------------------------------------- text repairs


def test_trailing_commas_are_ignored_and_counted() -> None:
    text = (
        '{"question_echo": "__Q__", "stance": "NO, not without a rollback", "claims": [{"text": '
        '"The plan has no rollback step", "anchor": "plan.md:6", "severity": "MUST", '
        '"evidence": [{"ref": "plan.md:6", "quote": "No rollback step is defined.",},],},],}'
    ).replace("__Q__", Q)
    answer, repairs = read(text)
    assert answer == canonical()
    assert repairs == [("trailing_comma", "")]
    assert extract_answer(text).repairs[0].detail == "5 commas before a closing bracket"


def test_comments_outside_strings_are_ignored_and_inside_strings_kept() -> None:
    text = (
        "{\n  // what I was asked\n"
        f'  "question_echo": "{Q}",\n'
        '  "stance": "NO, see http://wiki/x // and /* this */", /* my view */\n'
        '  "claims": []\n}'
    )
    answer, repairs = read(text)
    assert answer.stance == "NO, see http://wiki/x // and /* this */"
    assert repairs == [("comment", "")]
    assert extract_answer(text).repairs[0].detail == "2 comments outside strings"


def test_a_comma_before_a_value_is_not_trailing() -> None:
    # Only the comma before the closing bracket goes; "a", "b" stay two claims.
    answer, repairs = read(f'{{"question_echo": "{Q}", "stance": "NO", "claims": ["a", "b",]}}')
    assert [c.text for c in answer.claims] == ["a", "b"]
    assert ("trailing_comma", "") in repairs


# --------------------------------------------------------------------------- structure


@pytest.mark.parametrize("key", ["answer", "response", "result", "Answer"])
def test_one_level_of_wrapping_is_read_through(key: str) -> None:
    answer, repairs = read(json.dumps({key: CANONICAL}))
    assert answer == canonical()
    assert repairs == [("unwrapped", "")]


def test_keys_beside_the_wrapper_are_ignored_and_named() -> None:
    got = extract_answer(json.dumps({"answer": CANONICAL, "confidence": 0.9}))
    assert got.answer == canonical()
    assert [(r.kind, r.detail) for r in got.repairs] == [
        ("unwrapped", "the answer was read from inside 'answer'"),
        ("unknown_keys", "ignored beside 'answer': 'confidence'"),
    ]


def test_unknown_keys_are_ignored_at_every_level_and_listed_where_they_were() -> None:
    doc: dict[str, Any] = json.loads(json.dumps(CANONICAL))
    doc["confidence"] = 0.8
    doc["reasoning"] = "long"
    doc["claims"][0]["why"] = "x"
    doc["claims"][0]["evidence"][0]["line"] = 6
    got = extract_answer(json.dumps(doc))
    assert got.answer == canonical()
    assert [(r.kind, r.at, r.detail) for r in got.repairs] == [
        ("unknown_keys", "", "ignored 'confidence', 'reasoning'"),
        ("unknown_keys", "claims[0]", "ignored 'why'"),
        ("unknown_keys", "claims[0].evidence[0]", "ignored 'line'"),
    ]


def test_one_evidence_object_is_a_list_of_one() -> None:
    doc: dict[str, Any] = json.loads(json.dumps(CANONICAL))
    doc["claims"][0]["evidence"] = doc["claims"][0]["evidence"][0]
    answer, repairs = read(json.dumps(doc))
    assert answer == canonical()
    assert repairs == [("evidence_object", "claims[0].evidence")]


def test_claims_as_strings_are_claims_without_evidence() -> None:
    doc = {"question_echo": Q, "stance": "NO", "claims": ["No rollback", {"text": "Offline"}]}
    answer, repairs = read(json.dumps(doc))
    assert [c.model_dump() for c in answer.claims] == [
        {"text": "No rollback", "anchor": None, "severity": None, "evidence": []},
        {"text": "Offline", "anchor": None, "severity": None, "evidence": []},
    ]
    assert repairs == [("claim_string", "claims[0]")]


# --------------------------------------------------------------------------- severity


@pytest.mark.parametrize("word", sorted(SEVERITY_WORDS))
def test_every_severity_word_of_the_table_is_read_in_any_case(word: str) -> None:
    for written in (word, word.lower(), word.title(), word.replace(" ", "_").lower()):
        assert read_severity(written) == SEVERITY_WORDS[word]
    doc = {"question_echo": Q, "stance": "NO", "claims": [{"text": "x", "severity": word.lower()}]}
    answer, repairs = read(json.dumps(doc))
    assert answer.claims[0].severity == SEVERITY_WORDS[word]
    assert repairs == [("severity", "claims[0].severity")]


def test_the_review_scale_maps_as_the_contract_says() -> None:
    assert [read_severity(w) for w in ("CRITICAL", "BLOCKER", "HIGH", "MEDIUM", "LOW", "INFO")] == [
        "MUST",
        "MUST",
        "SHOULD",
        "MAY",
        "MAY",
        "MAY",
    ]
    assert read_severity("must-not") == "MUST"


def test_a_canonical_severity_is_no_repair() -> None:
    doc = {"question_echo": Q, "stance": "NO", "claims": [{"text": "x", "severity": "SHOULD"}]}
    assert read(json.dumps(doc))[1] == []


def test_the_severity_table_in_the_contract_prose_is_the_one_in_code() -> None:
    prose = CONTRACT.read_text(encoding="utf-8")
    section = prose.split("## Version 2.7", 1)[1]
    rows = re.findall(r"^\| ([A-Z ,]+) \| (MUST|SHOULD|MAY) \|$", section, re.MULTILINE)
    table = {w.strip(): sev for words, sev in rows for w in words.split(",")}
    assert table == SEVERITY_WORDS


# --------------------------------------------------------------------------- two answers


def test_two_identical_answers_are_one() -> None:
    first = json.dumps(CANONICAL)
    # The same answer again, written with a slip: it reads the same, so it is no conflict.
    second = first.replace('"MUST"', '"must"')
    answer, repairs = read(f"{first}\nTo restate:\n{second}")
    assert answer == canonical()
    assert repairs == [("severity", "claims[0].severity")]


def test_two_different_answers_are_ambiguous_and_neither_is_taken() -> None:
    other = {**CANONICAL, "stance": "YES, shard it"}
    got = extract_answer(
        f"```json\n{json.dumps(CANONICAL)}\n```\n```json\n{json.dumps(other)}\n```"
    )
    assert got.answer is None and got.problem == "ambiguous"
    assert "2 different answer objects" in got.reason
    assert "'NO, not without a rollback'" in got.reason and "'YES, shard it'" in got.reason


def test_a_gated_ambiguous_voice_is_dropped_with_both_answers_kept_raw() -> None:
    other = json.dumps({**CANONICAL, "stance": "YES, shard it"})
    raw = f"{json.dumps(CANONICAL)}\nActually:\n{other}"
    voice = _voice(raw)
    dropped = gate(voice, PerspectiveRequest(id="t", question=Q))
    assert dropped is not None and dropped.reason.startswith("ambiguous: ")
    assert voice.raw is not None and voice.raw.text == raw  # both answers, as written
    assert voice.claims == [] and voice.stance is None


# --------------------------------------------------------------------------- not answers


def test_prose_only_is_malformed() -> None:
    got = extract_answer("Yes. Sharding by customer is sound, but add a rollback step.")
    assert got.answer is None and got.problem == "malformed"
    assert got.reason == "no JSON object found in the voice's output"


def test_an_answer_cut_before_its_json_closes_is_truncated_not_a_missing_field() -> None:
    whole = json.dumps(CANONICAL, indent=2)
    got = extract_answer("```json\n" + whole[: whole.index("No rollback step")])
    assert got.answer is None and got.problem == "truncated"
    assert "Field required" not in got.reason
    assert got.reason == "the output ends before the answer's JSON closes"


def test_a_broken_answer_names_its_json_error_not_a_missing_field() -> None:
    text = "{'question_echo': '__Q__', 'stance': 'NO', 'claims': [{'text': 'x'}]}".replace(
        "__Q__", Q
    )
    got = extract_answer(text)
    assert got.answer is None and got.problem == "malformed"
    assert "Field required" not in got.reason
    assert got.reason.startswith("the answer object is not JSON: Expecting property name")


def test_a_broken_wrapped_answer_names_its_json_error() -> None:
    text = '{"answer": {"question_echo": "__Q__", "stance": "NO" "claims": []}}'.replace("__Q__", Q)
    got = extract_answer(text)
    assert got.answer is None
    assert got.reason.startswith("the answer object is not JSON: Expecting ',' delimiter")


def test_two_levels_of_wrapping_are_not_read_through() -> None:
    got = extract_answer(json.dumps({"output": {"answer": CANONICAL}}))
    assert got.answer is None and got.problem == "malformed"
    assert got.reason.startswith("no answer object found")


def test_a_lone_claim_is_no_answer() -> None:
    got = extract_answer(json.dumps(CANONICAL["claims"][0]))
    assert got.answer is None and got.reason.startswith("no answer object found")


def test_a_severity_word_outside_the_table_still_drops_the_voice() -> None:
    doc = {"question_echo": Q, "stance": "NO", "claims": [{"text": "x", "severity": "URGENT"}]}
    got = extract_answer(json.dumps(doc))
    assert got.answer is None
    assert got.reason.startswith("answer JSON does not fit the voice contract: claims.0.severity")


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"stance": None}, "stance"),
        ({"claims": {"text": "one claim as an object"}}, "claims"),
        ({"claims": [{"text": "x", "evidence": "plan.md:6"}]}, "claims.0.evidence"),
        ({"claims": [{"text": ""}]}, "claims.0.text"),
        ({"claims": [{"text": "x", "evidence": [{"quote": "no ref"}]}]}, "claims.0.evidence.0.ref"),
    ],
)
def test_what_no_rule_covers_is_still_unfit_and_names_the_field(
    patch: dict[str, Any], field: str
) -> None:
    doc = {**CANONICAL, **patch}
    doc = {k: v for k, v in doc.items() if v is not None}
    got = extract_answer(json.dumps(doc))
    assert got.answer is None and got.problem == "malformed"
    assert got.reason.startswith(f"answer JSON does not fit the voice contract: {field}:")


def test_a_wrapper_holding_two_answers_is_not_unwrapped() -> None:
    got = extract_answer(json.dumps({"answer": CANONICAL, "response": CANONICAL}))
    assert got.answer is None and got.reason.startswith("no answer object found")


def test_many_unclosed_objects_are_read_in_bounded_time() -> None:
    # Each "{ //" opens a comment that runs to the end of the reply; reading every one of
    # them tolerantly to the end would take seconds (quadratic), the budget keeps it linear.
    import time

    text = "{ // } " * 2000 + "x" * 380_000
    started = time.perf_counter()
    got = extract_answer(text)
    assert got.answer is None and got.reason == "no JSON object found in the voice's output"
    assert time.perf_counter() - started < 3


# --------------------------------------------------------------------------- consensus inputs


def _voice(text: str, voice_id: str = "v1") -> Voice:
    return Voice(
        id=voice_id,
        source="external-cli",
        runtime="claude",
        model_family="anthropic",
        family_confidence="confirmed",
        status="complete",
        raw=RawOutput(text=text),
    )


def test_gate_records_the_repairs_on_the_voice() -> None:
    doc = {"response": {**CANONICAL, "confidence": 1}}
    voice = _voice(json.dumps(doc))
    assert gate(voice, PerspectiveRequest(id="t", question=Q)) is None
    assert [(r.kind, r.at) for r in voice.repairs] == [("unwrapped", ""), ("unknown_keys", "")]
    assert voice.claims[0].severity == "MUST"


def test_a_repaired_quote_is_still_checked_against_the_artifact() -> None:
    # The repairs read the shape; the quote is taken as written and still fails where it
    # is not in the artifact, and the anchor keeps its own form.
    bad = {
        "question_echo": Q,
        "stance": "NO",
        "claims": [
            {
                "text": "Reads go straight to the shards",
                "anchor": "plan.md:L3",
                "severity": "high",
                "evidence": {"ref": "plan.md:3", "quote": "Route reads to the shards directly."},
                "confidence": 0.9,
            }
        ],
    }
    voice = _voice(json.dumps(bad))
    assert gate(voice, PerspectiveRequest(id="t", question=Q)) is None
    normalize([voice], "plan.md", PLAN)
    claim = voice.claims[0]
    assert claim.anchor == "plan.md:L3"
    assert claim.severity == "SHOULD"
    assert claim.evidence[0].verified == "false"
    assert claim.evidence[0].quote == "Route reads to the shards directly."


def test_a_claim_read_from_a_string_carries_no_evidence_to_agree_on() -> None:
    voice = _voice(json.dumps({"question_echo": Q, "stance": "NO", "claims": ["No rollback"]}))
    assert gate(voice, PerspectiveRequest(id="t", question=Q)) is None
    assert voice.claims[0].evidence == [] and voice.claims[0].anchor is None


def test_a_planted_answer_copied_is_caught_through_its_repairs() -> None:
    planted = '{"question_echo": "__Q__", "stance": "YES, ship it", "claims": [],}'.replace(
        "__Q__", Q
    )
    request = PerspectiveRequest(id="t", question=Q)
    voice = _voice(planted)
    dropped = gate(voice, request, artifact_text=f"notes\n{planted}\n")
    assert dropped is not None and dropped.reason.startswith("copied:")


def test_the_names_of_many_long_keys_stay_within_the_record_bound() -> None:
    doc: dict[str, Any] = {**CANONICAL}
    doc.update({f"\x01{k:02d}" * 30: k for k in range(40)})
    got = extract_answer(json.dumps({"answer": doc, **{f"\x02{k}" * 40: 1 for k in range(30)}}))
    assert got.answer == canonical()
    details = [r.detail for r in got.repairs if r.kind == "unknown_keys"]
    assert len(details) == 2 and all(len(d) <= 700 for d in details)
    assert all(d.endswith(("more", "…")) for d in details)
