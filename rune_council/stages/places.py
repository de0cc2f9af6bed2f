"""Artifacts whose lines say where they come from: a change under review.

A diff joins many files, and a voice cites a line the way a reviewer does, ``src/app.py:42``
(the line's number in that file), not by the artifact's own line numbers. An artifact that
opens with ``HEADER`` starts each line taken from a file with that place and a bar
(``src/app.py:42 | ``); a ref naming such a place is read as the artifact line that carries
it, so its quote is checked there exactly as a quote cited at ``artifact:LINE`` is. Every
other line (a file's heading, a removed line) starts with a space, so it names no place.

A path in a place never contains ``|`` or a space at its start (the writer escapes them), so
the first bar of a line ends its place whatever the line's own text holds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import field

from ..core.records import record

HEADER = "# A change under review. Each line from a file starts with its place: path:LINE |"
_PLACE = re.compile(r"^(?P<path>[^\s|][^|]*):(?P<line>\d+) +\| ")
# What a voice may put around a path it cites: quotes, backticks, ./ and git's a/ b/.
_WRAPPING = "`'\""
_GIT_SIDES = ("a/", "b/")


def place_label(path: str, line: int, width: int = 0) -> str:
    """The start of an artifact line from ``path`` at ``line``; ``width`` aligns the bar.

    ``path`` must already be in its shown form (no ``|``, no leading space)."""
    return f"{f'{path}:{line}':<{width}} | "


def shown_path(path: str) -> str:
    """``path`` as a place shows it: control characters, backslashes and bars escaped, and
    a leading space too, so no file name can end a place early or forge another one."""
    out = []
    for k, ch in enumerate(path):
        code = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch == "|" or (ch == " " and k == 0):
            out.append(f"\\x{code:02x}")
        elif code < 0x20 or 0x7F <= code < 0xA0 or ch in "\u2028\u2029":
            out.append({"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(ch, f"\\x{code:02x}"))
        elif 0x202A <= code <= 0x202E or 0x2066 <= code <= 0x2069:
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


@record(frozen=True)
class Places:
    """Where each place of a located artifact is: path -> line in the file -> artifact line."""

    at: Mapping[str, Mapping[int, int]] = field(default_factory=dict)

    @classmethod
    def of(cls, lines: Sequence[str]) -> Places | None:
        """The places of an artifact's lines; None for an artifact that does not say them."""
        if not lines or lines[0] != HEADER:
            return None
        at: dict[str, dict[int, int]] = {}
        for k, line in enumerate(lines, start=1):
            m = _PLACE.match(line)
            if m:
                # The first artifact line wins if a place repeats (it cannot in a diff).
                at.setdefault(m.group("path"), {}).setdefault(int(m.group("line")), k)
        return cls(at)

    def path(self, cited: str) -> str | None:
        """The path of this artifact that ``cited`` names: itself, without the quotes, ``./``
        or git's ``a/``/``b/`` around it, or the one path that ends with it."""
        name = cited.strip().strip(_WRAPPING).strip()
        name = name.removeprefix("./")
        if name in self.at:
            return name
        for side in _GIT_SIDES:
            if name.startswith(side) and name[len(side) :] in self.at:
                return name[len(side) :]
        if not name:
            return None
        ending = [p for p in self.at if p.endswith("/" + name)]
        return ending[0] if len(ending) == 1 else None

    def find(self, cited: str, start: int, end: int | None) -> tuple[int, int | None] | None:
        """The artifact lines (start, end) of ``cited``'s lines ``start``..``end``, or None
        when the path is not in the artifact or that line of it is not shown."""
        path = self.path(cited)
        if path is None:
            return None
        lines = self.at[path]
        first = lines.get(start)
        if first is None:
            return None
        if end is None or end <= start:
            return first, None
        last = max((k for line, k in lines.items() if start <= line <= end), default=first)
        return first, (last if last != first else None)


__all__ = ["HEADER", "Places", "place_label", "shown_path"]
