"""The council layer: options, the pipeline, the life of a run, and chains of councils.

It sits above the stages, the deliberation methods and the I/O edge, and below the doors
(CLI, servers), which all build a ``CouncilOptions`` and call ``aconvene`` or ``convene``.
"""

from __future__ import annotations

from .chain import aconvene_chain, convene_chain
from .lifecycle import now, run_blocking
from .options import CouncilOptions, OnEvent
from .pipeline import aconvene, convene
from .request import new_run_id, parse_request

__all__ = [
    "CouncilOptions",
    "OnEvent",
    "aconvene",
    "aconvene_chain",
    "convene",
    "convene_chain",
    "new_run_id",
    "now",
    "parse_request",
    "run_blocking",
]
