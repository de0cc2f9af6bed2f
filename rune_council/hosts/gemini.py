"""Gemini CLI: skills under ``.gemini/skills``, TOML commands under ``.gemini/commands``, MCP
servers under ``mcpServers`` in ``.gemini/settings.json``; the user-wide ``.gemini`` sits in
``$GEMINI_CLI_HOME`` or the home directory.
"""

from __future__ import annotations

import json

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

HOST = "gemini"
TOOL = f"mcp_{SERVER_NAME}_convene"
SUBMIT = f"mcp_{SERVER_NAME}_submit_answers"
# Gemini CLI runs `!{...}` in a command's prompt as a shell command and inlines `@{...}` as
# a file; the prompt must contain neither so that nothing the user types is ever run.
INJECTION_TRIGGERS = ("!{", "@{")


def toml_string(text: str) -> str:
    """``text`` as a TOML multi-line basic string (readable, with nothing left to escape
    wrongly: backslashes, quote runs and control characters are escaped)."""
    out = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n" or ch == "\t":
            out.append(ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"""\n' + "".join(out) + '"""'


def command_text() -> str:
    prompt = arguments_block("{{args}}") + command_body(f"shown to you as `{TOOL}`", f"`{SUBMIT}`")
    if any(trigger in prompt for trigger in INJECTION_TRIGGERS):
        raise AssertionError("the /rune prompt must not contain a Gemini injection trigger")
    description = 'Convene a rune-council on one question: /rune council "<question>"'
    return f"description = {json.dumps(description)}\nprompt = {toml_string(prompt)}\n"


def layout(places: Places, scope: Scope) -> Layout:
    if scope == "user":
        base = places.home_var("GEMINI_CLI_HOME", places.home) / ".gemini"
    else:
        base = places.project / ".gemini"
    command, args = mcp_launch()
    return Layout(
        host=HOST,
        scope=scope,
        files=(
            *skill_files(base / "skills" / SKILL_NAME),
            FileItem(base / "commands" / f"{COMMAND_NAME}.toml", command_text(), "/rune command"),
        ),
        configs=(
            ConfigEntry(
                base / "settings.json",
                "json",
                ("mcpServers", SERVER_NAME),
                # trust: Gemini CLI asks before every call of an untrusted server's tools and
                # refuses them outright when run headless. The council's own consent rule
                # still decides whether a question leaves the machine.
                {"command": command, "args": args, "trust": True},
                f"MCP server '{SERVER_NAME}'",
            ),
        ),
        manifest=manifest_path(places, scope, HOST),
        usage='/rune council "<question>"',
        notes=(
            *(
                ("Gemini CLI loads a project's commands and settings only in a folder you trust.",)
                if scope == "project"
                else ()
            ),
            "Gemini CLI passes MCP servers no variable named like a key or token: list the ones "
            "your AI CLIs need (e.g. OPENAI_API_KEY) under security.environmentVariableRedaction"
            ".allowed in settings.json.",
        ),
    )
