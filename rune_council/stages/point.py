"""Whether two claims about one place of the artifact make the same point.

An anchor or an evidence ref says where a claim points, not what it says: "dropping
orders_old removes the only way back" and "the backfill holds locks so checkout times out"
can both cite step 5 with the same quote. So the words of the place itself (the cited line,
the quote, the anchor) say nothing about the point; what each claim adds beyond them does.
Two claims make the same point when what they add overlaps, or when neither adds anything
(both only state what the line says), or when one only states the line and the other takes
up those same words of the line and builds on them.

Wording similarity is never enough on its own: this test only runs for claims that already
share a place, and it compares what the claims say about that place, not how they say it.
"""

from __future__ import annotations

from ..core.records import record
from .topic import entity_match, stem, subject_of

# Words that carry no point of their own in a claim about a plan or code: quantities,
# generic nouns and verbs that any remark about the place could use.
_GENERIC = """
    every each all one two both many few some none nothing nobody anyone someone thing
    things step steps table tables data system part parts time times place line lines
    now later before after during while once again also thus hence because since until
    says say said defined define mention mentions mentioned given lead leads cause causes
    happen happens become becomes turn turns get gets put puts take takes see seen show
    has have had having exist exists existing contain contains include includes
"""
GENERIC_WORDS = frozenset(stem(w) for w in _GENERIC.split())

# Words that state one point in different words, compared after stemming. Kept small and
# general: a missing family costs a merge (recall), a wrong one would fake a consensus.
_POINT_SYNONYMS: tuple[frozenset[str], ...] = tuple(
    frozenset(stem(w) for w in family.split())
    for family in (
        "revert rollback roll undo restore back",
        "sales revenue money cost income",
        "large big huge",
        "overload hot saturate bottleneck hammer",
        "latency slow hop trip delay",
        "stale outdated",
        "failure fail down outage",
        "miss lose lost loss",
        "duplicate twice double",
        "owner own owns team",
    )
)

# A single shared word is a point in common only when the smaller claim says little else.
MIN_OVERLAP_ONE_WORD = 0.34


@record(frozen=True)
class PointMatch:
    same: bool
    shared: tuple[str, ...]
    why: str


def _same_word(a: str, b: str) -> bool:
    if a == b:
        return True
    shorter, longer = sorted((a, b), key=len)
    if len(shorter) >= 5 and longer.startswith(shorter):
        return True
    return any(a in family and b in family for family in _POINT_SYNONYMS)


def split_point(text: str, place: str) -> tuple[set[str], set[str]]:
    """(own, engaged): a claim's words beyond the place it cites, and its words of the place."""
    claim, where = subject_of(text), subject_of(place)
    own: set[str] = set()
    engaged: set[str] = set()
    for e in claim.entities:
        (engaged if any(entity_match(e, w) for w in where.entities) else own).add(e)
    for t in claim.terms:
        if t in GENERIC_WORDS:
            continue
        (engaged if any(_same_word(t, w) for w in where.terms) else own).add(t)
    return own, engaged


def own_point(text: str, place: str) -> set[str]:
    """The words of a claim that are not already the words of the place it cites."""
    return split_point(text, place)[0]


def _match(a: str, b: str) -> bool:
    if "." in a or "_" in a or any(c.isdigit() for c in a):
        return entity_match(a, b)
    return _same_word(a, b)


def same_point(a: str, b: str, place: str) -> PointMatch:
    """``place``: the text both claims cite (line, quote, anchor), joined."""
    (own_a, at_a), (own_b, at_b) = split_point(a, place), split_point(b, place)
    if not own_a and not own_b:
        return PointMatch(True, (), "both state what the cited place says, and nothing else")
    if not own_a or not own_b:
        # One claim only states what the line says; the other is the same point only if it
        # takes up those very words of the line and builds on them.
        bare, other = (at_a, at_b) if not own_a else (at_b, at_a)
        if bare and all(any(_match(x, y) for y in other) for x in bare):
            words = ", ".join(sorted(bare))
            return PointMatch(True, tuple(sorted(bare)), f"both take up the line's {words}")
        return PointMatch(False, (), "one claim only restates the cited place")
    shared = sorted(x for x in own_a if any(_match(x, y) for y in own_b))
    overlap = len(shared) / min(len(own_a), len(own_b))
    # One word in common counts when it is much of what the smaller claim says, or when
    # both also take up the same words of the line (the same aspect of the place).
    same_aspect = any(_match(x, y) for x in at_a for y in at_b)
    if len(shared) >= 2 or (shared and (overlap >= MIN_OVERLAP_ONE_WORD or same_aspect)):
        return PointMatch(True, tuple(shared), f"both say: {', '.join(shared)}")
    if shared:
        return PointMatch(
            False, tuple(shared), f"little in common beyond the place ({', '.join(shared)})"
        )
    return PointMatch(False, (), "nothing in common beyond the place")
