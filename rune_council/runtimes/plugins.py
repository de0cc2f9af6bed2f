"""AI CLIs added by other installed packages, through the ``rune_council.runtimes`` entry points.

A package adds a CLI without forking this one by declaring, in its ``pyproject.toml``::

    [project.entry-points."rune_council.runtimes"]
    mistral = "mistral_council:ADAPTER"

The object named is a ``CliAdapter`` (see ``rune_council.runtimes.cli_adapter`` and any
module under ``runtimes/clis/`` for a worked one), or a callable taking no arguments that
returns one adapter or a list of them. A plug-in CLI goes through exactly what a built-in
one does: DETECT, the consent gate, stdin-only prompts, an empty working directory, the
environment allowlist, the timeout and the tree kill. ``[runtimes.NAME]`` in
``council.toml`` adds a CLI the same way without writing a package, and wins on a shared
name (it is the user's own word). A plug-in cannot replace a built-in CLI.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterable
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING

from ..core.errors import RuntimeConfigError
from .clis import BUILTIN

if TYPE_CHECKING:
    from .cli_adapter import CliAdapter

GROUP = "rune_council.runtimes"


def _where(ep: EntryPoint) -> str:
    dist = ep.dist
    owner = f" from {dist.name} {dist.version}" if dist is not None else ""
    return f"entry point {GROUP}:{ep.name} ({ep.value}){owner}"


def _adapters_of(ep: EntryPoint) -> list[CliAdapter]:
    from .cli_adapter import CliAdapter

    try:
        value: object = ep.load()
        if callable(value) and not isinstance(value, CliAdapter):
            value = value()
    except Exception as exc:  # an installed package can fail in any way; say which one
        raise RuntimeConfigError(
            f"{_where(ep)}: cannot be loaded: {type(exc).__name__}: {exc}"
        ) from exc
    items = [value] if isinstance(value, CliAdapter) else value
    if isinstance(items, Iterable) and not isinstance(items, str | bytes):
        found = list(items)
        if found and all(isinstance(a, CliAdapter) for a in found):
            return found
    raise RuntimeConfigError(
        f"{_where(ep)}: names {type(value).__name__}, not a CliAdapter or a list of them"
    )


def _entry_points() -> list[EntryPoint]:
    # Listing entry points reads every installed distribution's metadata, and one council
    # asks twice (the adapters, then the cache digest). What is installed is found through
    # sys.path, so a changed path lists again.
    key = tuple(sys.path)
    if key not in _FOUND:
        _FOUND.clear()
        _FOUND[key] = sorted(entry_points(group=GROUP), key=lambda e: (e.name, e.value))
    return _FOUND[key]


_FOUND: dict[tuple[str, ...], list[EntryPoint]] = {}


def plugin_adapters() -> dict[str, CliAdapter]:
    """Every CLI the installed plug-ins add, by name; a faulty plug-in is one clear error."""
    found: dict[str, tuple[CliAdapter, str]] = {}
    for ep in _entry_points():
        from .cli_adapter import ADAPTER_NAME  # loaded only when a plug-in is installed

        for adapter in _adapters_of(ep):
            where = _where(ep)
            if not ADAPTER_NAME.match(adapter.name):
                raise RuntimeConfigError(
                    f"{where}: runtime name {adapter.name!r} must be 1-40 of a-z 0-9 . _ - "
                    "starting with a letter or digit"
                )
            if adapter.name in BUILTIN:
                raise RuntimeConfigError(
                    f"{where}: '{adapter.name}' is a built-in CLI; a plug-in cannot replace it"
                )
            if adapter.name in found:
                raise RuntimeConfigError(
                    f"{where}: '{adapter.name}' is also added by {found[adapter.name][1]}"
                )
            found[adapter.name] = (adapter, where)
    return {name: adapter for name, (adapter, _) in found.items()}


def plugins_digest() -> str | None:
    """Changes whenever the installed plug-ins do, so a cached detection is not reused."""
    eps = _entry_points()
    if not eps:
        return None
    parts = [
        f"{e.name}={e.value}@{e.dist.name if e.dist else ''}:{e.dist.version if e.dist else ''}"
        for e in eps
    ]
    return hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()[:16]
