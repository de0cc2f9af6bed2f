"""``rune council install <host>``: the council inside an agent host.

Each supported host (Claude Code, Gemini CLI, Codex) gets the rune-council skill where it
loads skills, a ``/rune`` command in its own command format, and the council's MCP server in
its config, user-wide or for one project. What was written is recorded in a manifest so
that uninstalling removes exactly that and nothing the user wrote.
"""

from __future__ import annotations

from .installer import HOSTS, Change, Outcome, ServerCheck, install, uninstall

__all__ = ["HOSTS", "Change", "Outcome", "ServerCheck", "install", "uninstall"]
