"""Step 5, NORMALIZE: check evidence mechanically, then decide which claims are "the same".

Evidence is checked by the council against the artifact (quote present at the cited place),
never by the voice that cited it. Two claims are one claim only when they share a place (an
anchor or an evidence ref) and make the same point there (``point.same_point``); wording
similarity alone never makes a match. Near-verbatim wording is detected separately, as a
warning sign of correlated voices.
"""

from __future__ import annotations

import re
from itertools import combinations
from typing import Literal

from rapidfuzz import fuzz

from ..core.contract import Claim, ClaimCluster, MatchedBy, Verified, Voice
from ..core.made import made
from ..core.records import record
from ..core.text import content_words, negated, normalise, polarity_differs, strip_negations
from .places import Places
from .point import same_point

VERIFIER = "council.mechanical"
MATCHER = "rune-council/normalize-v3 (deterministic: shared place, same point)"
NEAR_VERBATIM = 85.0
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


@record(frozen=True)
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


@record(frozen=True)
class NearVerbatim:
    claim_ids: tuple[str, str]
    voice_ids: tuple[str, str]
    score: float
    conflicting: bool


@record
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


def parse_ref(ref: str, artifact_name: str | None, places: Places | None = None) -> Ref:
    """``places``: an artifact that says each line's place (a diff), where ``path:LINE``
    is the artifact line carrying that place."""
    text = ref.strip()
    m = _LINE_REF.match(text)
    if m:
        start = int(m.group("start"))
        end = int(m.group("end")) if m.group("end") else None
        found = places.find(m.group("file"), start, end) if places is not None else None
        if found is not None:
            return Ref("@artifact", *found)
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


def check_anchor(
    anchor: str,
    artifact_name: str | None,
    text: str,
    lines: list[str],
    places: Places | None = None,
) -> Verified:
    ref = parse_ref(anchor, artifact_name, places)
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
    places = Places.of(lines)
    for voice in voices:
        for claim in voice.claims:
            for ev in claim.evidence:
                if artifact is None:
                    ev.verified, ev.detail = "unchecked", "no artifact to check against"
                    ev.verified_by = None
                    continue
                ev.verified, ev.detail = check_quote(
                    parse_ref(ev.ref, artifact_name, places), ev.quote, lines
                )
                ev.verified_by = VERIFIER if ev.verified != "unchecked" else None
            if claim.anchor and artifact is not None:
                claim.anchor_verified = check_anchor(
                    claim.anchor, artifact_name, artifact, lines, places
                )


def _anchor_key(anchor: str, artifact_name: str | None, places: Places | None) -> str:
    ref = parse_ref(anchor, artifact_name, places)
    if ref.start is not None:
        return f"{ref.target}:{ref.start}" + (f"-{ref.end}" if ref.end else "")
    return normalise(anchor)


def opposed(a: str, b: str) -> bool:
    """The same statement with a negation on one side only ("X is / is not a bottleneck").

    Claims in one cluster often word one problem differently ("no rollback" against
    "stuck if it fails"), so a lone negation word proves nothing; it must be the only
    thing that tells two otherwise near-identical statements apart.
    """
    if negated(a) == negated(b):
        return False
    return fuzz.token_sort_ratio(strip_negations(a), strip_negations(b)) >= OPPOSED_SIMILARITY


@record(frozen=True)
class _Place:
    """Where two claims meet: the shared anchor or evidence ref, and the words found there."""

    method: Literal["anchor", "arbiter"]
    key: str
    text: str


def _claim_refs(claim: Claim, artifact_name: str | None, places: Places | None) -> list[Ref]:
    refs = [parse_ref(e.ref, artifact_name, places) for e in claim.evidence]
    if claim.anchor and claim.anchor.strip():
        refs.append(parse_ref(claim.anchor, artifact_name, places))
    return refs


def _lines_at(ref: Ref, lines: list[str]) -> str:
    if ref.target != "@artifact" or ref.start is None:
        return ""
    return " ".join(lines[max(0, ref.start - 1) : min(len(lines), ref.end or ref.start)])


def _shared_place(
    a: Claim, b: Claim, artifact_name: str | None, lines: list[str], places: Places | None
) -> _Place | None:
    """The place both claims cite, if any: an anchor first, else an evidence ref."""
    where = [q for c in (a, b) for q in [c.anchor or ""] + [e.quote or "" for e in c.evidence]]
    if a.anchor and b.anchor:
        ka = _anchor_key(a.anchor, artifact_name, places)
        kb = _anchor_key(b.anchor, artifact_name, places)
        if ka == kb:
            ref = parse_ref(a.anchor, artifact_name, places)
            return _Place("anchor", ka, " ".join([_lines_at(ref, lines), *where]))
    for ra in _claim_refs(a, artifact_name, places):
        for rb in _claim_refs(b, artifact_name, places):
            if ra.overlaps(rb):
                key = ra.target + (f":{ra.start}" if ra.start is not None else "")
                return _Place("arbiter", key, " ".join([_lines_at(ra, lines), *where]))
    return None


def cluster_claims(
    voices: list[Voice], artifact_name: str | None, artifact: str | None = None
) -> list[ClaimCluster]:
    """Claims of different voices become one claim only at a shared place and on one point.

    A shared anchor or evidence ref is required (wording alone never matches), and on top
    of it the claims must make the same point (``same_point``): unrelated remarks about one
    line stay apart. Groups grow by complete linkage, so every pair of voices in a group
    has made the same point at a shared place; a chain A~B, B~C does not pull A and C
    together.
    """
    claims: list[Claim] = [c for v in voices for c in v.claims]
    family = {v.id: v.model_family for v in voices}
    lines = artifact.splitlines() if artifact is not None else []
    places = Places.of(lines)
    order = {c.id: k for k, c in enumerate(claims)}

    links: dict[frozenset[str], MatchedBy] = {}
    for a, b in combinations(claims, 2):
        if a.voice_id == b.voice_id:
            continue
        place = _shared_place(a, b, artifact_name, lines, places)
        if place is None:
            continue
        point = same_point(a.text, b.text, place.text)
        if point.same:
            links[frozenset((a.id, b.id))] = made(
                MatchedBy, method=place.method, model=MATCHER, key=place.key, point=point.why
            )

    group_of: dict[str, list[Claim]] = {c.id: [c] for c in claims}

    def linked(x: list[Claim], y: list[Claim]) -> bool:
        return all(
            frozenset((p.id, q.id)) in links for p in x for q in y if p.voice_id != q.voice_id
        )

    joined_by: dict[int, MatchedBy] = {}
    for pair in sorted(links, key=lambda p: sorted(order[i] for i in p)):
        a_id, b_id = sorted(pair, key=order.__getitem__)
        ga, gb = group_of[a_id], group_of[b_id]
        if ga is gb or not linked(ga, gb):
            continue
        ga.extend(gb)
        ga.sort(key=lambda c: order[c.id])
        for c in gb:
            group_of[c.id] = ga
        joined_by.setdefault(id(ga), links[pair])

    clusters: list[ClaimCluster] = []
    seen: set[int] = set()
    for c in claims:
        members = group_of[c.id]
        if id(members) in seen:
            continue
        seen.add(id(members))
        voice_ids = sorted({m.voice_id for m in members}, key=_voice_order)
        conflicting = any(
            opposed(a.text, b.text) for a, b in combinations(members, 2) if a.voice_id != b.voice_id
        )
        clusters.append(
            made(
                ClaimCluster,
                id=f"k{len(clusters) + 1}",
                claim_ids=[m.id for m in members],
                voice_ids=voice_ids,
                families=sorted({family[v] for v in voice_ids}),
                matched_by=joined_by.get(id(members)) if len(voice_ids) > 1 else None,
                conflicting=conflicting,
            )
        )
    return clusters


def _voice_order(voice_id: str) -> tuple[int, str]:
    digits = voice_id[1:]
    return (int(digits), voice_id) if digits.isdigit() else (1 << 30, voice_id)


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
        clusters=cluster_claims(valid, artifact_name, artifact),
        near_verbatim=near_verbatim_pairs(valid),
    )
