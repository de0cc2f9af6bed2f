"""Claude Code: skills under ``<config>/skills``, Markdown commands under ``<config>/commands``,
MCP servers in ``~/.claude.json`` (user) or ``.mcp.json`` (project).

``<config>`` is ``$CLAUDE_CONFIG_DIR`` or ``~/.claude``; with ``CLAUDE_CONFIG_DIR`` set, the
user's ``.claude.json`` lives inside it, as Claude Code itself reads it.
"""

from __future__ import annotations

from .layout import (
    COMMAND_NAME,
    SERVER_NAME,
    SKILL_NAME,
    ConfigEntry,
    FileItem,
    Layout,
    Places,
    Scope,
    arguments_block,
    command_body,
    manifest_path,
    mcp_launch,
    skill_files,
)

HOST = "claude"
TOOL = f"mcp__{SERVER_NAME}__convene"
SUBMIT = f"mcp__{SERVER_NAME}__submit_answers"


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
    body = command_body(f"shown to you as `{TOOL}`", f"`{SUBMIT}`")
    return front + arguments_block("$ARGUMENTS") + body


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
    command, args = mcp_launch()
    return Layout(
        host=HOST,
        scope=scope,
        files=(
            *skill_files(base / "skills" / SKILL_NAME),
            FileItem(base / "commands" / f"{COMMAND_NAME}.md", command_text(), "/rune command"),
        ),
        configs=(
            ConfigEntry(
                mcp_file,
                "json",
                ("mcpServers", SERVER_NAME),
                {"type": "stdio", "command": command, "args": args, "env": {}},
                f"MCP server '{SERVER_NAME}'",
            ),
        ),
        manifest=manifest_path(places, scope, HOST),
        usage='/rune council "<question>"',
        notes=(
            ("Claude Code asks once before it starts a server from a project's .mcp.json.",)
            if scope == "project"
            else ()
        ),
    )
