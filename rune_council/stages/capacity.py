"""How many voices a council seats: the contract's cap, and the one note that says it bit.

A caller may ask for more voices than a council seats; the request keeps what was asked
(the run file shows it) and the council seats ``MAX_VOICES``. Every door tells the caller
with the same words, before the run (the intake) and in the run file (ALLOCATE).
"""

from __future__ import annotations

from ..core.contract import MAX_VOICES


def capped_voices(n: int) -> tuple[int, str | None]:
    """The voices a council asked for ``n`` seats, and the note when that is fewer."""
    if n > MAX_VOICES:
        return MAX_VOICES, f"n={n} requested; capped at {MAX_VOICES} voices"
    return n, None
