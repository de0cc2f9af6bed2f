"""``rune council mcp``: serve the council to an agent host over MCP (stdio)."""

from __future__ import annotations

from .handover import door_command

door_command(
    "mcp",
    "rune_council.mcp_server",
    "Serve the council to an agent host over MCP on stdio (see --help for the options).",
)
