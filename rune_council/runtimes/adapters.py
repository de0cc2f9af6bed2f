"""The built-in CLI adapters by name, and what every adapter module needs.

Each CLI's flags, parser and backend reader live in ``runtimes/clis/<name>.py``; this module
keeps the names the rest of the package imports (``ADAPTERS``, ``CliAdapter``,
``adapter_env``, ``classify_exit``). ``references/dispatch-protocol.md`` has the table of
which flags were checked against the real binary and which come from documentation only.
"""

from __future__ import annotations

from .cli_adapter import (
    PROMPT_FILE,
    PROVIDER_KEY_NAMES,
    SUPPORT_DIR,
    CliAdapter,
    adapter_env,
    classify_exit,
)
from .clis import BUILTIN
from .parsers import Parsed

__all__ = [
    "ADAPTERS",
    "PROMPT_FILE",
    "PROVIDER_KEY_NAMES",
    "SUPPORT_DIR",
    "CliAdapter",
    "Parsed",
    "adapter_env",
    "classify_exit",
]

ADAPTERS: dict[str, CliAdapter] = dict(BUILTIN)
