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

from .. import safejson


@dataclass(frozen=True)
class Parsed:
    """What an adapter read out of a finished CLI run."""

    text: str | None
    error: str | None = None  # the CLI reported a failure even if it exited 0


def tail(text: str, limit: int = 300) -> str:
    text = text.strip()
    return text if len(text) <= limit else "…" + text[-limit:]


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
