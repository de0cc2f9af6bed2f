"""Gemini CLI: skills under ``.gemini/skills``, TOML commands under ``.gemini/commands``, MCP
servers under ``mcpServers`` in ``.gemini/settings.json``; the user-wide ``.gemini`` sits in
``$GEMINI_CLI_HOME`` or the home directory.
"""

from __future__ import annotations

import json

from . import layout as parts
from .layout import COMMAND_NAME, FileItem, Layout, Places, Scope

HOST = "gemini"
PREFIX = parts.tool_prefix("_")
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
    prompt = parts.arguments_block("{{args}}") + parts.command_body(PREFIX)
    if any(trigger in prompt for trigger in INJECTION_TRIGGERS):
        raise AssertionError("the /rune prompt must not contain a Gemini injection trigger")
    description = 'Convene a rune-council on one question: /rune council "<question>"'
    return f"description = {json.dumps(description)}\nprompt = {toml_string(prompt)}\n"


def layout(places: Places, scope: Scope) -> Layout:
    if scope == "user":
        base = places.home_var("GEMINI_CLI_HOME", places.home) / ".gemini"
    else:
        base = places.project / ".gemini"
    return parts.host_layout(
        HOST,
        places,
        scope,
        skills=base / "skills",
        command=FileItem(
            base / "commands" / f"{COMMAND_NAME}.toml", command_text(), "/rune command"
        ),
        # trust: Gemini CLI asks before every call of an untrusted server's tools and refuses
        # them outright when run headless. The council's own consent rule still decides
        # whether a question leaves the machine.
        server=parts.server_entry(
            base / "settings.json", "json", "mcpServers", {**parts.launch_settings(), "trust": True}
        ),
        project_note=(
            "Gemini CLI loads a project's commands and settings only in a folder you trust."
        ),
        notes=(
            "Gemini CLI passes MCP servers no variable named like a key or token: list the ones "
            "your AI CLIs need (e.g. OPENAI_API_KEY) under security.environmentVariableRedaction"
            ".allowed in settings.json.",
        ),
    )
