"""Secrets found and masked in whatever form a voice or an endpoint hands them back.

A model that was shown a key, or an endpoint that echoes the ``Authorization`` header, does
not have to print the key as it is: it can JSON-escape it (``\\u0073\\u006b...``, decoded by
the answer parser into the key itself), percent- or entity-encode it, print it in base64 or
hex, wrap it across lines, or cut it in pieces (``"sk-ant-" + "api03..."``, half in one
claim and half in the next). Plain ``str.replace`` catches none of that.

So each text is searched in more than one view, each mapped back to the text's own
characters, and every match is cut out of the text itself:

- the text as it is, and decoded: JSON and Python escapes, percent-encoding, HTML character
  references, Unicode compatibility forms (fullwidth letters) and invisible format
  characters, repeatedly, for text escaped more than once;
- in each of those, the secret's base64 (standard and URL-safe alphabets, each of the three
  byte offsets a secret can start at inside a longer blob, padding or not) and hex forms;
- joined: the same view with whitespace, quotes and concatenation operators taken out,
  for a key wrapped or concatenated from string literals;
- fragments: for a value shaped like a key (a long token of letters and digits), any
  ``FRAGMENT`` characters of it beyond its public prefix (``sk-ant-api03-``), as they are,
  escaped, or inside decoded base64 and hex. A key cut into pieces is caught as long as
  one piece is that long; pieces shorter than that sitting in neighbouring strings are
  caught by ``Redactor.strings``, which checks the joint of each string and the next.

What is not followed: base64 of base64, pieces shorter than ``FRAGMENT`` placed apart from
each other, and anything a reader needs to compute (reverse, rot13, arithmetic) to see.
"""

from __future__ import annotations

import binascii
import bisect
import enum
import functools
import itertools
import re
import types
import typing
import unicodedata
from base64 import b64encode
from collections.abc import Iterable, Iterator, Sequence
from typing import Any
from urllib.parse import unquote

from pydantic import BaseModel

from .records import record

__all__ = [
    "FRAGMENT",
    "MIN_SECRET_LEN",
    "REDACTED",
    "Redactor",
    "is_key_like",
    "redact_model",
    "redactor_for",
]

REDACTED = "[redacted]"
# Shorter values (a "false", a port) are not secrets whatever their variable is called.
MIN_SECRET_LEN = 6
# Eight characters of a random key are 40+ bits: a text that holds them by chance does not
# occur, and a voice that prints them has printed a fifth of a typical key.
FRAGMENT = 8
# Characters of text a Redactor remembers the verdict on, at most.
_MEMO_CHARS = 8_000_000
# How many times text is unescaped in turn (a JSON string inside a JSON string is two).
_DECODE_DEPTH = 3

# A token of key characters with a letter and a digit, not a path or a URL: credentials
# files and config roots are named like secrets too, and their pieces are ordinary words.
_KEY_SHAPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_\-.+/=~]{15,}")
# ``sk-ant-api03-``, ``sk-proj-``, ``ghp_``, ``github_pat_``: shared by every key of a
# vendor, so a piece of it says nothing about this key.
_PUBLIC_PREFIX = re.compile(r"(?:[A-Za-z]{1,10}[0-9]{0,3}[-_])+")
# What sits between the pieces of a concatenated or wrapped key, and carries no meaning
# of its own; a character the secret itself uses is never treated as one.
_JOINERS = frozenset(" \t\r\n\f\v\"'`+,.|&\\*") | frozenset("\u00ad\u200b\u200c\u200d\u2060\ufeff")

_ESCAPE = re.compile(
    r"""
      \\u[0-9a-fA-F]{4}
    | \\U[0-9a-fA-F]{8}
    | \\x[0-9a-fA-F]{2}
    | \\[nrtbf"'/\\]
    | %[0-7][0-9a-fA-F]
    | (?:%[89a-fA-F][0-9a-fA-F])+
    | &\#[0-9]{1,7};
    | &\#[xX][0-9a-fA-F]{1,6};
    | &(?:amp|lt|gt|quot|apos|sol|colon|period|plus|hyphen|dash|lowbar|equals|num);
    | [^\x00-\x7f]+
    """,
    re.VERBOSE,
)
# Characters that show as nothing, so a key with them inside reads as the key.
_INVISIBLE = re.compile("[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")
_SIMPLE_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f"}
_ENTITIES = {
    "amp": "&",
    "lt": "<",
    "gt": ">",
    "quot": '"',
    "apos": "'",
    "sol": "/",
    "colon": ":",
    "period": ".",
    "plus": "+",
    "hyphen": "-",
    "dash": "-",
    "lowbar": "_",
    "equals": "=",
    "num": "#",
}
# Runs that may be base64 (either alphabet) or hex; shorter ones cannot hold a fragment.
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]{12,}")
_HEX_RUN = re.compile(r"[0-9a-fA-F]{16,}")
_PRINTABLE_RUN = re.compile(rf"[\x21-\x7e]{{{FRAGMENT},}}")
_TO_STANDARD = str.maketrans("-_", "+/")
_TO_URLSAFE = str.maketrans("+/", "-_")
_HEX_LOWER = str.maketrans("ABCDEF", "abcdef")
_BASE64_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_=")


def is_key_like(value: str) -> bool:
    """A value whose pieces are as secret as the whole: a long token with letters and
    digits, not a path, a URL or a phrase."""
    return (
        _KEY_SHAPE.fullmatch(value) is not None
        and "//" not in value
        and any(c.isdigit() for c in value)
        and any(c.isalpha() for c in value)
    )


# --------------------------------------------------------------------------- views


class _View:
    """A text derived from another, and the way back to the characters it came from."""

    text: str

    def source(self, start: int, end: int) -> tuple[int, int]:
        raise NotImplementedError


class _Root(_View):
    def __init__(self, text: str) -> None:
        self.text = text

    def source(self, start: int, end: int) -> tuple[int, int]:
        return start, end


class _Pieces(_View):
    """Built from pieces of its parent: each piece is a run copied as it is, or one
    decoded token standing for a span of the parent (and mapping back to all of it)."""

    def __init__(self, parent: _View) -> None:
        self.parent = parent
        self._chunks: list[str] = []
        self._starts: list[int] = []  # where each piece starts in this view
        self._pieces: list[tuple[int, int, bool]] = []  # (parent start, parent end, copied)
        self._length = 0

    def copy(self, start: int, end: int) -> None:
        if end > start:
            self._add(self.parent.text[start:end], start, end, True)

    def token(self, decoded: str, start: int, end: int) -> None:
        self._add(decoded, start, end, False)

    def _add(self, text: str, start: int, end: int, copied: bool) -> None:
        if not text:
            return  # a dropped character lies inside any span that covers its neighbours
        self._chunks.append(text)
        self._starts.append(self._length)
        self._pieces.append((start, end, copied))
        self._length += len(text)

    def done(self) -> _Pieces:
        self.text = "".join(self._chunks)
        return self

    def source(self, start: int, end: int) -> tuple[int, int]:
        k = bisect.bisect_right(self._starts, start) - 1
        p_start, _p_end, copied = self._pieces[k]
        first = p_start + (start - self._starts[k]) if copied else p_start
        k = bisect.bisect_right(self._starts, end - 1) - 1
        p_start, p_end, copied = self._pieces[k]
        stop = p_start + (end - self._starts[k]) if copied else p_end
        return self.parent.source(first, stop)


def _decoded(view: _View) -> _View | None:
    """``view`` with one layer of escapes decoded, or None when it has none."""
    text = view.text
    if text.isascii() and "\\" not in text and "%" not in text and "&" not in text:
        return None
    out = _Pieces(view)
    done = 0
    changed = False
    for match in _ESCAPE.finditer(text):
        token = match.group()
        if not token.isascii():
            # Most non-ASCII text (accents, CJK) is already in its compatibility form.
            if unicodedata.is_normalized("NFKC", token) and not _INVISIBLE.search(token):
                continue
            tokens = [(match.start() + i, c) for i, c in enumerate(token)]
        else:
            tokens = [(match.start(), token)]
        for at, piece in tokens:
            decoded = _decode_token(piece)
            if decoded == piece:
                continue
            out.copy(done, at)
            out.token(decoded, at, at + len(piece))
            done = at + len(piece)
            changed = True
    if not changed:
        return None
    out.copy(done, len(text))
    return out.done()


def _decode_token(token: str) -> str:
    if not token.isascii():  # one character: its compatibility form, or nothing
        if _INVISIBLE.match(token) or unicodedata.category(token) == "Cf":
            return ""
        return unicodedata.normalize("NFKC", token)
    head = token[:2]
    if head in ("\\u", "\\U", "\\x"):
        return _char(int(token[2:], 16), token)
    if token[0] == "\\":
        return _SIMPLE_ESCAPES.get(token[1], token[1])
    if token[0] == "%":
        return unquote(token, errors="replace")
    if token.startswith(("&#x", "&#X")):
        return _char(int(token[3:-1], 16), token)
    if token.startswith("&#"):
        return _char(int(token[2:-1]), token)
    return _ENTITIES.get(token[1:-1], token)


def _char(code: int, token: str) -> str:
    try:
        return chr(code)
    except (ValueError, OverflowError):
        return token


def _joined(view: _View, joiners: re.Pattern[str]) -> _View:
    out = _Pieces(view)
    done = 0
    for match in joiners.finditer(view.text):
        out.copy(done, match.start())
        done = match.end()
    out.copy(done, len(view.text))
    return out.done()


# --------------------------------------------------------------------------- needles


@record(frozen=True)
class _Needle:
    value: str
    hex: str  # lower case; looked for in a lower-cased view of the text
    base64: tuple[str, ...]  # the cores, both alphabets, three offsets
    fragments: frozenset[str]  # FRAGMENT-long pieces beyond the public prefix
    byte_fragments: frozenset[str]  # the same as UTF-8 bytes read one char per byte
    drop_joiners: dict[int, None]  # str.translate table that deletes this secret's joiners
    joiners: re.Pattern[str]


def _needle(value: str) -> _Needle:
    raw = value.encode("utf-8")
    cores: set[str] = set()
    for offset in range(3):
        whole = b64encode(b"\0" * offset + raw).decode("ascii")
        # Only the characters made of the secret's bits alone are the same whatever
        # surrounds it: skip those that also carry the bytes before it or after it.
        first = -(-8 * offset // 6)
        last = 8 * (offset + len(raw)) // 6
        core = whole[first:last]
        if len(core) >= MIN_SECRET_LEN:
            cores.add(core)
            cores.add(core.translate(_TO_URLSAFE))
    fragments: set[str] = set()
    if is_key_like(value):
        prefix = _PUBLIC_PREFIX.match(value)
        public = prefix.end() if prefix else 0
        for i in range(len(value) - FRAGMENT + 1):
            piece = value[i : i + FRAGMENT]
            if i + FRAGMENT > public and _random_looking(piece):
                fragments.add(piece)
    joiners = "".join(sorted(_JOINERS - set(value)))
    return _Needle(
        value=value,
        hex=raw.hex(),
        base64=tuple(sorted(cores - {value})),
        fragments=frozenset(fragments),
        byte_fragments=frozenset(
            f.encode("utf-8").decode("latin-1") for f in fragments if f.isascii()
        ),
        drop_joiners=dict.fromkeys(map(ord, joiners)),
        joiners=re.compile("[" + re.escape(joiners) + "]+"),
    )


def _random_looking(piece: str) -> bool:
    """Whether a piece of a key could stand for it: mixed lower case, upper case and
    digits, as random characters are; a run of digits or a word ("12345678", "planted")
    turns up in ordinary text and proves nothing."""
    classes = (str.islower, str.isupper, str.isdigit)
    mixed = sum(any(test(c) for c in piece) for test in classes)
    return mixed >= 2 and len(set(piece)) >= 5


def _occurrences(text: str, needle: str) -> Iterable[tuple[int, int]]:
    at = text.find(needle)
    while at >= 0:
        yield at, at + len(needle)
        at = text.find(needle, at + 1)


# --------------------------------------------------------------------------- redactor


class Redactor:
    """Masks a fixed set of secrets in every form this module knows; reuse one per set."""

    def __init__(self, secrets: Iterable[str]) -> None:
        values = {s for s in secrets if s and len(s) >= MIN_SECRET_LEN}
        self.secrets = tuple(sorted(values, key=lambda s: (-len(s), s)))
        self._needles = tuple(_needle(s) for s in self.secrets)
        self._keys = tuple(n for n in self._needles if n.byte_fragments)
        # What ``strings`` has seen: a run's result is rewritten at every transition and
        # almost all of its strings are the same as the last time.
        self._memo: dict[str, str] = {}
        self._memo_chars = 0

    def __bool__(self) -> bool:
        return bool(self._needles)

    def text(self, text: str, *, remember: bool = False) -> str:
        """``text`` with every secret it holds, in any form, replaced by ``[redacted]``."""
        if not self._needles or len(text) < MIN_SECRET_LEN:
            return text
        known = self._memo.get(text)
        if known is not None:
            return known
        out = _cut(text, self.spans(text))
        if remember:
            if self._memo_chars + len(text) > _MEMO_CHARS:
                self._memo.clear()
                self._memo_chars = 0
            self._memo[text] = out
            self._memo_chars += len(text)
        return out

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where secrets sit in ``text``, as (start, end) ranges of its own characters."""
        found: list[tuple[int, int]] = []
        view: _View | None = _Root(text)
        depth = 0
        while view is not None and depth <= _DECODE_DEPTH:
            for start, end in self._in_view(view.text):
                found.append(view.source(start, end))
            view = _decoded(view) if depth < _DECODE_DEPTH else None
            depth += 1
        return found

    def strings(self, texts: Sequence[str]) -> list[str]:
        """Each text redacted, and a key whose pieces run from one text into the next
        (two fields of one claim, a list of short words) cut out of each of them."""
        if not self._needles or len(texts) < 2:
            return [self.text(t, remember=True) for t in texts]
        joint = "".join(texts)
        cuts: list[tuple[int, int]] = []
        for needle in self._needles:
            cuts += _occurrences(joint, needle.value)
            cuts += self._joined_matches(_Root(joint), needle)
        per: dict[int, list[tuple[int, int]]] = {}
        if cuts:
            bounds = list(itertools.accumulate((len(t) for t in texts[:-1]), initial=0))
            for start, end in cuts:
                k = bisect.bisect_right(bounds, start) - 1
                while k < len(texts) and bounds[k] < end:
                    lo = max(start, bounds[k]) - bounds[k]
                    hi = min(end - bounds[k], len(texts[k]))
                    if hi > lo:
                        per.setdefault(k, []).append((lo, hi))
                    k += 1
        return [
            _cut(t, self.spans(t) + per[k]) if k in per else self.text(t, remember=True)
            for k, t in enumerate(texts)
        ]

    # -- one view

    def _in_view(self, text: str) -> list[tuple[int, int]]:
        found: list[tuple[int, int]] = []
        hex_view: str | None = None
        for needle in self._needles:
            found += _occurrences(text, needle.value)
            if hex_view is None:
                hex_view = text.translate(_HEX_LOWER)
            found += _occurrences(hex_view, needle.hex)
            for core in needle.base64:
                found += _base64_widened(text, _occurrences(text, core))
            for piece in needle.fragments:
                found += _occurrences(text, piece)
            found += self._joined_matches(_Root(text), needle)
        if self._keys:
            found += self._in_runs(text)
        return found

    @staticmethod
    def _joined_matches(view: _View, needle: _Needle) -> list[tuple[int, int]]:
        squeezed = view.text.translate(needle.drop_joiners)
        if len(squeezed) == len(view.text) or needle.value not in squeezed:
            return []
        joined = _joined(view, needle.joiners)
        return [joined.source(a, b) for a, b in _occurrences(joined.text, needle.value)]

    def _in_runs(self, text: str) -> list[tuple[int, int]]:
        """Pieces of a key inside base64 or hex runs, decoded at every alignment."""
        found: list[tuple[int, int]] = []
        for match in _BASE64_RUN.finditer(text):
            run = match.group()
            if run.isalpha() or run.isdigit():
                continue  # a word or a number, not an encoding of one
            standard = run.translate(_TO_STANDARD)
            for align in range(4):
                chunk = standard[align:]
                # A last partial quantum still holds whole bytes (unpadded base64).
                rest = len(chunk) % 4
                chunk = chunk[:-1] if rest == 1 else chunk + "=" * ((4 - rest) % 4)
                if len(chunk) < 12:
                    break
                data = binascii.a2b_base64(chunk)
                base = match.start() + align
                for lo, hi in self._pieces_in(data):
                    end = min(base + -(-hi // 3) * 4, match.end())
                    found.append((base + lo // 3 * 4, _past_padding(text, end)))
        for match in _HEX_RUN.finditer(text):
            run = match.group()
            for align in range(2):
                usable = (len(run) - align) // 2 * 2
                data = bytes.fromhex(run[align : align + usable])
                for lo, hi in self._pieces_in(data):
                    start = match.start() + align
                    found.append((start + 2 * lo, start + 2 * hi))
        return found

    def _pieces_in(self, data: bytes) -> list[tuple[int, int]]:
        text = data.decode("latin-1")
        found: list[tuple[int, int]] = []
        for printable in _PRINTABLE_RUN.finditer(text):
            run = printable.group()
            for i in range(len(run) - FRAGMENT + 1):
                piece = run[i : i + FRAGMENT]
                if any(piece in n.byte_fragments for n in self._keys):
                    start = printable.start() + i
                    found.append((start, start + FRAGMENT))
        return found


def _base64_widened(text: str, spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """A base64 core, with the character on each side that still carries part of the
    secret's bits (and any padding after it)."""
    out = []
    for start, end in spans:
        if start > 0 and text[start - 1] in _BASE64_CHARS and text[start - 1] != "=":
            start -= 1
        if end < len(text) and text[end] in _BASE64_CHARS:
            end += 1
        out.append((start, _past_padding(text, end)))
    return out


def _past_padding(text: str, end: int) -> int:
    while end < len(text) and text[end] == "=":
        end += 1
    return end


def _cut(text: str, spans: Iterable[tuple[int, int]]) -> str:
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    if not merged:
        return text
    out: list[str] = []
    done = 0
    for start, end in merged:
        out.append(text[done:start])
        out.append(REDACTED)
        done = end
    out.append(text[done:])
    return "".join(out)


@functools.lru_cache(maxsize=64)
def _cached(secrets: tuple[str, ...]) -> Redactor:
    return Redactor(secrets)


def redactor_for(secrets: Iterable[str]) -> Redactor:
    """The one ``Redactor`` for this set of secrets (their forms are derived once)."""
    return _cached(tuple(sorted({s for s in secrets if s and len(s) >= MIN_SECRET_LEN})))


# --------------------------------------------------------------------------- models


def redact_model(model: BaseModel, redactor: Redactor) -> bool:
    """Every string of ``model``, at any depth, redacted in place (fields, list items,
    mapping keys and values), and the joints between neighbouring strings; True when
    anything changed. Fields that only admit fixed words (a status, a role) are left as
    they are: no secret can be one of them, and a masked one would not load again."""
    if not redactor:
        return False
    texts = list(_strings(model))
    fresh = redactor.strings(texts)
    if all(a is b or a == b for a, b in zip(texts, fresh, strict=True)):
        return False
    _replace(model, iter(fresh))
    return True


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, BaseModel):
        for name in _text_fields(type(value)):
            yield from _strings(getattr(value, name))
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)


def _replace(value: Any, fresh: Iterator[str]) -> Any:
    """``value`` with its strings taken in turn from ``fresh`` (the order of _strings);
    models, lists and dicts are changed in place, so whoever holds them sees the change."""
    if isinstance(value, str):
        new = next(fresh)
        return value if new == value else new
    if isinstance(value, BaseModel):
        for name in _text_fields(type(value)):
            old = getattr(value, name)
            new = _replace(old, fresh)
            if new is not old:
                setattr(value, name, new)
        return value
    if isinstance(value, list):
        for i, item in enumerate(value):
            new = _replace(item, fresh)
            if new is not item:
                value[i] = new
        return value
    if isinstance(value, tuple):
        items = tuple(_replace(item, fresh) for item in value)
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if isinstance(value, dict):
        pairs = [(_replace(k, fresh), _replace(v, fresh)) for k, v in value.items()]
        if any(
            k is not k0 or v is not v0
            for (k, v), (k0, v0) in zip(pairs, value.items(), strict=True)
        ):
            value.clear()
            value.update(pairs)
        return value
    return value


@functools.cache
def _text_fields(model: type[BaseModel]) -> tuple[str, ...]:
    return tuple(n for n, f in model.model_fields.items() if not _fixed_words(f.annotation))


def _fixed_words(annotation: Any) -> bool:
    """True for a type that admits no free text: literals, enums, numbers, flags, and
    optional or list forms of them."""
    if annotation is None or annotation is type(None):
        return True
    if isinstance(annotation, type):
        return issubclass(annotation, enum.Enum | bool | int | float)
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return True
    if origin is typing.Annotated:
        return _fixed_words(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType, list, tuple, set, frozenset):
        args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        return bool(args) and all(_fixed_words(a) for a in args)
    return False
