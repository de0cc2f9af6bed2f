"""``rune council serve``: the HTTP API and the live web view."""

from __future__ import annotations

from .handover import door_command

door_command(
    "serve",
    "rune_council.serve",
    "Serve councils over HTTP, with a live web view at / (see --help for the options).",
)
