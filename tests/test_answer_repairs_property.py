"""A repaired answer and its canonical form are the same answer to the council.

Hypothesis writes a valid answer about PLAN, then writes it again the way real models slip
(severity words from the table in any case, one evidence object, bare-string claims, keys
the contract does not name, a wrapper, trailing commas, comments, a fence). Both texts go
through GATE and NORMALIZE beside a second voice; everything the council decides from them
must be equal, and the repairs recorded must be exactly the slips that were made.
"""

from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rune_council.core.answer import SEVERITY_WORDS, WRAPPER_KEYS
from rune_council.core.contract import PerspectiveRequest, RawOutput, Voice
from rune_council.stages.gate import gate
from rune_council.stages.normalize import normalize
from tests.helpers import PLAN

Q = "Should we shard the orders table?"
LINES = PLAN.splitlines()
WORDS_FOR = {
    sev: [w for w, s in SEVERITY_WORDS.items() if s == sev] for sev in ("MUST", "SHOULD", "MAY")
}

_texts = st.sampled_from(
    [
        "The plan has no rollback step",
        "Reads depend on a new lookup service",
        "The site goes offline for a weekend",
        "Reporting stays on the old table",
        "Eight shards leave headroom",
    ]
)


@st.composite
def claims(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {"text": draw(_texts)}
    line = draw(st.integers(1, len(LINES)))
    if draw(st.booleans()):
        out["anchor"] = f"plan.md:{line}"
    if draw(st.booleans()):
        out["severity"] = draw(st.sampled_from(["MUST", "SHOULD", "MAY"]))
    quote = draw(st.sampled_from([LINES[line - 1].lstrip("0123456789. "), "words nowhere in it"]))
    out["evidence"] = [{"ref": f"plan.md:{line}", "quote": quote}][: draw(st.integers(0, 1))]
    return out


answers = st.builds(
    lambda stance, cs: {"question_echo": Q, "stance": stance, "claims": cs},
    st.sampled_from(["NO, not without a rollback", "YES, with care", "MIXED: it depends"]),
    st.lists(claims(), max_size=4),
)


def _slipped(answer: dict[str, Any], rng: random.Random) -> tuple[Any, set[str]]:
    """``answer`` as a model might write it, and the repair kinds that must be recorded."""
    kinds: set[str] = set()
    out_claims: list[Any] = []
    for claim in answer["claims"]:
        c = dict(claim)
        if "severity" in c and rng.random() < 0.6:
            word = rng.choice(WORDS_FOR[c["severity"]])
            word = rng.choice([word, word.lower(), word.title(), word.replace(" ", "-")])
            if word != c["severity"]:
                kinds.add("severity")
            c["severity"] = word
        if len(c["evidence"]) == 1 and rng.random() < 0.5:
            c["evidence"] = c["evidence"][0]
            kinds.add("evidence_object")
        if rng.random() < 0.3:
            c["confidence"] = rng.random()
            kinds.add("unknown_keys")
        bare = set(c) - {"evidence"} == {"text"} and not c.get("evidence")
        if bare and rng.random() < 0.5:
            out_claims.append(c["text"])
            kinds.add("claim_string")
            continue
        if not c["evidence"] and rng.random() < 0.5:
            del c["evidence"]  # absent and empty are the same answer, and no repair
        out_claims.append(c)
    doc: dict[str, Any] = {**answer, "claims": out_claims}
    if rng.random() < 0.3:
        doc["reasoning"] = "thought about it"
        kinds.add("unknown_keys")
    if rng.random() < 0.4:
        doc = {rng.choice(WRAPPER_KEYS): doc}
        kinds.add("unwrapped")
        if rng.random() < 0.5:
            doc["model"] = "small"
            kinds.add("unknown_keys")
    return doc, kinds


def _write(value: Any, rng: random.Random, kinds: set[str]) -> str:
    """JSON text of ``value``, with trailing commas and comments sprinkled outside strings."""
    if isinstance(value, dict | list):
        items = (
            [f"{json.dumps(k)}: {_write(v, rng, kinds)}" for k, v in value.items()]
            if isinstance(value, dict)
            else [_write(v, rng, kinds) for v in value]
        )
        opener, closer = ("{", "}") if isinstance(value, dict) else ("[", "]")
        body = ", ".join(items)
        if items and rng.random() < 0.3:
            body += ","
            kinds.add("trailing_comma")
        if rng.random() < 0.15:
            body = "/* note: a // b */ " + body
            kinds.add("comment")
        if rng.random() < 0.15:
            body += " // done\n"
            kinds.add("comment")
        return opener + body + closer
    return json.dumps(value)


def _voice(voice_id: str, family: str, text: str) -> Voice:
    return Voice(
        id=voice_id,
        source="external-cli",
        runtime=f"{family}-cli",
        model_family=family,
        family_confidence="confirmed",
        status="complete",
        raw=RawOutput(text=text),
    )


OTHER = {
    "question_echo": Q,
    "stance": "NO, add a rollback first",
    "claims": [
        {
            "text": "Nothing says how to undo the migration if it fails",
            "anchor": "plan.md:6",
            "severity": "MUST",
            "evidence": [{"ref": "plan.md:6", "quote": "No rollback step is defined."}],
        }
    ],
}


def _council(text: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[Any]]:
    request = PerspectiveRequest(id="t", question=Q)
    voices = [_voice("v1", "anthropic", text), _voice("v2", "openai", json.dumps(OTHER))]
    for v in voices:
        gate(v, request, PLAN)
    done = normalize(voices, "plan.md", PLAN)
    decided = [v.model_dump(exclude={"raw", "repairs"}) for v in done.voices]
    return decided, [c.model_dump() for c in done.clusters], done.near_verbatim


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answers, st.randoms(use_true_random=False), st.booleans())
def test_a_repaired_answer_gates_and_normalizes_as_its_canonical_form(
    answer: dict[str, Any], rng: random.Random, fenced: bool
) -> None:
    canonical = json.dumps(answer)
    doc, kinds = _slipped(answer, rng)
    text = _write(doc, rng, kinds)
    if fenced:
        text = f"Here is my answer:\n```json\n{text}\n```\n"

    assert _council(text) == _council(canonical)

    repaired = _voice("v1", "anthropic", text)
    assert gate(repaired, PerspectiveRequest(id="t", question=Q), PLAN) is None
    assert {r.kind for r in repaired.repairs} == kinds
    plain = _voice("v1", "anthropic", canonical)
    assert gate(plain, PerspectiveRequest(id="t", question=Q), PLAN) is None
    assert plain.repairs == []
