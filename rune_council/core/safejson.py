"""JSON from sources we do not trust, read with a size and a nesting bound.

``json.loads`` recurses once per level of nesting, so a few hundred kilobytes of ``[`` end in
``RecursionError`` (not a decode error) and take down whoever called it. Everything the
council parses from a voice, an endpoint, a run file or a config goes through ``loads``
here: the size is checked first, then a cheap scan measures the deepest nesting outside
string literals, and only input that passes both reaches the real parser. Whatever cannot
be read becomes one ``UnreadableJSON``, which is also a ``json.JSONDecodeError`` so the
callers' existing handling of broken JSON covers it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .errors import CouncilError

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_DEPTH",
    "TooDeep",
    "UnreadableJSON",
    "loads",
    "nesting_depth",
    "raw_decode",
]

# Deeper than anything the council or a CLI legitimately writes (run files nest about eight
# levels, CLI event streams fewer), and far below the interpreter's recursion limit.
DEFAULT_MAX_DEPTH = 100
# Above the largest run file a five-voice council with deliberation writes, and small
# enough that parsing it cannot exhaust memory.
DEFAULT_MAX_BYTES = 32_000_000

# A string literal (skipped whole, so brackets inside strings do not count) or a bracket.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)
_OPENERS = frozenset("[{")


class UnreadableJSON(CouncilError, json.JSONDecodeError):
    """Input that is not JSON we are willing to parse: malformed, too large or too deep."""

    def __init__(self, reason: str, doc: str = "", pos: int = 0) -> None:
        json.JSONDecodeError.__init__(self, reason, doc, pos)
        # JSONDecodeError's message appends line and column, which mean nothing for a size
        # or depth refusal; keep the reason readable on its own.
        self.reason = reason
        self.args = (reason,)

    def __str__(self) -> str:
        return self.reason


class TooDeep(UnreadableJSON):
    """A value nested past the limit; no value starting before ``resume_at`` is worth trying,
    since each one begins inside the same too-deep run of brackets."""

    def __init__(self, reason: str, resume_at: int) -> None:
        super().__init__(reason)
        self.resume_at = resume_at


def nesting_depth(
    text: str, stop_above: int | None = None, *, start: int = 0, one_value: bool = False
) -> int:
    """Deepest bracket nesting outside string literals in ``text[start:]``.

    Counting stops once it passes ``stop_above``, and with ``one_value`` when the first
    bracket opened at ``start`` is closed again (the extent of one JSON value).
    """
    return _scan(text, stop_above, start, one_value)[0]


def _scan(text: str, stop_above: int | None, start: int, one_value: bool) -> tuple[int, int]:
    """(deepest nesting, offset where counting stopped)."""
    if not one_value:
        openers = text.count("[", start) + text.count("{", start)
        if openers <= (stop_above or 0):
            # Cannot nest deeper than the number of openers: nothing to scan for.
            return openers, len(text)
    depth = deepest = 0
    for match in _TOKEN.finditer(text, start):
        token = match.group()
        if len(token) != 1:
            continue
        if token in _OPENERS:
            depth += 1
            if depth > deepest:
                deepest = depth
                if stop_above is not None and deepest > stop_above:
                    return deepest, match.end()
        elif depth:
            depth -= 1
            if one_value and depth == 0:
                return deepest, match.end()
    return deepest, len(text)


def loads(
    data: str | bytes | bytearray,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
    what: str = "input",
) -> Any:
    """``json.loads`` that refuses input over ``max_bytes`` or nested over ``max_depth``.

    Every refusal, decode error and undecodable byte is an ``UnreadableJSON`` naming
    ``what`` was being read; no other exception escapes.
    """
    if len(data) > max_bytes:
        raise UnreadableJSON(f"{what} is {len(data)} bytes, over the {max_bytes}-byte limit")
    if isinstance(data, bytes | bytearray):
        try:
            text = bytes(data).decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise UnreadableJSON(f"{what} is not UTF-8 text (byte {exc.start})") from None
    else:
        text = data
    depth = nesting_depth(text, stop_above=max_depth)
    if depth > max_depth:
        raise UnreadableJSON(f"{what} nests deeper than {max_depth} levels")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UnreadableJSON(f"{what} is not JSON: {exc}", exc.doc, exc.pos) from None
    except (RecursionError, MemoryError, ValueError) as exc:
        # The scan above makes these unreachable in practice; they stay refusals regardless.
        raise UnreadableJSON(f"{what} could not be parsed: {type(exc).__name__}") from None


_DECODER = json.JSONDecoder()


def raw_decode(text: str, pos: int = 0, *, max_depth: int = DEFAULT_MAX_DEPTH) -> tuple[Any, int]:
    """``JSONDecoder.raw_decode`` of the value at ``pos``, refusing one nested too deep."""
    deepest, stopped = _scan(text, max_depth, pos, True)
    if deepest > max_depth:
        raise TooDeep(f"value at {pos} nests deeper than {max_depth} levels", stopped)
    try:
        return _DECODER.raw_decode(text, pos)
    except json.JSONDecodeError as exc:
        raise UnreadableJSON(f"not JSON: {exc}", exc.doc, exc.pos) from None
    except (RecursionError, MemoryError) as exc:
        raise UnreadableJSON(f"could not be parsed: {type(exc).__name__}", text, pos) from None
