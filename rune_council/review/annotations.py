"""The findings as GitHub workflow-command annotations (``--format github``).

A runner reads every line a step prints that starts with ``::`` as a command: one that
sets outputs, masks a value, stops command processing or adds to the environment. So the
only lines printed here are our own annotations, and every value in them is escaped the way
GitHub's own toolkit escapes one (``%`` ``\\r`` ``\\n`` in a message; also ``:`` and ``,`` in
a property such as ``file``): a claim, a path or a model id can put no line break into the
output, so no text of theirs can start a line, and no ``::`` of theirs is a command.
"""

from __future__ import annotations

from .artifact import visible
from .findings import Finding, Level
from .run import Reviewed

COMMAND: dict[Level, str] = {"error": "error", "warning": "warning", "note": "notice"}
MESSAGE_CAP = 4000


def escape_data(text: str) -> str:
    """A command's message, as ``@actions/core`` escapes one."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A command's property value (``file=``, ``title=``)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _clean(text: str, cap: int = MESSAGE_CAP) -> str:
    # Other control characters are not line breaks to the runner, but no terminal or log
    # viewer should act on them either.
    parts = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    shown = "\n".join(visible(part) for part in parts)
    return shown if len(shown) <= cap else shown[: cap - 3] + "..."


def annotation(
    level: Level,
    message: str,
    *,
    file: str | None = None,
    line: int | None = None,
    title: str | None = None,
) -> str:
    """One workflow command line, every value escaped."""
    props = []
    if file is not None:
        # A newline in a file name is kept (escaped), so the annotation names that file.
        shown = "\n".join(visible(part) for part in file.split("\n"))
        props.append(f"file={escape_property(shown)}")
        if line is not None:
            props.append(f"line={int(line)}")
    if title is not None:
        props.append(f"title={escape_property(_clean(title, 200))}")
    head = f"::{COMMAND[level]}"
    if props:
        head += " " + ",".join(props)
    return f"{head}::{escape_data(_clean(message))}"


def _finding(f: Finding) -> str:
    severity = f" [{f.severity}]" if f.severity else ""
    title = f"rune council {f.rule}{severity}"
    who = "; ".join(f"{m.voice_id} {m.runtime} ({m.family}): {m.text}" for m in f.members)
    labels = ", ".join(f.labels)
    body = f"{f.text}\n{labels}; {len(f.voice_ids)} voice(s), families: "
    body += ", ".join(f.families) or "none confirmed"
    if who:
        body += f"\n{who}"
    loc = f.location
    file = loc.path if loc is not None else None
    line = loc.line if loc is not None else None
    return annotation(f.level, body, file=file, line=line, title=title)


def annotation_lines(reviewed: Reviewed) -> list[str]:
    """A summary notice, then one annotation per finding."""
    res = reviewed.result
    gate = reviewed.gate
    if res is None:
        summary = f"nothing to review: {reviewed.diff.source} changes no file"
    else:
        summary = (
            f"{res.stamp_label() or 'no stamp'}: run {res.id}, {res.voices_valid} of "
            f"{res.voices_requested} voice(s) valid; gate --fail-on {gate.fail_on}: "
            f"{gate.verdict} ({gate.reason})"
        )
    lines = [annotation("note", summary, title="rune council review")]
    lines += [_finding(f) for f in reviewed.findings.findings]
    for r in reviewed.findings.remarks:
        lines.append(annotation("note", f"{r.text} ({r.label})", title="rune council dissent"))
    for note in reviewed.artifact.left_out:
        lines.append(annotation("warning", note, title="rune council review: left out"))
    return lines


__all__ = ["annotation", "annotation_lines", "escape_data", "escape_property"]
