"""Regular expressions the user writes in config, run against what voices print.

A pattern such as ``(a+)+$`` backtracks for minutes on a hostile output, and Python's ``re``
cannot be interrupted: the event loop would stop, with it the timeouts and the heartbeat,
and the run would sit ``running`` for ever. The ``regex`` engine takes a time limit and
releases the interpreter lock while it matches, so a pathological match ends as a reason
("the answer regex took too long") after ``TIME_LIMIT_S`` of processor time (a few times
that in wall time on a loaded machine), far below any voice's timeout.
"""

from __future__ import annotations

from typing import Any

__all__ = ["TIME_LIMIT_S", "UserRegex", "UserRegexTimeout"]

TIME_LIMIT_S = 0.25


def _engine() -> Any:
    # Imported on first use: most runs name no pattern, and the engine costs a few
    # tens of milliseconds of start-up.
    import regex  # type: ignore[import-untyped]  # it ships no type information

    return regex


class UserRegexTimeout(Exception):
    """The pattern did not finish within the time limit on this input."""


class UserRegex:
    """A compiled user pattern whose every search is time-bounded."""

    def __init__(self, pattern: str, flags: int = 0, *, time_limit_s: float = TIME_LIMIT_S):
        regex = _engine()
        # VERSION0 keeps the standard library's syntax, so a pattern means what it did.
        self._pattern: Any = regex.compile(pattern, flags | regex.VERSION0)
        self.time_limit_s = time_limit_s

    @property
    def groups(self) -> int:
        return int(self._pattern.groups)

    def search(self, text: str) -> Any:
        try:
            return self._pattern.search(text, timeout=self.time_limit_s, concurrent=True)
        except TimeoutError:
            raise UserRegexTimeout(
                f"pattern took longer than {self.time_limit_s:g} s on this output"
            ) from None


def check(pattern: str) -> str | None:
    """Why ``pattern`` cannot be used, or None."""
    regex = _engine()
    try:
        regex.compile(pattern, regex.VERSION0)
    except regex.error as exc:
        return str(exc)
    return None
