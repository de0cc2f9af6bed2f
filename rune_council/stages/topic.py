"""What a question is about, and whether an echoed question is about the same thing.

A voice restates the question it answered (``question_echo``). Two questions are the same
question when they name the same subject: the same things (files, identifiers, products,
people) and the same matter about them. How a question is put — "is it safe to", "as
written", "should we", "argue the opposite" — is structure every question shares, so it
counts for nothing: an answer to a look-alike question that shares only that scaffolding
is off-topic. An inverted framing (the perturbation slot) keeps the subject and only turns
the evaluation around, so it stays on-topic.
"""

from __future__ import annotations

import re

from ..core.records import record
from ..core.text import NEGATIONS, STOPWORDS

# Words that frame or evaluate a question without saying what it is about. They are
# dropped before comparing, together with the common English stop words.
_STRUCTURE = """
    answer answered ask asked question questions argue argued assume assuming case cases
    consider considered think opinion view position obvious wrong right correct incorrect
    true false good bad better best worse worst wise unwise idea ideas move call choice
    decision decide safe safely safety unsafe sound unsound ok okay fine acceptable
    reasonable viable feasible ready worth worthwhile sensible advisable appropriate fair
    fairly unfair equitable risk risks risky mistake mistaken problem problems issue issues
    concern concerns strong strongest weak weakest reason reasons why whether execute
    executed executing execution run running carry carried exactly written write stands
    stand described describes describe proposed suggested proposal propose plan plans
    approach current new given make makes made doing done go goes going get gets use used
    using need needs needed want wanted way ways possible possibly able enough really
    actually still even yes mixed rather instead than keep keeping against opposite favour
    favor pros cons overall generally there any
"""
STRUCTURE_WORDS = frozenset(_STRUCTURE.split())

# Families of words that name one subject in other words; compared by stem.
_SYNONYMS: tuple[frozenset[str], ...] = (
    frozenset({"shard", "partition", "split"}),
    frozenset({"revers", "revert", "undo", "undone", "rollback", "roll", "back"}),
    frozenset({"loss", "lose", "lost", "losing"}),
    frozenset({"replac", "swap", "switch", "migrat", "mov"}),
    frozenset({"break", "broke", "broken", "stop", "fail"}),
    frozenset({"outag", "down", "unavailabl", "fail"}),
    frozenset({"legacy", "old", "older"}),
    frozenset({"enabl", "turn"}),
    frozenset({"thunder", "herd", "stamped"}),
    frozenset({"databas", "db"}),
    frozenset({"timezon", "time", "zone"}),
    frozenset({"disadvantag", "fair", "unfair"}),
)

# A token that names a thing: has a digit, a dot, an underscore, a slash or inner capitals.
_ENTITY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_./:+#-]*[A-Za-z0-9]")
ENTITY_WEIGHT = 2.0
ON_TOPIC_THRESHOLD = 0.5


def stem(word: str) -> str:
    for suffix in (
        "ations",
        "ation",
        "ing",
        "ies",
        "ed",
        "es",
        "er",
        "ly",
        "able",
        "ible",
        "s",
        "e",
    ):
        # Four letters at least stay: "logs" -> "log", but "bus" and "gas" keep their s.
        if len(word) - len(suffix) >= 3 and word.endswith(suffix) and not word.endswith("ss"):
            base = word[: -len(suffix)]
            # "flipping" -> "flipp" -> "flip", so it meets "flips" -> "flip".
            if suffix in ("ing", "ed") and len(base) > 3 and base[-1] == base[-2]:
                base = base[:-1]
            return base
    return word


def _is_entity(token: str) -> bool:
    inner = token[1:]
    return (
        any(ch.isdigit() for ch in token)
        or any(ch in "._/:#+" for ch in token)
        or ("_" in token)
        or (any(ch.isupper() for ch in inner) and any(ch.islower() for ch in token))
    )


@record(frozen=True)
class Subject:
    """What a question is about: named things and the content words around them."""

    entities: frozenset[str]
    terms: frozenset[str]
    structure: frozenset[str]

    def names(self, entity: str) -> bool:
        """Whether this subject names ``entity``, exactly or by its bare name.

        "the plan" for plan.md, "the client module" for client.py: a restatement often
        drops the extension, and that still names the same file.
        """
        if any(entity_match(entity, x) for x in self.entities):
            return True
        bare = re.split(r"[./:#]", entity, maxsplit=1)[0]
        return len(bare) >= 3 and (bare in self.structure or stem(bare) in self.terms)


def subject_of(text: str) -> Subject:
    entities: set[str] = set()
    terms: set[str] = set()
    structure: set[str] = set()
    for token in _ENTITY.findall(text):
        # A hyphen joins words ("APAC-timezone", "on-call") more often than it names a thing.
        parts = [token] if any(ch in "._/:#+" or ch.isdigit() for ch in token) else token.split("-")
        for raw in parts:
            _classify(raw, entities, terms, structure)
    return Subject(frozenset(entities), frozenset(terms), frozenset(structure))


def _classify(raw: str, entities: set[str], terms: set[str], structure: set[str]) -> None:
    if raw:
        if _is_entity(raw):
            entities.add(raw.lower().rstrip(".:"))
            return
        word = raw.lower()
        if word in STOPWORDS or word in STRUCTURE_WORDS or word in NEGATIONS:
            structure.add(word)
        elif len(word) > 1:
            terms.add(stem(word))


def _synonyms(stem: str) -> frozenset[str]:
    for family in _SYNONYMS:
        if any(stem == w or (len(w) >= 4 and stem.startswith(w)) for w in family):
            return family
    return frozenset({stem})


def term_match(a: str, b: str) -> bool:
    if a == b:
        return True
    shorter, longer = sorted((a, b), key=len)
    if len(shorter) >= 5 and longer.startswith(shorter):
        return True
    return bool(_synonyms(a) & _synonyms(b)) and _synonyms(a) != frozenset({a})


def entity_match(a: str, b: str) -> bool:
    if a == b:
        return True
    shorter, longer = sorted((a, b), key=len)
    return longer.startswith(shorter) and longer[len(shorter)] in ":#/._-"


@record(frozen=True)
class TopicMatch:
    score: float
    shared: tuple[str, ...]
    missing: tuple[str, ...]
    novel: tuple[str, ...]
    shared_structure: tuple[str, ...]
    swapped: bool = False

    def on_topic(self) -> bool:
        return self.score >= ON_TOPIC_THRESHOLD

    def explain(self) -> str:
        if self.swapped:
            return (
                f"names {', '.join(self.novel)} where the question names {', '.join(self.missing)}"
            )
        if not self.shared:
            words = ", ".join(self.shared_structure) or "nothing"
            return f"shares only structure words ({words}), no subject"
        parts = [f"subject match {self.score:.2f} < {ON_TOPIC_THRESHOLD}"]
        if self.missing:
            parts.append("missing " + ", ".join(self.missing))
        if self.novel:
            parts.append("about " + ", ".join(self.novel) + " instead")
        return "; ".join(parts)


def topic_match(echo: str, question: str) -> TopicMatch:
    """Weighted overlap of the two subjects: shared / (shared + missing + novel).

    Named things weigh double. Anything the echo is about that the question is not (a
    different file, product or matter) counts against it as much as what it left out, so
    swapping one subject for another does not pass on the strength of the framing.
    """
    asked, echoed = subject_of(question), subject_of(echo)
    shared: list[str] = []
    missing: list[str] = []
    weight_shared = weight_missing = weight_novel = 0.0
    for e in sorted(asked.entities):
        if echoed.names(e):
            shared.append(e)
            weight_shared += ENTITY_WEIGHT
        else:
            missing.append(e)
            weight_missing += ENTITY_WEIGHT
    novel = [
        e for e in sorted(echoed.entities) if not any(entity_match(e, x) for x in asked.entities)
    ]
    weight_novel += ENTITY_WEIGHT * len(novel)
    for t in sorted(asked.terms):
        if any(term_match(t, x) for x in echoed.terms):
            shared.append(t)
            weight_shared += 1
        else:
            missing.append(t)
            weight_missing += 1
    if missing and novel:
        # The echo names another thing where the question named this one: another file,
        # migration or host is another question, however alike the rest reads.
        return TopicMatch(
            score=0.0,
            shared=tuple(shared),
            missing=tuple(missing),
            novel=tuple(novel),
            shared_structure=(),
            swapped=True,
        )
    novel_terms = [
        t for t in sorted(echoed.terms) if not any(term_match(t, x) for x in asked.terms)
    ]
    novel += novel_terms
    weight_novel += len(novel_terms)
    total = weight_shared + weight_missing + weight_novel
    score = 1.0 if total == 0 else weight_shared / total
    return TopicMatch(
        score=round(score, 4),
        shared=tuple(shared),
        missing=tuple(missing),
        novel=tuple(novel),
        shared_structure=tuple(sorted(asked.structure & echoed.structure - STOPWORDS))
        or tuple(sorted(asked.structure & echoed.structure)),
    )
