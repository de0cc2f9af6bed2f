"""``python -m rune_council.mcp_server``: what ``rune council mcp`` runs.

The command line door hands its process over to this one (``exec``) instead of importing it:
the doors stand side by side, and this one needs the ``mcp`` extra.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from ..core.errors import CouncilError, ExitCode, exit_code_for
from ..core.safetext import plain

PROG = "rune council mcp"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Run a Model Context Protocol server on stdin/stdout with the tools "
        "convene, submit_answers, detect, list_runs, show_run, verify_run and tally, and "
        "each run file as a rune://runs/<id> resource. An agent host (Claude Code, Codex, "
        "Gemini CLI, ...) starts it as a subprocess. Without --yes or standing consent "
        "(RUNE_COUNCIL_ALLOW_EXTERNAL, council.toml, rune council consent) it asks the user "
        "through the host when the host supports it, else convene answers needs_consent "
        "with the command the user runs. Slots no external voice may take go to the "
        "host's own subagents (submit_answers). Needs the mcp extra: "
        "pip install 'rune-council[mcp]'.",
    )
    p.add_argument(
        "--yes",
        "-y",
        action="store_true",
        help="allow councils to use the external AI CLIs found (no tool call can grant this)",
    )
    p.add_argument("--rune-dir", type=Path, help="where .rune files go (default ./.rune)")
    p.add_argument("--subagent-cmd", help="command answering a prompt on stdin; takes empty slots")
    p.add_argument("--subagent-family", help="model family of the subagent command")
    p.add_argument(
        "--check",
        action="store_true",
        help="only check that the server can start here (what `rune council install` runs)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from ..core.paths import RuneDir
    from .settings import ServerSettings

    try:
        from .server import serve
    except ImportError as exc:
        print(
            plain(
                f"rune council: the MCP server needs the mcp extra ({exc.name} is missing): "
                "pip install 'rune-council[mcp]'"
            ),
            file=sys.stderr,
        )
        return ExitCode.BAD_INPUT  # a missing extra is bad input, as elsewhere
    if args.check:
        from importlib.metadata import version

        print(f"rune council mcp: ready (mcp {version('mcp')}, {sys.executable})")
        return ExitCode.OK
    try:
        where = RuneDir.resolve(args.rune_dir)
    except CouncilError as exc:
        print(plain(f"rune council: {exc}"), file=sys.stderr)
        return exit_code_for(exc)
    settings = ServerSettings(
        workdir=Path.cwd(),
        rune_dir=where.root,
        yes=args.yes,
        subagent_cmd=args.subagent_cmd,
        subagent_family=args.subagent_family,
        env=dict(os.environ),
    )
    asyncio.run(serve(settings))
    return ExitCode.OK


if __name__ == "__main__":
    sys.exit(main())
