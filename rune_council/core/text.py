"""Small, deterministic text helpers shared by GATE and NORMALIZE."""

from __future__ import annotations

import re

_WORD = re.compile(r"[a-z0-9]+")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
NEGATIONS = frozenset(
    {
        "not",
        "no",
        "never",
        "none",
        "nor",
        "cannot",
        "without",
        "dont",
        "doesnt",
        "isnt",
        "arent",
        "wont",
        "shouldnt",
        "mustnt",
        "cant",
        "neither",
        "lacks",
        "lack",
        "missing",
    }
)
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "if",
        "then",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
        "for",
        "with",
        "from",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "do",
        "does",
        "did",
        "we",
        "you",
        "i",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "there",
        "here",
        "our",
        "your",
        "their",
        "they",
        "he",
        "she",
        "them",
        "us",
        "me",
        "my",
        "should",
        "would",
        "could",
        "can",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "how",
        "why",
        "when",
        "where",
        "whether",
        "than",
        "so",
        "such",
        "any",
        "all",
        "some",
        "into",
        "onto",
        "about",
        "over",
        "under",
        "up",
        "down",
        "out",
        "off",
        "just",
        "only",
        "also",
        "very",
        "more",
        "most",
        "less",
        "least",
    ]
)


def normalise(text: str) -> str:
    """Lower case, apostrophes folded, punctuation to single spaces."""
    text = text.lower().replace("'", "").replace("\u2019", "")
    return " ".join(_WORD.findall(text))


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def content_words(text: str) -> set[str]:
    return {_stem(w) for w in normalise(text).split() if w not in STOPWORDS}


def numbers(text: str) -> set[str]:
    return set(_NUMBER.findall(text))


def negated(text: str) -> bool:
    return any(w in NEGATIONS for w in normalise(text).split())


def polarity_differs(a: str, b: str) -> bool:
    """Two statements about one thing that differ in a number or a negation disagree."""
    return numbers(a) != numbers(b) or negated(a) != negated(b)


def strip_negations(text: str) -> str:
    return " ".join(w for w in normalise(text).split() if w not in NEGATIONS)
