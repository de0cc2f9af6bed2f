"""What the run history says: council statistics over ``.rune/council/run-*.json``.

Each run file is reduced once to a small digest (``digest``), kept in an index beside the
run directory keyed by file name, modification time and size (``index``), so a later pass
reads only what changed. ``aggregate`` turns the digests into the numbers; ``charts`` draws
them with matplotlib (the optional ``rune-council[analytics]`` extra) and ``page`` writes
one self-contained HTML page. ``evals`` reads the scored items each ``rune council eval``
keeps and gives their decorrelation figures. Run files and eval files are untrusted: one
that cannot be read is skipped and counted, never fatal.
"""

from __future__ import annotations

from .aggregate import Stats, aggregate
from .history import stats
from .index import Collected, collect

__all__ = ["Collected", "Stats", "aggregate", "collect", "stats"]
