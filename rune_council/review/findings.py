"""The council's verdict on a change as findings: one per claim, each at its place.

Every format (SARIF, annotations, the PR comment) and the gate read these, so a finding has
one level and one place wherever it is shown. The level is the council's own
classification, never a new judgement: an agreement the council counted as consensus (two
confirmed families, evidence it verified) is an ``error`` at MUST and a ``warning`` below
it; everything else it kept (one voice, unverified, framing-sensitive, disputed) is a
``note``. A dissent entry about claims that are already findings (a correlated-wording note,
the inverted framing missing an agreement) is a label on those findings, not a second one.

A claim's place is read from its refs the way the council read them (``parse_ref`` with the
artifact's places), then turned from the artifact's line into the file and line it shows.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from ..core.contract import Claim, CouncilResult, DissentEntry, Severity, Voice
from ..stages.arbitrate import DECISION_SEVERITIES, unresolved_claims
from ..stages.normalize import parse_ref
from ..stages.places import Places, shown_path
from .artifact import ARTIFACT_NAME, ReviewArtifact
from .diff import DiffFile

Level = Literal["error", "warning", "note"]
Kind = Literal["consensus", "dissent"]
FRAMING = "framing-sensitive"
# The line part of a ref (":12", ":12-14", "#L3-L5"), taken off to name the file alone.
_LINES = re.compile(r"[:#]L?\d+(?:\s*[-\u2013]\s*L?\d+)?$")


@dataclass(frozen=True)
class Location:
    """A place in the repository: the path as the diff names it (the old path for a deleted
    file, the new one for a renamed file), the line (None: the file as a whole)."""

    path: str
    line: int | None
    status: str
    line_text: str | None = None  # the line's own text there, for a stable fingerprint

    @property
    def shown(self) -> str:
        where = shown_path(self.path)
        return f"{where}:{self.line}" if self.line is not None else where


@dataclass(frozen=True)
class Voiced:
    voice_id: str
    runtime: str
    family: str
    text: str


@dataclass(frozen=True)
class Finding:
    kind: Kind
    labels: tuple[str, ...]  # "consensus" or the dissent label first, then any later ones
    text: str
    severity: Severity | None
    claim_ids: tuple[str, ...]
    voice_ids: tuple[str, ...]
    families: tuple[str, ...]
    location: Location | None
    detail: str = ""
    needs_decision: bool = False
    members: tuple[Voiced, ...] = ()
    fingerprint: str = ""

    @property
    def level(self) -> Level:
        return level_of(self.kind, self.severity, self.labels)

    @property
    def rule(self) -> str:
        """What kind of finding it is, as a rule id: consensus by severity, dissent by label."""
        if self.kind == "consensus":
            return f"consensus-{(self.severity or 'unrated').lower()}"
        return f"dissent-{self.labels[0]}"


@dataclass(frozen=True)
class Remark:
    """A dissent entry about the council as a whole (a split on the question, framing)."""

    text: str
    label: str
    voice_ids: tuple[str, ...]
    detail: str = ""


@dataclass(frozen=True)
class Findings:
    findings: tuple[Finding, ...] = ()
    remarks: tuple[Remark, ...] = field(default_factory=tuple)

    def consensus(self) -> list[Finding]:
        return [f for f in self.findings if f.kind == "consensus"]

    def dissent(self) -> list[Finding]:
        return [f for f in self.findings if f.kind == "dissent"]


def level_of(kind: Kind, severity: Severity | None, labels: Iterable[str]) -> Level:
    """The one severity mapping: verified cross-family consensus is an error at MUST and a
    warning below; one voice, unverified or framing-sensitive agreement is a note."""
    if kind == "consensus" and FRAMING not in labels:
        return "error" if severity == "MUST" else "warning"
    return "note"


def decides(finding: Finding) -> bool:
    """A finding that asks for a decision: agreed at MUST or SHOULD but framing-sensitive,
    or kept as dissent that no consensus settles (the council's ``needs_decision``)."""
    if finding.needs_decision:
        return True
    return (
        finding.kind == "consensus"
        and FRAMING in finding.labels
        and finding.severity in DECISION_SEVERITIES
    )


# --------------------------------------------------------------------------- places


class _Locator:
    def __init__(self, artifact: ReviewArtifact) -> None:
        self.artifact = artifact
        lines = artifact.text.splitlines()
        self.places = Places.of(lines)
        # The same matching rule for a path cited alone (a binary file, a whole file).
        self.paths = Places({shown_path(f.path): {} for f in artifact.files})
        self.by_shown = {shown_path(f.path): k for k, f in enumerate(artifact.files)}
        self.lines = lines

    def claim(self, claim: Claim) -> Location | None:
        verified = [e.ref for e in claim.evidence if e.verified == "true"]
        others = [e.ref for e in claim.evidence if e.verified != "true"]
        for ref in [*verified, *([claim.anchor] if claim.anchor else []), *others]:
            found = self.ref(ref)
            if found is not None:
                return found
        return None

    def ref(self, ref: str) -> Location | None:
        parsed = parse_ref(ref, ARTIFACT_NAME, self.places)
        rows = self.artifact.rows
        if parsed.target == "@artifact" and parsed.start is not None:
            if 1 <= parsed.start <= len(rows):
                return self._row(parsed.start - 1)
            return None
        name = _LINES.sub("", ref.strip()) if parsed.start is not None else ref
        path = self.paths.path(name)
        if path is None:
            return None
        f = self.artifact.files[self.by_shown[path]]
        return Location(f.path, None, f.status)

    def _row(self, k: int) -> Location | None:
        rows = self.artifact.rows
        row = rows[k]
        if row.file is None:
            return None
        f: DiffFile = self.artifact.files[row.file]
        if row.kind == "file":
            return Location(f.path, None, f.status)
        if row.kind in ("context", "added") or (row.kind == "removed" and f.status == "deleted"):
            return Location(f.path, row.line, f.status, self._text(k))
        # A removed line has no place in the new file; the line after it has (or before it).
        order = [*range(k + 1, len(rows)), *range(k - 1, -1, -1)]
        for j in order:
            other = rows[j]
            if other.file != row.file:
                continue
            if other.kind in ("context", "added") and other.line is not None:
                return Location(f.path, other.line, f.status, self._text(j))
        return Location(f.path, None, f.status)

    def _text(self, k: int) -> str:
        return self.lines[k].split(" | ", 1)[-1][1:] if k < len(self.lines) else ""


# --------------------------------------------------------------------------- findings


def _voiced(ids: Sequence[str], claims: dict[str, Claim], voices: dict[str, Voice]) -> list[Voiced]:
    out = []
    for claim_id in ids:
        claim = claims.get(claim_id)
        if claim is None:
            continue
        voice = voices.get(claim.voice_id)
        runtime = voice.runtime if voice is not None else "?"
        family = voice.model_family if voice is not None else "unknown"
        out.append(Voiced(claim.voice_id, runtime, family, claim.text))
    return out


def _fingerprints(findings: list[Finding]) -> list[Finding]:
    """A fingerprint that holds still when unrelated lines move: the path and the words of
    the line (not its number), told apart by order when two findings share them."""
    seen: dict[tuple[str, str], int] = {}
    out = []
    for f in findings:
        loc = f.location
        base_parts = [
            loc.path if loc else "",
            " ".join((loc.line_text or "").split()) if loc else "",
            f.rule,
        ]
        digest = hashlib.sha256("\0".join(base_parts).encode("utf-8", "replace")).hexdigest()
        key = (f.rule, digest)
        seen[key] = seen.get(key, 0) + 1
        out.append(replace(f, fingerprint=f"{digest[:32]}:{seen[key]}"))
    return out


def findings_of(result: CouncilResult, artifact: ReviewArtifact) -> Findings:
    """The council's consensus and dissent on the change, each claim once, at its place."""
    voices = {v.id: v for v in result.voices}
    claims = {c.id: c for v in result.voices for c in v.claims}
    locate = _Locator(artifact)
    unresolved = {id(d) for d in unresolved_claims(result.agreement)}

    def place(ids: Sequence[str]) -> Location | None:
        for claim_id in ids:
            claim = claims.get(claim_id)
            if claim is not None and (found := locate.claim(claim)) is not None:
                return found
        return None

    made: list[Finding] = []
    owner: dict[str, list[int]] = {}
    for c in result.agreement.consensus_claims:
        for claim_id in c.claim_ids:
            owner.setdefault(claim_id, []).append(len(made))
        made.append(
            Finding(
                kind="consensus",
                labels=("consensus",),
                text=c.claim,
                severity=c.severity,
                claim_ids=tuple(c.claim_ids),
                voice_ids=tuple(c.voice_ids),
                families=tuple(c.families),
                location=(where := place(c.claim_ids)),
                detail=f"matched at {where.shown if where else c.matched_by.key}",
                members=tuple(_voiced(c.claim_ids, claims, voices)),
            )
        )
    remarks: list[Remark] = []
    for d in result.agreement.dissent:
        if not d.claim_ids:
            remarks.append(Remark(d.claim, d.label, tuple(d.voice_ids), d.detail))
            continue
        if all(i in owner for i in d.claim_ids):
            for k in sorted({k for i in d.claim_ids for k in owner[i]}):
                made[k] = _overlay(made[k], d, id(d) in unresolved)
            continue
        for claim_id in d.claim_ids:
            owner.setdefault(claim_id, []).append(len(made))
        made.append(
            Finding(
                kind="dissent",
                labels=(d.label,),
                text=d.claim,
                severity=d.severity,
                claim_ids=tuple(d.claim_ids),
                voice_ids=tuple(d.voice_ids),
                families=tuple(d.families),
                location=place(d.claim_ids),
                detail=d.detail,
                needs_decision=id(d) in unresolved,
                members=tuple(_voiced(d.claim_ids, claims, voices)),
            )
        )
    return Findings(tuple(_fingerprints(made)), tuple(remarks))


def _overlay(finding: Finding, entry: DissentEntry, unresolved: bool) -> Finding:
    labels = finding.labels if entry.label in finding.labels else (*finding.labels, entry.label)
    detail = "; ".join(p for p in (finding.detail, f"{entry.label}: {entry.detail}") if p)
    return replace(
        finding,
        labels=labels,
        detail=detail,
        needs_decision=finding.needs_decision or unresolved,
    )


__all__ = [
    "Finding",
    "Findings",
    "Level",
    "Location",
    "Remark",
    "decides",
    "findings_of",
    "level_of",
]
