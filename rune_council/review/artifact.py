"""The change as the council reads it: one artifact, every file line led by its place.

Each line taken from a file starts with ``path:LINE |`` (``stages.places``), LINE being its
number in the new version of the file (in the old one for a deleted file); a removed line of
a file that still exists has no place there and starts with a space, like the headings. The
text the voices are shown is the text the council checks their quotes against, so the whole
artifact stays within what a prompt shows (``ARTIFACT_CHAR_CAP``): a file that does not fit
is cut at a hunk boundary or left out, and each one is named in a note.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..core.prompts import ARTIFACT_CHAR_CAP
from ..stages.places import HEADER, place_label, shown_path
from .diff import Diff, DiffFile, DiffLine, Hunk

ARTIFACT_NAME = "change.diff"
# Room kept for the notes naming what was left out, so they are always shown too.
NOTES_ROOM = 4000
MAX_NOTED_FILES = 40

RowKind = Literal["intro", "file", "hunk", "context", "added", "removed", "marker", "note"]


@dataclass(frozen=True)
class Row:
    """What one artifact line is: which file (index into ``files``), and its place there."""

    kind: RowKind
    file: int | None = None
    line: int | None = None


@dataclass(frozen=True)
class ReviewArtifact:
    text: str
    rows: tuple[Row, ...]
    files: tuple[DiffFile, ...]
    left_out: tuple[str, ...]  # one note per file cut or left out, and the diff's own notes
    question: str

    @property
    def name(self) -> str:
        return ARTIFACT_NAME


_STATUS = {
    "added": "added",
    "modified": "modified",
    "deleted": "deleted",
    "renamed": "renamed",
    "copied": "copied",
}


def visible(text: str) -> str:
    """A line's text with every character that could end the line or hide what it says
    shown as an escape: the artifact is split into lines exactly where the diff is."""
    out = []
    for ch in text:
        code = ord(ch)
        if ch == "\t":
            out.append(ch)
        elif code < 0x20 or 0x7F <= code < 0xA0 or ch in "\u2028\u2029":
            out.append(f"\\x{code:02x}")
        elif 0x202A <= code <= 0x202E or 0x2066 <= code <= 0x2069 or ch == "\ufeff":
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


def _describe(f: DiffFile) -> str:
    what = _STATUS[f.status]
    if f.status in ("renamed", "copied") and f.old_path is not None:
        similar = f", {f.similarity}% similar" if f.similarity is not None else ""
        what += f" from {shown_path(f.old_path)}{similar}"
    if f.mode_change:
        what += f", mode {f.mode_change}"
    if f.binary:
        what += ", binary: contents not shown"
    added, removed = f.counts()
    if added or removed:
        what += f", +{added} -{removed}"
    return what


def _numbered_path(f: DiffFile) -> str:
    """Whose numbers a file's lines carry: the new file's, the old one's for a deletion."""
    return shown_path(f.path)


def _hunk_rows(f: DiffFile, index: int, hunk: Hunk, width: int) -> list[tuple[str, Row]]:
    path = _numbered_path(f)
    header = visible(hunk.header)
    out: list[tuple[str, Row]] = [(f"  {header}", Row("hunk", index))]
    pad = " " * max(1, width) + " | "
    for ln in hunk.lines:
        out.append(_line_row(f, index, path, ln, width, pad))
    return out


def _line_row(
    f: DiffFile, index: int, path: str, ln: DiffLine, width: int, pad: str
) -> tuple[str, Row]:
    text = visible(ln.text)
    if ln.kind == "\\":
        return f"  \\ {text}", Row("marker", index)
    if ln.kind == "-" and f.status != "deleted":
        return f"{pad}-{text}", Row("removed", index, ln.old)
    number = ln.old if f.status == "deleted" else ln.new
    assert number is not None
    kind: RowKind = {" ": "context", "+": "added", "-": "removed"}[ln.kind]  # type: ignore[assignment]
    return f"{place_label(path, number, width)}{ln.kind}{text}", Row(kind, index, number)


def _width(f: DiffFile) -> int:
    path = _numbered_path(f)
    numbers = [
        (ln.old if f.status == "deleted" else ln.new) or 0 for h in f.hunks for ln in h.lines
    ]
    return len(f"{path}:{max(numbers, default=0)}")


def _size(rows: list[tuple[str, Row]]) -> int:
    return sum(len(text) + 1 for text, _ in rows)


def _section(f: DiffFile, index: int) -> list[tuple[str, Row]]:
    rows: list[tuple[str, Row]] = [
        (f"  === {shown_path(f.path)} ({_describe(f)}) ===", Row("file", index))
    ]
    width = _width(f)
    for hunk in f.hunks:
        rows += _hunk_rows(f, index, hunk, width)
    return rows


def _fit(section: list[tuple[str, Row]], allowance: int) -> list[tuple[str, Row]]:
    """The rows of a file's section from its start that fit in ``allowance`` characters."""
    kept: list[tuple[str, Row]] = []
    used = 0
    for text, row in section:
        used += len(text) + 1
        if used > allowance:
            break
        kept.append((text, row))
    return kept


def fair_shares(sizes: list[int], budget: int) -> list[int]:
    """How much of ``budget`` each file gets: every file that fits in an equal share of what
    is left gets all it needs, and the larger ones split the rest equally, so no file, however
    large or early, crowds the others out."""
    shares = [0] * len(sizes)
    left, count = max(0, budget), len(sizes)
    for k in sorted(range(len(sizes)), key=sizes.__getitem__):
        share = left // count if count else 0
        shares[k] = min(sizes[k], share)
        left -= shares[k]
        count -= 1
    return shares


def _bounded(note: str, limit: int = 300) -> str:
    return note if len(note) <= limit else note[: limit - 3] + "..."


def _question(diff: Diff, shown: list[tuple[str, Row]]) -> str:
    added, removed = diff.counts()
    files = len(diff.files) + len(diff.unread)
    example = next(
        (text.split(" | ", 1)[0].rstrip() for text, row in shown if row.kind == "added"),
        next(
            (text.split(" | ", 1)[0].rstrip() for text, row in shown if row.kind == "context"),
            "src/app.py:12",
        ),
    )
    source = diff.source if len(diff.source) <= 300 else diff.source[:297] + "..."
    return (
        f"Review this change ({source}: {files} file(s), +{added} -{removed} lines). Does it "
        "introduce a defect (a bug, a regression or unsafe behaviour) that should be fixed "
        "before it is merged? Give each finding's anchor and evidence ref as the place its "
        f"line starts with (for example {example}), and quote that line's own words."
    )


def build_artifact(diff: Diff, cap: int = ARTIFACT_CHAR_CAP) -> ReviewArtifact:
    """The change as one artifact within ``cap`` characters, what was left out named."""
    rows: list[tuple[str, Row]] = [
        (HEADER, Row("intro")),
        (
            "  Lines start with their place: path:LINE is the line's number in the new "
            "version of the file (in the old one for a deleted file); + marks an added line, "
            "- a removed one, which has no place in the new version.",
            Row("intro"),
        ),
    ]
    left_out: list[str] = list(diff.notes)
    sections = [_section(f, k) for k, f in enumerate(diff.files)]
    allowances = fair_shares([_size(rows_) for rows_ in sections], cap - NOTES_ROOM - _size(rows))
    for f, section, allowance in zip(diff.files, sections, allowances, strict=True):
        kept = _fit(section, allowance)
        if len(kept) < len(section):
            if kept and kept[-1][1].kind == "hunk":
                kept.pop()  # a hunk's heading without a line of it says nothing
            changed = [r for _, r in section[len(kept) :] if r.kind in ("added", "removed")]
            if len(kept) <= 1:
                left_out.append(
                    f"{shown_path(f.path)}: left out whole ({len(changed)} changed lines, "
                    "over the size cap)"
                )
            else:
                last = next((r.line for _, r in reversed(kept) if r.line is not None), None)
                upto = f" after line {last}" if last is not None else ""
                left_out.append(
                    f"{shown_path(f.path)}: cut{upto}; {len(changed)} changed lines left out "
                    "(over the size cap)"
                )
        rows += kept
    for name in diff.unread:
        left_out.append(f"{shown_path(name)}: not read (the diff is over its byte cap)")
    if left_out:
        shown = left_out[:MAX_NOTED_FILES]
        unshown = len(left_out) - len(shown)
        rows.append(("  Left out of this artifact (the council has not seen it):", Row("note")))
        rows += [(f"  - {_bounded(note)}", Row("note")) for note in shown]
        if unshown:
            rows.append((f"  - and {unshown} more", Row("note")))
    question = _question(diff, rows)
    text = "\n".join(t for t, _ in rows) + "\n"
    while len(text) > cap and rows[-1][1].kind == "note":
        rows.pop()  # only very long file names get here: the notes give way, never a file
        text = "\n".join(t for t, _ in rows) + "\n"
    return ReviewArtifact(
        text=text,
        rows=tuple(row for _, row in rows),
        files=tuple(diff.files),
        left_out=tuple(left_out),
        question=question,
    )


__all__ = ["ARTIFACT_NAME", "ReviewArtifact", "Row", "build_artifact", "visible"]
