"""``rune council serve``: the HTTP API and the live web view.

The server is a door of its own (``rune_council.serve``, the ``serve`` extra); this command
replaces the process with it rather than importing it, so the doors stay side by side.
"""

from __future__ import annotations

import os
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
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, argv)
