"""``rune council mcp``: serve the council to an agent host over MCP (stdio)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from .app import EXIT_BAD_INPUT, council_app, fail


@council_app.command(
    "mcp",
    short_help="Serve the council to an agent host over MCP (stdio).",
    help="Run a Model Context Protocol server on stdin/stdout with the tools convene, detect, "
    "list_runs, show_run, verify_run and tally, and each run file as a rune://runs/<id> "
    "resource. A host (Claude Code, Codex, Gemini CLI, ...) starts it as a subprocess. "
    "Without --yes or standing consent (RUNE_COUNCIL_ALLOW_EXTERNAL, council.toml) it asks "
    "the user through the host when the host supports it, else runs subagents only. "
    "Needs the mcp extra: pip install 'rune-council[mcp]'.",
)
def mcp_command(
    yes: Annotated[
        bool,
        typer.Option(
            "--yes",
            "-y",
            help="Allow councils to send questions to the external AI CLIs found.",
        ),
    ] = False,
    rune_dir: Annotated[
        Path | None, typer.Option(help="Where .rune files go (default ./.rune).")
    ] = None,
    subagent_cmd: Annotated[
        str | None,
        typer.Option(help="Command that answers a prompt on stdin; takes failed or empty slots."),
    ] = None,
    subagent_family: Annotated[
        str | None, typer.Option(help="Model family of the subagent command (default unknown).")
    ] = None,
) -> None:
    import asyncio

    try:
        from ..mcp_server.server import serve
    except ImportError as exc:
        raise fail(
            f"the MCP server needs the mcp extra ({exc.name} is missing): "
            "pip install 'rune-council[mcp]'",
            EXIT_BAD_INPUT,
        ) from None
    from ..mcp_server import ServerSettings
    from ..paths import RuneDir

    settings = ServerSettings(
        workdir=Path.cwd(),
        rune_dir=RuneDir.resolve(rune_dir).root,
        yes=yes,
        subagent_cmd=subagent_cmd,
        subagent_family=subagent_family,
        env=dict(os.environ),
    )
    asyncio.run(serve(settings))
