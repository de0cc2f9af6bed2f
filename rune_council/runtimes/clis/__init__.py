"""The built-in AI CLIs, one module each: flags, output parser and backend-family reader.

Adding a built-in CLI means one module here exposing ``ADAPTER`` and one line below; a CLI
that should not live in this package is added through the ``rune_council.runtimes`` entry
point instead (see ``runtimes/plugins.py``).
"""

from __future__ import annotations

from ..cli_adapter import CliAdapter
from . import agy, aider, amp, claude, cline, codex, gemini, grok, opencode, qwen

BUILTIN: dict[str, CliAdapter] = {
    m.ADAPTER.name: m.ADAPTER
    for m in (claude, codex, gemini, qwen, opencode, aider, cline, amp, agy, grok)
}
