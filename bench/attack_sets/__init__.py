"""The attack sets of ``bench/attacks.py``: importing them fills the registry."""

from . import (
    ballots,
    caches,
    classic,
    disguises,
    doors,
    endpoints,
    kit,
    local_server,
    runfiles,
)
from .kit import Row, run_attack

# The order the sets run and print in (each module registers its own rows in its order).
SETS = [classic, runfiles, local_server, endpoints, disguises, caches, ballots, doors]
_ORDER = [s.SECTION for s in SETS]
ATTACKS = sorted(kit.ATTACKS, key=lambda a: _ORDER.index(a[1]))

__all__ = ["ATTACKS", "Row", "run_attack"]
