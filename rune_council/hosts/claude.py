"""Claude Code: skills under ``<config>/skills``, Markdown commands under ``<config>/commands``,
MCP servers in ``~/.claude.json`` (user) or ``.mcp.json`` (project).

``<config>`` is ``$CLAUDE_CONFIG_DIR`` or ``~/.claude``; with ``CLAUDE_CONFIG_DIR`` set, the
user's ``.claude.json`` lives inside it, as Claude Code itself reads it.
"""

from __future__ import annotations

from . import layout as parts
from .layout import COMMAND_NAME, FileItem, Layout, Places, Scope

HOST = "claude"
PREFIX = parts.tool_prefix("__")
TOOL = f"{PREFIX}convene"
SUBMIT = f"{PREFIX}submit_answers"


def command_text() -> str:
    # Only the council's MCP tools are pre-allowed: through them the model cannot grant
    # consent, whereas a shell call could add --yes, so the user sees and approves any
    # shell call.
    front = (
        "---\n"
        'description: Convene a rune-council on one question: /rune council "<question>"\n'
        "argument-hint: council [--template NAME] [--rounds N] [--mode critique|review|judge] "
        '[--artifact PATH] "<question>"\n'
        f"allowed-tools: {TOOL}, {SUBMIT}\n"
        "---\n"
    )
    return front + parts.arguments_block("$ARGUMENTS") + parts.command_body(PREFIX)


def layout(places: Places, scope: Scope) -> Layout:
    config_dir = places.home_var("CLAUDE_CONFIG_DIR", places.home / ".claude")
    if scope == "user":
        base = config_dir
        if places.env.get("CLAUDE_CONFIG_DIR"):
            mcp_file = config_dir / ".claude.json"
        else:
            mcp_file = places.home / ".claude.json"
    else:
        base = places.project / ".claude"
        mcp_file = places.project / ".mcp.json"
    return parts.host_layout(
        HOST,
        places,
        scope,
        skills=base / "skills",
        command=FileItem(base / "commands" / f"{COMMAND_NAME}.md", command_text(), "/rune command"),
        server=parts.server_entry(
            mcp_file, "json", "mcpServers", {"type": "stdio", **parts.launch_settings(), "env": {}}
        ),
        project_note="Claude Code asks once before it starts a server from a project's .mcp.json.",
    )
