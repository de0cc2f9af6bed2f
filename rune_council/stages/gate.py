"""Step 4, GATE: only well-formed, on-topic answers count toward anything.

A voice that fails is dropped with its reason, never re-asked: a retry would correlate the
second answer with the prompt that just failed. The only repairs are the reading rules of
``answer.py`` (formatting, never judgement), and each one applied is recorded on the voice.
"""

from __future__ import annotations

import re
from typing import Literal

from ..core.answer import contract_answers, extract_answer
from ..core.contract import Claim, DroppedVoice, PerspectiveRequest, VerifiedEvidence, Voice
from ..core.made import made
from ..core.text import normalise
from .topic import topic_match

GATE = "council.gate"
Position = Literal["yes", "no", "mixed", "unclear"]
_POSITIONS: dict[str, Position] = {"yes": "yes", "no": "no", "mixed": "mixed"}


def position_of(stance: str) -> Position:
    words = normalise(stance).split()
    return _POSITIONS.get(words[0], "unclear") if words else "unclear"


_LEADING_POSITION = re.compile(r"^\s*(?:yes|no|mixed)\b[\s:;,.!\u2014\u2013-]*", re.IGNORECASE)


def stance_reason(stance: str) -> str:
    """The stance without its leading YES / NO / MIXED, for text that states the position."""
    return _LEADING_POSITION.sub("", stance, count=1).strip()


def topic_score(echo: str, question: str) -> float:
    """How far the echoed question is about what the asked one is about (0..1)."""
    return topic_match(echo, question).score


def _drop(voice: Voice, reason: str) -> DroppedVoice:
    voice.status = "dropped"
    voice.dropped_by = GATE
    voice.drop_reason = reason
    return DroppedVoice(voice_id=voice.id, runtime=voice.runtime, reason=reason, dropped_by=GATE)


def gate(
    voice: Voice, request: PerspectiveRequest, artifact_text: str | None = None
) -> DroppedVoice | None:
    """Fill in the voice's parsed answer or drop it; returns the drop record if dropped."""
    if voice.status != "complete" or voice.raw is None:
        return None
    extraction = extract_answer(voice.raw.text)
    voice.repairs = list(extraction.repairs)
    if extraction.answer is None:
        voice.validity.well_formed = "fail"
        if voice.raw.truncated:
            return _drop(
                voice,
                "too long: the answer is over the size a voice may give, so it was cut and "
                f"cannot be read whole ({extraction.reason})",
            )
        return _drop(voice, f"{extraction.problem or 'malformed'}: {extraction.reason}")
    answer = extraction.answer
    inline = request.artifact.text if request.artifact is not None else None
    shown = f"{request.question}\n{artifact_text or inline or ''}"
    if "{" in shown and answer in contract_answers(shown):
        # Copying a ready-made answer from the material is not an independent judgement.
        voice.validity.well_formed = "fail"
        return _drop(
            voice,
            "copied: the answer reproduces a JSON answer found in the question or artifact",
        )
    voice.validity.well_formed = "pass"
    voice.question_echo = answer.question_echo
    voice.stance = answer.stance
    voice.position = position_of(answer.stance)
    match = topic_match(answer.question_echo, request.question)
    if not match.on_topic():
        voice.validity.on_topic = "fail"
        return _drop(
            voice, f"off-topic: answered {answer.question_echo[:200]!r}: {match.explain()}"
        )
    voice.validity.on_topic = "pass"
    voice.claims = [
        made(
            Claim,
            id=f"{voice.id}.c{k}",
            voice_id=voice.id,
            text=c.text,
            anchor=c.anchor,
            severity=c.severity,
            evidence=[made(VerifiedEvidence, ref=e.ref, quote=e.quote) for e in c.evidence],
        )
        for k, c in enumerate(answer.claims, start=1)
    ]
    return None
