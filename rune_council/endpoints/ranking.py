"""Which of an endpoint's models may sit on the council, and in which order.

Configured preferences come first (in the order given), exclusions and models that cannot
chat are removed, then the configured ``models`` list in its order, then whatever else the
server listed, in the server's order. Patterns are exact ids or shell globs (``mistralai/*``).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Sequence

from ..core.families import classify_model
from ..runtimes.http import ModelChoice

# Embedding, reranking and safety-classifier models answer with vectors, scores or a
# one-word verdict: never a council voice, whatever the configuration says.
_NOT_CHAT = re.compile(
    r"embed|rerank|retriev|guard|safety|whisper|parakeet|"
    r"(?:^|[/_.:-])(?:bge|e5|gte|tts)(?:[_.:-]|$)|clip(?:[_.:-]|$)",
    re.IGNORECASE,
)


def cannot_chat(model: str) -> bool:
    return bool(_NOT_CHAT.search(model))


def _matches(model: str, pattern: str) -> bool:
    return model == pattern or fnmatch.fnmatchcase(model, pattern)


def _unique(models: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for m in models:
        m = m.strip()
        if m:
            seen.setdefault(m, None)
    return list(seen)


def rank_models(
    available: Sequence[str],
    *,
    prefer: Sequence[str] = (),
    exclude: Sequence[str] = (),
    configured: Sequence[str] = (),
) -> list[ModelChoice]:
    pool = _unique([*available, *configured])
    eligible = [m for m in pool if not cannot_chat(m) and not any(_matches(m, p) for p in exclude)]
    order: list[str] = []
    for pattern in prefer:
        order += [m for m in eligible if _matches(m, pattern) and m not in order]
    order += [m for m in _unique(configured) if m in eligible and m not in order]
    order += [m for m in eligible if m not in order]
    ranked = []
    for m in order:
        reading = classify_model(m)
        ranked.append(ModelChoice(m, reading.family, reading.confidence, reading.why))
    return ranked
