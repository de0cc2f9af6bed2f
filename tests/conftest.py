"""Settings for the whole suite that do not depend on how it was started."""

from __future__ import annotations

import signal

# A suite launched from a background job (``pytest &``, a CI runner without a terminal) starts
# with SIGINT ignored, and an ignored signal stays ignored across exec: every child a test
# sends Ctrl-C to would ignore it too. A handler, unlike SIG_IGN, is reset to the default by
# exec, so installing Python's own here gives every child the default a terminal would.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
