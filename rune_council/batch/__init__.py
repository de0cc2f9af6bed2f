"""Councils over a dataset: one council per line of an items file, resumable, bounded.

A door like the CLI and the servers: every line is an ask the intake prepares
(``council.intake``), with the batch's flags as its defaults; this package adds only reading
items, scheduling, the results file, progress, and (optionally) running the councils as Ray
tasks.
"""

from __future__ import annotations

from .items import BadLine, Item
from .results import Row, Tally, read_rows
from .scheduler import BadItems, Batch, BatchOptions, batch_door, run_batch

__all__ = [
    "BadItems",
    "BadLine",
    "Batch",
    "BatchOptions",
    "Item",
    "Row",
    "Tally",
    "batch_door",
    "read_rows",
    "run_batch",
]
