from rune_council.core.answer import extract_answer
from tests.helpers import answer, claim

Q = "Should we shard the orders table?"


def test_fenced_block_inside_prose_is_found() -> None:
    text = answer(Q, "YES, with care", [claim("Rollback is missing", severity="MUST")])
    got = extract_answer(text)
    assert got.answer is not None
    assert got.answer.claims[0].severity == "MUST"


def test_bare_object_with_surrounding_noise() -> None:
    text = "thinking... {not json} " + answer(Q, "NO", [], fenced=False) + " trailing {"
    got = extract_answer(text)
    assert got.answer is not None and got.answer.stance == "NO"


def test_a_restated_answer_that_differs_is_ambiguous_not_the_last_one() -> None:
    first = answer(Q, "YES draft", [])
    second = answer(Q, "NO final", [])
    got = extract_answer(first + "\nCorrection:\n" + second)
    assert got.answer is None and got.problem == "ambiguous"
    assert "'YES draft'" in got.reason and "'NO final'" in got.reason


def test_prose_without_json_is_malformed_with_reason() -> None:
    got = extract_answer("I think you should shard it, yes.")
    assert got.answer is None
    assert "no JSON object" in got.reason


def test_json_of_the_wrong_shape_names_the_field() -> None:
    got = extract_answer('{"question_echo": "x", "claims": []}')
    assert got.answer is None
    assert "stance" in got.reason


def test_unknown_fields_are_ignored_and_named() -> None:
    got = extract_answer('{"question_echo": "x", "stance": "YES", "claims": [], "mood": "happy"}')
    assert got.answer is not None
    assert [(r.kind, r.detail) for r in got.repairs] == [("unknown_keys", "ignored 'mood'")]


def test_a_severity_outside_the_table_is_rejected() -> None:
    text = answer(Q, "YES", [claim("x", severity="URGENT")])
    got = extract_answer(text)
    assert got.answer is None and "claims.0.severity" in got.reason
