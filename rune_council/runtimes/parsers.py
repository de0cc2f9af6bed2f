"""What every CLI output parser shares: the result type and tolerant JSON reading.

A parser takes the decoded stdout and stderr of a finished run and returns ``Parsed``: the
answer text, or the reason there is none. Several CLIs exit 0 after an API error and only
say so in their output (qwen, aider, cline's ``finishReason``), so a parser must look for the
failure before it takes any text as an answer. Each CLI's own parser lives in its module
under ``runtimes/clis/``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..core import safejson
from ..core.safetext import one_line

__all__ = [
    "Parsed",
    "error_message",
    "json_objects",
    "nonblank",
    "one_line",
    "parse_plain_text",
    "tail",
]


@dataclass(frozen=True)
class Parsed:
    """What an adapter read out of a finished CLI run."""

    text: str | None
    error: str | None = None  # the CLI reported a failure even if it exited 0


def tail(text: str, limit: int = 300) -> str:
    text = text.strip()
    return text if len(text) <= limit else "…" + text[-limit:]


def error_message(obj: dict[str, object]) -> str | None:
    """The message of a JSON error a CLI or server printed: ``{"error": {"message": ...}}``,
    ``{"error": "..."}`` or ``{"message": ...}``, as one line; None if it holds none."""
    err = obj.get("error", obj)
    if isinstance(err, dict):
        inner = err.get("message")
        if isinstance(inner, str) and inner.strip():
            return one_line(inner)
        nested = err.get("error")
        if isinstance(nested, dict):
            return error_message({"error": nested})
        return None
    return one_line(err) if isinstance(err, str) and err.strip() else None


def nonblank(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def json_objects(stdout: str) -> list[dict[str, object]]:
    """Whole-output JSON first, else one object per line (JSONL); junk lines are skipped."""
    stripped = stdout.strip()
    try:
        whole = safejson.loads(stripped, what="CLI output")
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict):
        return [whole]
    if isinstance(whole, list):
        return [x for x in whole if isinstance(x, dict)]
    found = []
    for line in stripped.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            value = safejson.loads(line, what="CLI output line")
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


def parse_plain_text(stdout: str, stderr: str) -> Parsed:
    """The whole of stdout is the answer (agy prints plain text in print mode)."""
    if stdout.strip():
        return Parsed(stdout.strip())
    return Parsed(None, f"printed nothing: {tail(stderr)}" if stderr.strip() else "printed nothing")
