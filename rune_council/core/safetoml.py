"""TOML from sources we do not trust (a config file, another tool's settings), read with the
size and nesting bounds ``safejson`` puts on JSON. Kept apart from it because only a council
that finds a config file parses TOML, and loading the parser costs every other process."""

from __future__ import annotations

import tomllib
from typing import Any

from .errors import CouncilError
from .safejson import DEFAULT_MAX_DEPTH, nesting_depth

__all__ = ["UnreadableTOML", "loads_toml"]


def loads_toml(
    text: str,
    *,
    max_bytes: int = 1_000_000,
    max_depth: int = DEFAULT_MAX_DEPTH,
    what: str = "TOML",
) -> dict[str, Any]:
    """``tomllib.loads`` under the same bounds; every failure is an ``UnreadableTOML``, which
    is also a ``tomllib.TOMLDecodeError``."""
    if len(text) > max_bytes:
        raise UnreadableTOML(f"{what} is {len(text)} characters, over the {max_bytes} limit")
    # Literal strings ('...') are not skipped by the scan; brackets inside them can only
    # make it stricter, never let deep nesting through.
    if nesting_depth(text, stop_above=max_depth) > max_depth:
        raise UnreadableTOML(f"{what} nests deeper than {max_depth} levels")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UnreadableTOML(f"{what} is not valid TOML: {exc}") from None
    except (RecursionError, MemoryError) as exc:
        raise UnreadableTOML(f"{what} could not be parsed: {type(exc).__name__}") from None


class UnreadableTOML(CouncilError, tomllib.TOMLDecodeError):
    """TOML we will not parse: malformed, too large or too deep."""
