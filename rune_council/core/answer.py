"""Read a voice's JSON answer out of whatever text a runtime printed, and say what was repaired.

Models wrap JSON in prose and code fences; a fenced ``json`` block is preferred, else an
object anywhere in the text. Real models also bend the shape in a few ways that say nothing
about their judgement, and each of those is read by one rule here (the list is in
contracts/council-voice-contract.md, "Version 2.7"):

- ``//`` and ``/* */`` comments and trailing commas outside strings are ignored;
- an answer one level down, under ``answer``, ``response`` or ``result``, is read from there;
- keys the contract does not name are ignored;
- a severity word is read through ``SEVERITY_WORDS``, the one table of the contract;
- one evidence object is read as a list of one, a claim given as a string as a claim
  without anchor, severity or evidence.

Every rule applied is returned as a ``Repair``; GATE records them on the voice and the raw
text stays as written, so ``verify`` reads it again through these same rules. Nothing else
is guessed: an object that still does not fit, an answer cut before its JSON closes, and a
reply holding two different answers are not answers, each with its own reason. No rule
touches a quote or an anchor: what decides consensus is checked against the artifact later,
exactly as the voice wrote it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import field
from typing import Any, Literal

from pydantic import ValidationError

from . import safejson
from .contract import AnswerClaim, Evidence, Repair, Severity, VoiceAnswer
from .records import record

_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*\n(.*?)```", re.DOTALL)
_MAX_SCAN = 400_000
# Tolerant reading rescans a value token by token; this bounds the characters one reply may
# cost that way (a few times the longest text scanned), so a reply of many unclosed braces
# cannot make reading it quadratic.
_TOLERANT_BUDGET = 4 * _MAX_SCAN

ANSWER_KEYS = tuple(VoiceAnswer.model_fields)
_CLAIM_KEYS = tuple(AnswerClaim.model_fields)
_EVIDENCE_KEYS = tuple(Evidence.model_fields)
# One level of wrapping is read through when the object holds no answer key of its own.
WRAPPER_KEYS = ("answer", "response", "result")

# The contract's one severity table (contracts/council-voice-contract.md, "Version 2.7"):
# RFC 2119's own synonyms, and the review scale read as the verdict section reads it
# (MUST = CRITICAL, SHOULD = HIGH, MAY = anything lower). Keys are compared upper-cased with
# '-' and '_' read as spaces; a word not here is not guessed at, it leaves the answer unfit.
SEVERITY_WORDS: dict[str, Severity] = {
    "MUST": "MUST",
    "MUST NOT": "MUST",
    "SHALL": "MUST",
    "SHALL NOT": "MUST",
    "REQUIRED": "MUST",
    "CRITICAL": "MUST",
    "BLOCKER": "MUST",
    "SHOULD": "SHOULD",
    "SHOULD NOT": "SHOULD",
    "RECOMMENDED": "SHOULD",
    "HIGH": "SHOULD",
    "MAJOR": "SHOULD",
    "MAY": "MAY",
    "OPTIONAL": "MAY",
    "MEDIUM": "MAY",
    "LOW": "MAY",
    "MINOR": "MAY",
    "INFO": "MAY",
}

Problem = Literal["malformed", "truncated", "ambiguous"]


@record(frozen=True)
class Extraction:
    answer: VoiceAnswer | None
    reason: str
    # Set when ``answer`` is None: the word GATE's drop reason starts with.
    problem: Problem | None = None
    repairs: tuple[Repair, ...] = ()


def read_severity(word: str) -> Severity | None:
    """The contract severity ``word`` stands for, by the one table; None when it names none."""
    key = " ".join(word.replace("-", " ").replace("_", " ").split()).upper()
    return SEVERITY_WORDS.get(key)


# --------------------------------------------------------------------------- tolerant JSON

# A whole string, a string the text ends inside, a line comment, a whole block comment, a
# block comment never closed, a bracket or a comma.
_TOLERANT_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|"|//[^\n]*|/\*.*?\*/|/\*|[\[\]{},]', re.DOTALL)


@record(frozen=True)
class _Span:
    """The JSON-ish value starting at a '{', as the tolerant scan saw it."""

    end: int  # just past its closing bracket; -1 when the text ends inside it
    text: str = ""  # the value with its comments and trailing commas left out
    comments: int = 0
    commas: int = 0
    scanned: int = 0
    gave_up: bool = False  # the scan budget ran out first: nothing is known


def _tolerant_span(text: str, start: int, budget: int) -> _Span:
    depth = 0
    pieces: list[str] = []  # every comma is a piece of its own, so a trailing one can go
    copied = start
    comments = commas = 0
    comma = -1  # the piece of a comma that is trailing if only blanks and comments follow
    last_end = start
    stop = min(len(text), start + budget)
    for match in _TOLERANT_TOKEN.finditer(text, start, stop):
        token = match.group()
        begin, end = match.span()
        if comma >= 0 and text[last_end:begin].strip():
            comma = -1
        last_end = end
        if token in ('"', "/*"):  # a string or comment the text ends inside
            break
        if token.startswith(("//", "/*")):
            pieces += [text[copied:begin], " "]
            copied = end
            comments += 1
            continue
        if token == ",":
            pieces += [text[copied:begin], ","]
            copied = end
            comma = -1 if comma >= 0 else len(pieces) - 1
            continue
        if token in "}]" and comma >= 0:
            pieces[comma] = ""
            commas += 1
        comma = -1
        if token in "[{":
            depth += 1
            if depth > safejson.DEFAULT_MAX_DEPTH:
                return _Span(end=-1, scanned=end - start)
        elif token in "}]":
            depth -= 1
            if depth == 0:
                pieces.append(text[copied:end])
                return _Span(end, "".join(pieces), comments, commas, end - start)
    return _Span(end=-1, scanned=stop - start, gave_up=stop < len(text))


# --------------------------------------------------------------------------- candidates


@record(frozen=True)
class _Found:
    value: object
    at: int
    repairs: tuple[Repair, ...]


@record(frozen=True)
class _Broken:
    """An object that names answer fields but is not JSON even when read tolerantly."""

    at: int
    unclosed: bool
    why: str


@record
class _Scan:
    found: list[_Found] = field(default_factory=list)
    broken: list[_Broken] = field(default_factory=list)


# Quoted either way or bare: a broken object still says it meant to be an answer.
_ANSWER_FIELD = re.compile(r"""["']?\b(?:question_echo|stance)\b["']?\s*:""")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _text_repairs(span: _Span) -> tuple[Repair, ...]:
    out = []
    if span.comments:
        out.append(
            Repair(kind="comment", detail=f"{_plural(span.comments, 'comment')} outside strings")
        )
    if span.commas:
        out.append(
            Repair(
                kind="trailing_comma",
                detail=f"{_plural(span.commas, 'comma')} before a closing bracket",
            )
        )
    return tuple(out)


def _json_problem(text: str, start: int, exc: json.JSONDecodeError) -> str:
    what = str(exc).removeprefix("not JSON: ").split(": line ")[0]
    before = text[start : max(start, exc.pos)]
    line = before.count("\n") + 1
    column = len(before) - (before.rfind("\n") + 1) + 1
    return f"{what} (line {line}, column {column} of the object)"


def _scan(text: str, offset: int = 0) -> _Scan:
    """Every top-level JSON value starting at a '{', strict first, then tolerantly; places
    are counted from ``offset`` (where ``text`` sits in the whole reply)."""
    out = _Scan()
    budget = _TOLERANT_BUDGET
    pos = text.find("{")
    while pos != -1:
        try:
            value, end = safejson.raw_decode(text, pos)
        except safejson.TooDeep as exc:
            pos = text.find("{", exc.resume_at)
            continue
        except json.JSONDecodeError as exc:
            strict_error = exc
        else:
            out.found.append(_Found(value, offset + pos, ()))
            pos = text.find("{", end)
            continue
        span = _tolerant_span(text, pos, budget) if budget > 0 else _Span(-1, gave_up=True)
        budget -= span.scanned
        why = ""
        if span.end > 0 and (span.comments or span.commas):
            try:
                value = safejson.loads(span.text)
            except json.JSONDecodeError as exc:
                why = str(exc).removeprefix("input is not JSON: ").split(": line ")[0]
            else:
                out.found.append(_Found(value, offset + pos, _text_repairs(span)))
                pos = text.find("{", span.end)
                continue
        end = span.end if span.end > 0 else len(text)
        if not span.gave_up and _ANSWER_FIELD.search(text, pos, end):
            why = why or _json_problem(text, pos, strict_error)
            out.broken.append(_Broken(offset + pos, span.end < 0, why))
        # Inside a broken object the next brace may still start a whole one.
        pos = text.find("{", pos + 1)
    return out


# --------------------------------------------------------------------------- repairs


def _names(keys: Iterable[str]) -> str:
    """The keys, quoted, within a bound: a voice's keys can be long and many."""
    shown = [repr(k[:60]) for k in keys]
    text = ", ".join(shown[:10]) + (f" and {len(shown) - 10} more" if len(shown) > 10 else "")
    return text if len(text) <= 600 else text[:599] + "…"


def _known(
    obj: dict[str, Any], keys: tuple[str, ...], at: str, repairs: list[Repair]
) -> dict[str, Any]:
    unknown = [k for k in obj if k not in keys]
    if unknown:
        repairs.append(Repair(kind="unknown_keys", at=at, detail=f"ignored {_names(unknown)}"))
    return {k: obj[k] for k in keys if k in obj}


def _evidence(item: object, at: str, repairs: list[Repair]) -> object:
    return _known(item, _EVIDENCE_KEYS, at, repairs) if isinstance(item, dict) else item


def _claim(item: object, at: str, repairs: list[Repair]) -> object:
    if isinstance(item, str):
        repairs.append(
            Repair(
                kind="claim_string",
                at=at,
                detail="a plain string read as a claim without anchor, severity or evidence",
            )
        )
        return {"text": item}
    if not isinstance(item, dict):
        return item
    out = _known(item, _CLAIM_KEYS, at, repairs)
    severity = out.get("severity")
    if isinstance(severity, str):
        mapped = read_severity(severity)
        if mapped is not None and mapped != severity:
            repairs.append(
                Repair(
                    kind="severity",
                    at=f"{at}.severity",
                    detail=f"{severity[:40]!r} read as {mapped}",
                )
            )
            out["severity"] = mapped
    evidence = out.get("evidence")
    if isinstance(evidence, dict):
        repairs.append(
            Repair(
                kind="evidence_object",
                at=f"{at}.evidence",
                detail="one evidence object read as a list of one",
            )
        )
        evidence = [evidence]
    if isinstance(evidence, list):
        out["evidence"] = [
            _evidence(e, f"{at}.evidence[{j}]", repairs) for j, e in enumerate(evidence)
        ]
    return out


@record(frozen=True)
class _Reading:
    answer: VoiceAnswer | None
    repairs: tuple[Repair, ...]
    error: str


def _unwrapped(obj: dict[str, Any], repairs: list[Repair]) -> dict[str, Any] | None:
    """The answer object itself: ``obj``, or the one wrapper value inside it."""
    if any(k in obj for k in ANSWER_KEYS):
        return obj
    inner = [k for k in obj if k.lower() in WRAPPER_KEYS and isinstance(obj[k], dict)]
    if len(inner) != 1 or not any(k in obj[inner[0]] for k in ANSWER_KEYS):
        return None
    key = inner[0]
    repairs.append(Repair(kind="unwrapped", detail=f"the answer was read from inside {key[:60]!r}"))
    others = [k for k in obj if k != key]
    if others:
        repairs.append(
            Repair(kind="unknown_keys", detail=f"ignored beside {key[:60]!r}: {_names(others)}")
        )
    wrapped: dict[str, Any] = obj[key]
    return wrapped


def _read(value: object, text_repairs: tuple[Repair, ...] = ()) -> _Reading | None:
    """``value`` read as a voice answer by the repair rules; None when it is not one at all
    (not an object, or one naming none of the answer's fields: a claim, an example)."""
    if not isinstance(value, dict):
        return None
    repairs = list(text_repairs)
    obj = _unwrapped(value, repairs)
    if obj is None:
        return None
    shaped = _known(obj, ANSWER_KEYS, "", repairs)
    claims = shaped.get("claims")
    if isinstance(claims, list):
        shaped["claims"] = [_claim(c, f"claims[{i}]", repairs) for i, c in enumerate(claims)]
    try:
        return _Reading(VoiceAnswer.model_validate(shaped), tuple(repairs), "")
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "answer"
        return _Reading(None, (), f"{where}: {first['msg']}")


# --------------------------------------------------------------------------- the answer


def _problem_of(scan: _Scan, readings: list[tuple[int, _Reading]]) -> Extraction:
    """Why nothing in ``scan`` is an answer: the last thing that tried to be one, by place."""
    tries: list[tuple[int, Problem, str]] = [
        (at, "malformed", f"answer JSON does not fit the voice contract: {r.error}")
        for at, r in readings
    ]
    for b in scan.broken:
        if b.unclosed:
            tries.append((b.at, "truncated", "the output ends before the answer's JSON closes"))
        else:
            tries.append((b.at, "malformed", f"the answer object is not JSON: {b.why}"))
    if tries:
        _, problem, reason = max(tries, key=lambda t: t[0])
        return Extraction(None, reason, problem)
    if scan.found:
        return Extraction(
            None,
            "no answer object found: no JSON object in the output has "
            + ", ".join(ANSWER_KEYS[:-1])
            + f" or {ANSWER_KEYS[-1]}",
            "malformed",
        )
    return Extraction(None, "no JSON object found in the voice's output", "malformed")


def _readings(scan: _Scan) -> list[tuple[int, _Reading]]:
    out = []
    for f in scan.found:
        reading = _read(f.value, f.repairs)
        if reading is not None:
            out.append((f.at, reading))
    return out


def extract_answer(text: str) -> Extraction:
    text = text[:_MAX_SCAN]
    scan = _Scan()
    for block in _FENCE.finditer(text):
        part = _scan(block.group(1), offset=block.start(1))
        scan.found += part.found
        scan.broken += part.broken
    readings = _readings(scan)
    if not readings and not scan.broken:
        # No fenced block holds an answer: the answer, if any, is bare in the text.
        scan = _scan(text)
        readings = _readings(scan)
    answers = [(at, r.answer, r) for at, r in readings if r.answer is not None]
    if not answers:
        return _problem_of(scan, readings)
    distinct: list[VoiceAnswer] = []
    for _, answer, _ in answers:
        if answer not in distinct:
            distinct.append(answer)
    if len(distinct) > 1:
        # Restating a corrected answer and changing one's mind look alike: choosing either
        # would be the council deciding what the voice meant.
        stances = "; ".join(repr(a.stance[:80]) for a in distinct[:3])
        return Extraction(
            None,
            f"the output holds {len(distinct)} different answer objects and the council "
            f"does not choose between them (stances {stances})",
            "ambiguous",
        )
    _, answer, last = answers[-1]
    return Extraction(answer, "ok", None, last.repairs)


def contract_answers(text: str) -> list[VoiceAnswer]:
    """Every object in ``text`` that reads as a voice answer, by the same rules as GATE.

    A voice's answer that equals one of these was copied from what it was shown (a block
    planted in the artifact or the question), not written.
    """
    found: list[VoiceAnswer] = []
    for _, reading in _readings(_scan(text[:_MAX_SCAN])):
        if reading.answer is not None:
            found.append(reading.answer)
    return found


def answer_problem(text: str) -> str | None:
    """Why ``text`` is not a voice answer, or None when it is one.

    A council slot hands this to its runtime as the reply check, so a runtime that can try
    another model (an HTTP endpoint's pool) does so when a model answers in prose.
    """
    extraction = extract_answer(text)
    if extraction.answer is not None:
        return None
    kind = "" if extraction.problem == "malformed" else f" ({extraction.problem})"
    return f"not a voice answer{kind}: {extraction.reason}"
