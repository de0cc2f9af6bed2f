"""Step 5, NORMALIZE: check evidence mechanically, then decide which claims are "the same".

Evidence is checked by the council against the artifact (quote present at the cited place),
never by the voice that cited it. Two claims match only through a shared anchor or a shared
evidence ref; wording similarity alone never makes a match. Near-verbatim wording is
detected separately, as a warning sign of correlated voices.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import combinations

from rapidfuzz import fuzz

from ..contract import Claim, ClaimCluster, MatchedBy, Verified, Voice
from ..text import content_words, negated, normalise, polarity_differs, strip_negations

VERIFIER = "council.mechanical"
MATCHER = "rune-council/normalize-v2 (deterministic)"
NEAR_VERBATIM = 85.0
# A shared ref is required for an arbiter match; on top of it the claims must rest on the
# same quote or read alike, so two unrelated remarks about one line stay apart.
ARBITER_SIMILARITY_FLOOR = 45.0
NEARBY_LINES = 2
OPPOSED_SIMILARITY = 80.0
# A quote verifies a claim only if it can stand for one place in the artifact: three words
# that carry meaning (stop words do not count) and a dozen characters. Checked against the
# quotes real CLIs give (whole clauses of a line) and the one-word quotes that used to turn
# a fabricated claim into consensus.
MIN_QUOTE_WORDS = 3
MIN_QUOTE_CHARS = 12

_GUTTER = re.compile(r"^\s*\d+\s*\|\s?", re.MULTILINE)
_LINE_REF = re.compile(r"^(?P<file>.*?)[:#]L?(?P<start>\d+)(?:\s*[-\u2013]\s*L?(?P<end>\d+))?$")
_SYMBOL = re.compile(r"^[A-Za-z_][\w.:]*(?:\(\))?$")


@dataclass(frozen=True)
class Ref:
    target: str  # normalised file or symbol name ("" when it only names lines)
    start: int | None
    end: int | None

    def overlaps(self, other: Ref) -> bool:
        if self.target != other.target:
            return False
        if self.start is None or other.start is None:
            return self.start is None and other.start is None
        a_end = self.end or self.start
        b_end = other.end or other.start
        return self.start <= b_end and other.start <= a_end


@dataclass(frozen=True)
class NearVerbatim:
    claim_ids: tuple[str, str]
    voice_ids: tuple[str, str]
    score: float
    conflicting: bool


@dataclass
class Normalized:
    voices: list[Voice]
    clusters: list[ClaimCluster]
    near_verbatim: list[NearVerbatim]


def _target_name(name: str, artifact_name: str | None) -> str:
    name = name.strip().strip("`'\"").lower()
    base = name.rsplit("/", 1)[-1]
    if artifact_name is not None:
        art = artifact_name.lower()
        if base in {"", "artifact", art, art.rsplit("/", 1)[-1]} or name == art:
            return "@artifact"
    return base


def parse_ref(ref: str, artifact_name: str | None) -> Ref:
    text = ref.strip()
    m = _LINE_REF.match(text)
    if m:
        start = int(m.group("start"))
        end = int(m.group("end")) if m.group("end") else None
        return Ref(_target_name(m.group("file"), artifact_name), start, end)
    if text.lower().startswith("line "):
        rest = text[5:].strip()
        if rest.isdigit():
            return Ref(_target_name("", artifact_name), int(rest), None)
    return Ref(_target_name(text, artifact_name), None, None)


def _squash(text: str) -> str:
    return " ".join(text.split())


def check_quote(ref: Ref, quote: str | None, lines: list[str]) -> tuple[Verified, str]:
    if ref.target != "@artifact":
        return "unchecked", "ref points outside the artifact"
    if not quote or not quote.strip():
        return "unchecked", "no quote to check"
    wanted = _squash(_GUTTER.sub("", quote)).strip(" .…\"'")
    if not wanted:
        return "unchecked", "no quote to check"
    if ref.start is None:
        window = lines
        where = "the artifact"
    else:
        end = ref.end or ref.start
        if ref.start < 1 or ref.start > len(lines):
            return "false", f"line {ref.start} does not exist (artifact has {len(lines)} lines)"
        lo = max(0, ref.start - 1 - NEARBY_LINES)
        hi = min(len(lines), end + NEARBY_LINES)
        window = lines[lo:hi]
        where = f"lines {lo + 1}-{hi}"
    words = content_words(wanted)
    if len(words) < MIN_QUOTE_WORDS or len(wanted.replace(" ", "")) < MIN_QUOTE_CHARS:
        # "the" or "no rollback" is found almost anywhere: it proves nothing about a place.
        return "unchecked", (
            f"quote too short to identify a place ({len(words)} content word(s); "
            f"at least {MIN_QUOTE_WORDS} and {MIN_QUOTE_CHARS} characters needed)"
        )
    text = _squash("\n".join(window))
    if wanted not in text:
        return "false", f"quote not found in {where}"
    if ref.start is None and (times := text.count(wanted)) > 1:
        return "unchecked", f"quote occurs {times} times in the artifact; give its line"
    return "true", f"quote found in {where}"


def check_anchor(anchor: str, artifact_name: str | None, text: str, lines: list[str]) -> Verified:
    ref = parse_ref(anchor, artifact_name)
    if ref.start is not None:
        if ref.target != "@artifact":
            return "unchecked"
        return "true" if 1 <= ref.start <= len(lines) else "false"
    symbol = anchor.strip().strip("`")
    if _SYMBOL.match(symbol):
        return "true" if symbol.rstrip("()") in text else "false"
    return "unchecked"


def verify_claims(voices: list[Voice], artifact_name: str | None, artifact: str | None) -> None:
    lines = artifact.splitlines() if artifact is not None else []
    for voice in voices:
        for claim in voice.claims:
            for ev in claim.evidence:
                if artifact is None:
                    ev.verified, ev.detail = "unchecked", "no artifact to check against"
                    ev.verified_by = None
                    continue
                ev.verified, ev.detail = check_quote(
                    parse_ref(ev.ref, artifact_name), ev.quote, lines
                )
                ev.verified_by = VERIFIER if ev.verified != "unchecked" else None
            if claim.anchor and artifact is not None:
                claim.anchor_verified = check_anchor(claim.anchor, artifact_name, artifact, lines)


def _anchor_key(anchor: str, artifact_name: str | None) -> str:
    ref = parse_ref(anchor, artifact_name)
    if ref.start is not None:
        return f"{ref.target}:{ref.start}" + (f"-{ref.end}" if ref.end else "")
    return normalise(anchor)


class _Union:
    def __init__(self, items: list[str]) -> None:
        self.parent = {i: i for i in items}

    def find(self, x: str) -> str:
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def join(self, a: str, b: str) -> None:
        self.parent[self.find(a)] = self.find(b)


def _quotes(claim: Claim) -> set[str]:
    return {_squash(_GUTTER.sub("", e.quote)).lower() for e in claim.evidence if e.quote}


def _same_quote(a: Claim, b: Claim) -> bool:
    """Both claims rest on the same words of the source (one quote inside the other)."""
    return any(qa and qb and (qa in qb or qb in qa) for qa in _quotes(a) for qb in _quotes(b))


def _similar(a: str, b: str) -> bool:
    return fuzz.token_set_ratio(normalise(a), normalise(b)) >= ARBITER_SIMILARITY_FLOOR


def opposed(a: str, b: str) -> bool:
    """The same statement with a negation on one side only ("X is / is not a bottleneck").

    Claims in one cluster often word one problem differently ("no rollback" against
    "stuck if it fails"), so a lone negation word proves nothing; it must be the only
    thing that tells two otherwise near-identical statements apart.
    """
    if negated(a) == negated(b):
        return False
    return fuzz.token_sort_ratio(strip_negations(a), strip_negations(b)) >= OPPOSED_SIMILARITY


def cluster_claims(voices: list[Voice], artifact_name: str | None) -> list[ClaimCluster]:
    claims: list[Claim] = [c for v in voices for c in v.claims]
    family = {v.id: v.model_family for v in voices}
    union = _Union([c.id for c in claims])
    # Which rule joined which claim; resolved per final group once all joins are done.
    joined_by: list[tuple[str, MatchedBy]] = []

    # 1. Anchor match: same anchor from different voices.
    anchors: dict[str, list[Claim]] = {}
    for c in claims:
        if c.anchor and c.anchor.strip():
            anchors.setdefault(_anchor_key(c.anchor, artifact_name), []).append(c)
    anchored: set[str] = set()
    for key, group in anchors.items():
        if len({c.voice_id for c in group}) < 2:
            continue
        for other in group[1:]:
            union.join(other.id, group[0].id)
        joined_by.append((group[0].id, MatchedBy(method="anchor", model=MATCHER, key=key)))
        anchored.update(c.id for c in group)

    # 2. Arbiter cluster for what anchors left alone: a shared evidence ref is mandatory.
    rest = [c for c in claims if c.id not in anchored]
    refs = {c.id: [parse_ref(e.ref, artifact_name) for e in c.evidence] for c in rest}
    for a, b in combinations(rest, 2):
        if a.voice_id == b.voice_id:
            continue
        shared = next((ra for ra in refs[a.id] for rb in refs[b.id] if ra.overlaps(rb)), None)
        if shared is None:
            continue
        if not (_same_quote(a, b) or _similar(a.text, b.text)):
            continue
        union.join(b.id, a.id)
        key = shared.target + (f":{shared.start}" if shared.start is not None else "")
        joined_by.append((a.id, MatchedBy(method="arbiter", model=MATCHER, key=key)))

    groups: dict[str, list[Claim]] = {}
    for c in claims:
        groups.setdefault(union.find(c.id), []).append(c)
    clusters: list[ClaimCluster] = []
    for root, members in groups.items():
        voice_ids = sorted({c.voice_id for c in members}, key=lambda v: int(v[1:]))
        matched = None
        if len(voice_ids) > 1:
            matched = next((m for cid, m in joined_by if union.find(cid) == root), None)
        conflicting = any(
            opposed(a.text, b.text) for a, b in combinations(members, 2) if a.voice_id != b.voice_id
        )
        clusters.append(
            ClaimCluster(
                id=f"k{len(clusters) + 1}",
                claim_ids=[c.id for c in members],
                voice_ids=voice_ids,
                families=sorted({family[v] for v in voice_ids}),
                matched_by=matched,
                conflicting=conflicting,
            )
        )
    return clusters


def near_verbatim_pairs(voices: list[Voice]) -> list[NearVerbatim]:
    claims = [c for v in voices for c in v.claims]
    found = []
    for a, b in combinations(claims, 2):
        if a.voice_id == b.voice_id:
            continue
        na, nb = normalise(a.text), normalise(b.text)
        score = max(fuzz.ratio(na, nb), fuzz.token_sort_ratio(na, nb))
        if score >= NEAR_VERBATIM:
            found.append(
                NearVerbatim(
                    (a.id, b.id),
                    (a.voice_id, b.voice_id),
                    round(score, 1),
                    polarity_differs(a.text, b.text),
                )
            )
    return found


def normalize(voices: list[Voice], artifact_name: str | None, artifact: str | None) -> Normalized:
    """Only voices that passed GATE take part."""
    valid = [v for v in voices if v.status == "complete"]
    verify_claims(valid, artifact_name, artifact)
    return Normalized(
        voices=voices,
        clusters=cluster_claims(valid, artifact_name),
        near_verbatim=near_verbatim_pairs(valid),
    )
