"""Commands that hand the process to another door (``serve``, ``mcp``).

Those doors run as ``python -m <module>`` so the CLI never imports them; help alone is
printed from a child so that an in-process caller (a test runner, a shell completer) keeps
its own process.
"""

from __future__ import annotations

import os
import subprocess
import sys

import typer

from .app import council_app, echo


def door_command(name: str, module: str, help_text: str) -> None:
    """Register ``rune council NAME`` as a hand-over to ``python -m MODULE``."""

    @council_app.command(
        name,
        help=help_text,
        add_help_option=False,
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    )
    def command(ctx: typer.Context) -> None:
        argv = [sys.executable, "-m", module, *ctx.args]
        if any(arg in ("--help", "-h") for arg in ctx.args):
            shown = subprocess.run(argv, capture_output=True, text=True, check=False)
            # argparse says "usage:"; every other command of this CLI says "Usage:".
            echo(shown.stdout.replace("usage:", "Usage:", 1), nl=False)
            echo(shown.stderr, err=True, nl=False)
            raise typer.Exit(shown.returncode)
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(sys.executable, argv)
