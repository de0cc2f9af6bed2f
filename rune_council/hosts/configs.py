"""Adding and removing one entry in a config file the host and the user share.

Only the entry rune installs is touched; every other key the user has stays as it was. JSON
files are rewritten in the layout they already had (their indent, separators, escapes and
final newline, found by writing the parsed file back each candidate way until one gives its
exact text), so a file written the way Claude Code and Gemini CLI write theirs comes back
byte for byte once the entry is removed again; a new file gets two-space indents. TOML files
are edited as text, with rune's table between two marker comments so that it can be found
and removed again without rewriting the user's own lines.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import HostInstallError
from ..core.safejson import UnreadableJSON, loads
from ..core.safetoml import UnreadableTOML, loads_toml
from ..safefile import read_if_present
from .layout import ConfigEntry

# Claude Code's own ~/.claude.json grows with every project it has seen; far below this.
MAX_CONFIG_BYTES = 32 * 1024 * 1024
BEGIN = "# >>> rune-council (written by `rune council install`; removed by --uninstall)"
END = "# <<< rune-council"


@dataclass(frozen=True)
class Found:
    """What a config file holds where rune's entry goes."""

    exists: bool
    """Whether the file exists at all."""
    digest: str | None
    """Digest of the entry there now (None: no such entry)."""
    ours_marked: bool = False
    """The entry sits inside rune's markers (TOML only)."""


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def entry_digest(entry: ConfigEntry) -> str:
    """The digest an installed entry has in its file (compared to spot a user's edit)."""
    if entry.format == "json":
        return digest(_canonical(entry.value))
    return digest(toml_block(entry))


def read_text(path: Path) -> str | None:
    found = read_if_present(path, MAX_CONFIG_BYTES, HostInstallError)
    if found is None:
        return None
    data, cut = found
    if cut:
        raise HostInstallError(f"{path} is larger than {MAX_CONFIG_BYTES} bytes; not editing it")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise HostInstallError(f"{path} is not UTF-8 text; not editing it") from None


def find(entry: ConfigEntry, text: str | None) -> Found:
    if text is None:
        return Found(exists=False, digest=None)
    if entry.format == "json":
        value = _get(_json_doc(entry.path, text), entry.keys)
        return Found(True, None if value is None else digest(_canonical(value)))
    block = _marked_block(text)
    if block is not None:
        return Found(True, digest(block), ours_marked=True)
    doc = _toml_doc(entry.path, text)
    value = _get(doc, entry.keys)
    return Found(True, None if value is None else digest(_canonical(value)))


def added(entry: ConfigEntry, text: str | None) -> tuple[str, list[str]]:
    """The file's new text with the entry in place, and the containers that had to be made
    (kept in the manifest so --uninstall removes them again if they end up empty)."""
    if entry.format == "json":
        doc = _json_doc(entry.path, text) if text is not None else {}
        style = _style_of(text, doc)
        made = _set(doc, entry.keys, entry.value)
        return style.dump(doc), made
    return _toml_added(entry, text or ""), []


def removed(entry: ConfigEntry, text: str, made: list[str]) -> str:
    """The file's text without the entry (and without containers rune made that are empty)."""
    if entry.format == "json":
        doc = _json_doc(entry.path, text)
        style = _style_of(text, doc)
        _delete(doc, entry.keys, made)
        return style.dump(doc)
    return _toml_removed(entry, text)


def is_empty(entry: ConfigEntry, text: str) -> bool:
    """Whether nothing but rune's entry was ever in the file (so removing it can remove the
    file it created)."""
    if entry.format == "json":
        return _json_doc(entry.path, text) == {}
    return not text.strip()


# --------------------------------------------------------------------------- JSON


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class _JsonStyle:
    indent: str | None = "  "
    separators: tuple[str, str] = (",", ": ")
    ascii_only: bool = False
    newline: str = "\n"
    ending: str = "\n"

    def dump(self, doc: dict[str, Any]) -> str:
        out = json.dumps(
            doc, indent=self.indent, separators=self.separators, ensure_ascii=self.ascii_only
        )
        # Strings are escaped, so every line break here is one of the layout's own.
        return (out.replace("\n", self.newline) if self.newline != "\n" else out) + self.ending


def _style_of(text: str | None, doc: dict[str, Any]) -> _JsonStyle:
    """The layout ``text`` (which parses to ``doc``) was written in: the one that writes
    ``doc`` back as exactly ``text`` if there is one, else its indent and ending."""
    if text is None or not text.strip():
        return _JsonStyle()
    ending = text[len(text.rstrip()) :]
    newline = "\r\n" if "\r\n" in text else "\n"
    found = re.search(r"\n([ \t]+)\S", text)
    indent = found.group(1) if found else ("  " if "\n" in text.strip() else None)
    tried = [
        _JsonStyle(step, seps, ascii_only, newline, ending)
        for step, seps in ((indent, (",", ": ")), (None, (",", ":")), (None, (", ", ": ")))
        for ascii_only in (False, True)
    ]
    for style in tried:
        if style.dump(doc) == text:
            return style
    ascii_only = text.isascii() and "\\u" in text
    if indent is not None:
        return _JsonStyle(indent, (",", ": "), ascii_only, newline, ending)
    separators = (", ", ": ") if ", " in text else (",", ":")
    return _JsonStyle(None, separators, ascii_only, newline, ending)


def _json_doc(path: Path, text: str) -> dict[str, Any]:
    if not text.strip():
        return {}
    try:
        doc = loads(text, max_bytes=MAX_CONFIG_BYTES, what=str(path))
    except UnreadableJSON as exc:
        raise HostInstallError(
            f"{exc}; not editing it (fix the file, or add the entry by hand)"
        ) from None
    if not isinstance(doc, dict):
        raise HostInstallError(f"{path} does not hold a JSON object; not editing it")
    return doc


def _get(doc: dict[str, Any], keys: tuple[str, ...]) -> Any:
    node: Any = doc
    for key in keys:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def _set(doc: dict[str, Any], keys: tuple[str, ...], value: Any) -> list[str]:
    made: list[str] = []
    node = doc
    for i, key in enumerate(keys[:-1]):
        if key not in node:
            node[key] = {}
            made.append(".".join(keys[: i + 1]))
        child = node[key]
        if not isinstance(child, dict):
            raise HostInstallError(f"'{'.'.join(keys[: i + 1])}' is not an object; not editing")
        node = child
    node[keys[-1]] = value
    return made


def _delete(doc: dict[str, Any], keys: tuple[str, ...], made: list[str]) -> None:
    trail: list[dict[str, Any]] = [doc]
    for key in keys[:-1]:
        child = trail[-1].get(key)
        if not isinstance(child, dict):
            return
        trail.append(child)
    trail[-1].pop(keys[-1], None)
    # Containers rune created go again once empty; ones the user had stay.
    for depth in range(len(keys) - 1, 0, -1):
        dotted = ".".join(keys[:depth])
        if dotted in made and not trail[depth]:
            trail[depth - 1].pop(keys[depth - 1], None)


# --------------------------------------------------------------------------- TOML


def toml_block(entry: ConfigEntry) -> str:
    """Rune's table, between its markers."""
    lines = [BEGIN, f"[{'.'.join(entry.keys)}]"]
    lines += [f"{key} = {_toml_value(value)}" for key, value in entry.value.items()]
    lines.append(END)
    return "\n".join(lines) + "\n"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        # A JSON string is a valid TOML basic string for everything json.dumps emits.
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def _toml_doc(path: Path, text: str) -> dict[str, Any]:
    try:
        return loads_toml(text, max_bytes=MAX_CONFIG_BYTES, what=str(path))
    except UnreadableTOML as exc:
        raise HostInstallError(
            f"{exc}; not editing it (fix the file, or add the entry by hand)"
        ) from None


def _block_span(text: str) -> tuple[int, int] | None:
    start = text.find(BEGIN)
    if start < 0 or (start > 0 and text[start - 1] != "\n"):
        return None
    end = text.find("\n" + END, start)
    if end < 0:
        return None
    end += 1 + len(END)
    if end < len(text) and text[end] == "\n":
        end += 1
    return start, end


def _marked_block(text: str) -> str | None:
    span = _block_span(text)
    return None if span is None else text[span[0] : span[1]]


def _toml_added(entry: ConfigEntry, text: str) -> str:
    block = toml_block(entry)
    span = _block_span(text)
    if span is not None:
        new = text[: span[0]] + block + text[span[1] :]
    else:
        _toml_doc(entry.path, text)  # refuse to append to a file that is already broken
        if _get(_toml_doc(entry.path, text), entry.keys) is not None:
            raise HostInstallError(
                f"{entry.path} already defines [{entry.dotted}] outside rune's markers; "
                "remove it by hand and install again (--force does not rewrite your tables)"
            )
        sep = "" if not text else ("\n" if text.endswith("\n") else "\n\n")
        if text.endswith("\n") and not text.endswith("\n\n"):
            sep = "\n"
        new = text + sep + block
    doc = _toml_doc(entry.path, new)
    if _get(doc, entry.keys) != entry.value:
        raise HostInstallError(
            f"{entry.path}: a [{entry.dotted}] table appended there would not be read as "
            "such (the file defines it another way); add it by hand"
        )
    return new


def _toml_removed(entry: ConfigEntry, text: str) -> str:
    span = _block_span(text)
    if span is None:
        return text
    before, after = text[: span[0]], text[span[1] :]
    # Drop the blank line the install put in front of the block.
    if before.endswith("\n\n"):
        before = before[:-1]
    return before + after
