"""Pull the voice's JSON answer out of whatever text a runtime printed.

Models wrap JSON in prose and code fences; we accept a fenced ``json`` block or a bare
object anywhere in the text, preferring the last candidate that validates (models tend to
restate a corrected answer at the end). Anything else is malformed: GATE drops it rather
than guessing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from pydantic import ValidationError

from . import safejson
from .contract import VoiceAnswer

_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*\n(.*?)```", re.DOTALL)
_MAX_SCAN = 400_000


@dataclass(frozen=True)
class Extraction:
    answer: VoiceAnswer | None
    reason: str


def _objects_in(text: str) -> list[object]:
    """Every top-level JSON value that starts at a '{' and decodes cleanly."""
    found: list[object] = []
    pos = text.find("{")
    while pos != -1:
        try:
            value, end = safejson.raw_decode(text, pos)
        except safejson.TooDeep as exc:
            pos = text.find("{", exc.resume_at)
            continue
        except json.JSONDecodeError:
            pos = text.find("{", pos + 1)
            continue
        found.append(value)
        pos = text.find("{", end)
    return found


def extract_answer(text: str) -> Extraction:
    text = text[:_MAX_SCAN]
    candidates: list[object] = []
    for block in _FENCE.findall(text):
        candidates.extend(_objects_in(block))
    if not candidates:
        candidates = _objects_in(text)
    if not candidates:
        return Extraction(None, "no JSON object found in the voice's output")
    last_error = ""
    for value in reversed(candidates):
        if not isinstance(value, dict):
            continue
        try:
            return Extraction(VoiceAnswer.model_validate(value), "ok")
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "answer"
            last_error = f"answer JSON does not fit the voice contract: {where}: {first['msg']}"
    return Extraction(None, last_error or "no JSON object found in the voice's output")


def contract_answers(text: str) -> list[VoiceAnswer]:
    """Every object in ``text`` that is already a valid voice answer.

    A voice's answer that equals one of these was copied from what it was shown (a block
    planted in the artifact or the question), not written.
    """
    found: list[VoiceAnswer] = []
    for value in _objects_in(text[:_MAX_SCAN]):
        if isinstance(value, dict):
            try:
                found.append(VoiceAnswer.model_validate(value))
            except ValidationError:
                continue
    return found


def answer_problem(text: str) -> str | None:
    """Why ``text`` is not a voice answer, or None when it is one.

    A council slot hands this to its runtime as the reply check, so a runtime that can try
    another model (an HTTP endpoint's pool) does so when a model answers in prose.
    """
    extraction = extract_answer(text)
    return None if extraction.answer is not None else f"not a voice answer: {extraction.reason}"
