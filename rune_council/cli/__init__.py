"""``rune``: a thin command line over the library.

Each command group lives in its own module and registers itself on the shared apps in
``app.py``; heavy modules are imported inside the commands so ``rune --help`` stays fast.
"""

from __future__ import annotations

import os
import sys

from . import (
    council_cmds,  # noqa: F401  (registers the commands)
    demo_cmd,  # noqa: F401
    endpoint_cmds,  # noqa: F401
    mcp_cmd,  # noqa: F401
    runs_cmds,  # noqa: F401
    serve_cmd,  # noqa: F401
    tally_cmd,  # noqa: F401
    trust_cmd,  # noqa: F401
)
from .app import EXIT_CANCELLED, EXIT_INTERNAL, app

__all__ = ["app", "main"]


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(EXIT_CANCELLED)
    except Exception as exc:  # one clear line, no traceback, unless asked for one
        if os.environ.get("RUNE_DEBUG"):
            raise
        print(f"rune: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(EXIT_INTERNAL)
