"""``rune``: a thin command line over the library.

Each command group lives in its own module and registers itself on the shared apps in
``app.py``; heavy modules are imported inside the commands so ``rune --help`` stays fast.
"""

from __future__ import annotations

import os
import sys

from . import lifetime  # first: it tunes the collector before the heavy imports

# isort: split
from ..core.errors import CouncilError, ExitCode, exit_code_for
from . import (
    batch_cmd,  # noqa: F401  (registers the commands)
    consent_cmd,  # noqa: F401
    council_cmds,  # noqa: F401
    demo_cmd,  # noqa: F401
    doctor_cmd,  # noqa: F401
    endpoint_cmds,  # noqa: F401
    eval_cmd,  # noqa: F401
    install_cmd,  # noqa: F401
    mcp_cmd,  # noqa: F401
    review_cmd,  # noqa: F401
    runs_cmds,  # noqa: F401
    serve_cmd,  # noqa: F401
    stats_cmd,  # noqa: F401
    tally_cmd,  # noqa: F401
    trust_cmd,  # noqa: F401
)
from .app import app, build_only_what_runs, echo

__all__ = ["app", "main"]


def main() -> None:
    build_only_what_runs(sys.argv[1:])
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
