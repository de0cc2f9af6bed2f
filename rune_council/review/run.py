"""A review from a change to a verdict, through the intake every door uses.

``prepare_review`` turns the change into its artifact and the council's ask (mode
``review``, the artifact inline, the caller's keys beside them: a template, endpoints, ...)
and hands it to ``council.intake.prepare`` with the door's ``Door``; what the artifact left
out goes into the run file's notes from its first write. The door convenes the prepared
council its own way (asking for consent on a terminal, say) and ``conclude`` reads the
result as findings and a gate verdict.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.contract import CouncilResult
from ..council.intake import Door, Prepared, parse_ask, prepare
from .artifact import ARTIFACT_NAME, ReviewArtifact, build_artifact
from .diff import Diff
from .findings import Findings, findings_of
from .gate import FailOn, GateOutcome, judge

MODE = "review"


@dataclass(frozen=True)
class Reviewed:
    """Everything a format shows: the change, its artifact, the council's result (None: the
    change was empty, so no council sat), the findings and the gate's verdict."""

    diff: Diff
    artifact: ReviewArtifact
    result: CouncilResult | None
    findings: Findings
    gate: GateOutcome

    @property
    def empty(self) -> bool:
        return self.result is None


def is_empty(diff: Diff) -> bool:
    return not diff.files and not diff.unread


def prepare_review(
    diff: Diff, keys: Mapping[str, Any], door: Door
) -> tuple[ReviewArtifact, Prepared]:
    """The council a review of ``diff`` stands for. ``keys`` are the caller's ask keys
    (``template``, ``n``, ``endpoints``, ...); the question, mode and artifact are the
    review's. Raises ``AskError`` naming the key at fault, as every door's intake does."""
    artifact = build_artifact(diff)
    ask = parse_ask(
        {
            **keys,
            "question": artifact.question,
            "mode": MODE,
            "artifact": {"name": ARTIFACT_NAME, "text": artifact.text},
        },
        door.spell,
    )
    prepared = prepare(ask, door)
    notes = [f"review: left out: {note}" for note in artifact.left_out]
    return artifact, prepared.with_options(notes=notes)


def conclude(
    diff: Diff, artifact: ReviewArtifact, result: CouncilResult | None, fail_on: FailOn
) -> Reviewed:
    found = findings_of(result, artifact) if result is not None else Findings()
    return Reviewed(diff, artifact, result, found, judge(result, found, fail_on))


__all__ = ["MODE", "Reviewed", "conclude", "is_empty", "prepare_review"]
