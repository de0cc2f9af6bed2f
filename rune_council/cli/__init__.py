"""``rune``: a thin command line over the library.

Each command lives in a module of its own that declares it on the shared apps in
``app.py``; a command line imports only the module of the command it runs
(``app.COMMAND_MODULES``), and heavy modules are imported inside the commands, so each
command pays only for what it uses.
"""

from __future__ import annotations

import os
import sys

from . import lifetime  # first: it tunes the collector before the heavy imports

# isort: split
from ..core.errors import CouncilError, ExitCode, exit_code_for
from .app import app, echo, load_only_what_runs

__all__ = ["app", "main"]


# pydantic looks for plugins by reading every installed distribution's entry points the
# first time it builds a validator (some 5 ms, more in a large environment), to hook
# third-party code into every validation. The command line validates only rune's own
# contract and loads none; an explicit PYDANTIC_DISABLE_PLUGINS (empty: load them all) wins.
PLUGINS_OFF = ("PYDANTIC_DISABLE_PLUGINS", "__all__")


def main() -> None:
    os.environ.setdefault(*PLUGINS_OFF)
    if load_only_what_runs(sys.argv[1:]) != "run":
        # A council settles the collector itself, once its pipeline is loaded.
        lifetime.settle()
    try:
        app()
    except KeyboardInterrupt:
        lifetime.exit_now(ExitCode.CANCELLED)
    except SystemExit as done:
        lifetime.exit_now(done.code)
    except Exception as exc:  # one clear line, no traceback, unless asked for one
        if os.environ.get("RUNE_DEBUG"):
            raise
        code = exit_code_for(exc)
        if isinstance(exc, CouncilError):
            # The library's own errors say what is wrong with the input, wherever a command
            # met them (a rune directory it refuses is found before its own handler runs).
            echo(f"rune council: {exc}", err=True)
        else:
            what = "I/O error" if code == ExitCode.IO_ERROR else "internal error"
            echo(f"rune: {what}: {type(exc).__name__}: {exc}", err=True)
        lifetime.exit_now(code)
    lifetime.exit_now(0)
