"""``--since``: a window back from now (``30d``, ``12w``, ``36h``) or a start date."""

from __future__ import annotations

import datetime as dt
import re

from ..core.errors import RequestError

_SPAN = re.compile(r"^(\d{1,5})([hdw])$")
_UNIT = {"h": "hours", "d": "days", "w": "weeks"}


def parse_since(text: str, *, now: dt.datetime | None = None) -> dt.datetime:
    """The earliest start time a run may have to be counted."""
    value = text.strip().lower()
    match = _SPAN.fullmatch(value)
    if match:
        amount, unit = int(match.group(1)), match.group(2)
        return (now or dt.datetime.now(dt.UTC)) - dt.timedelta(**{_UNIT[unit]: amount})
    try:
        moment = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise RequestError(
            f"--since {text[:40]!r} is neither a span (30d, 12w, 36h) nor a date (2026-11-01)"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)
