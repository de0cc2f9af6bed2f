"""Councils over a dataset: one council per line of an items file, resumable, bounded.

A door like the CLI and the servers: every council is one ``aconvene`` with the batch's
``CouncilOptions``; this package adds only reading items, scheduling, the results file,
progress, and (optionally) running the councils as Ray tasks.
"""

from __future__ import annotations

from .items import BadLine, Defaults, Item
from .results import Row, Tally, read_rows
from .scheduler import BadItems, Batch, BatchOptions, run_batch

__all__ = [
    "BadItems",
    "BadLine",
    "Batch",
    "BatchOptions",
    "Defaults",
    "Item",
    "Row",
    "Tally",
    "read_rows",
    "run_batch",
]
