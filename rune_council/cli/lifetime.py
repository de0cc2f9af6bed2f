"""The command-line process's own lifetime: how it collects garbage and how it ends.

Imported first by the ``cli`` package, so the collector is tuned before the heavy imports.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
import threading

# A command is a short-lived process that allocates a great deal while it imports and builds
# the contract models, and frees almost none of it: the default threshold (700) runs a
# collection every few hundred objects for nothing. Raised, a whole council spends about a
# tenth less processor time; long-running commands (serve, mcp, batch) still collect, in
# larger steps. Until ``settle`` the collector is off: what the imports make is never
# garbage, yet one collection among them still walked some 50,000 young objects (about
# 20 ms, a single pass's largest step after the imports themselves).
gc.set_threshold(50_000, 20, 20)
gc.disable()


def settle() -> None:
    """The command's modules are loaded: the objects they made are kept out of every
    collection from now on (``gc.freeze``), and the collector runs for what comes next.

    ``main`` calls this before any command runs, except a council, which calls it itself
    once the pipeline is loaded, just before the voices are asked.
    """
    gc.freeze()
    gc.enable()


def exit_now(code: object) -> None:
    """End the process once the command is done, without tearing the interpreter down.

    By the time a command returns, everything it writes is written (run files are renamed into
    place; the standard streams are flushed here), yet an orderly shutdown would still spend
    some 50 ms clearing ~600 modules and collecting garbage nobody will read. Exit handlers
    (logging, temporary-file finalizers) still run. With another thread still working, or a
    tracer attached, the normal exit is kept so nothing is cut short.
    """
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # sys.exit("message"): print it and exit 1, as Python would
        from .app import echo

        echo(str(code), err=True)
        status = 1
    if threading.active_count() > 1 or sys.gettrace() is not None:
        sys.exit(status)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: there is nothing to save
            continue
    atexit._run_exitfuncs()
    os._exit(status)
