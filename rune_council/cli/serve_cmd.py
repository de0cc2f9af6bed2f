"""``rune council serve``: the HTTP API and the live web view.

The server is a door of its own (``rune_council.serve``, the ``serve`` extra); this command
replaces the process with it rather than importing it, so the doors stay side by side.
"""

from __future__ import annotations

import os
import subprocess
import sys

import typer

from .app import council_app


@council_app.command(
    "serve",
    help="Serve councils over HTTP, with a live web view at / (see --help for the options).",
    add_help_option=False,
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def serve_command(ctx: typer.Context) -> None:
    argv = [sys.executable, "-m", "rune_council.serve", *ctx.args]
    if any(arg in ("--help", "-h") for arg in ctx.args):
        # Help is printed by the server's own parser but must not replace a process that
        # only asked for it (an in-process caller such as a test runner or a shell completer).
        shown = subprocess.run(argv, capture_output=True, text=True, check=False)
        # argparse says "usage:"; every other command of this CLI says "Usage:".
        typer.echo(shown.stdout.replace("usage:", "Usage:", 1), nl=False)
        typer.echo(shown.stderr, err=True, nl=False)
        raise typer.Exit(shown.returncode)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, argv)
