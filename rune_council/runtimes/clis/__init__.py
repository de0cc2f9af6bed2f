"""The built-in AI CLIs, one module each: flags, output parser and backend-family reader.

Adding a built-in CLI means one module here exposing ``ADAPTER`` (named like the module)
and its name in ``NAMES`` below; a CLI that should not live in this package is added
through the ``rune_council.runtimes`` entry point instead (see ``runtimes/plugins.py``).

Each module is loaded when its adapter is first wanted: a council whose detection is
today's cache and found none of these CLIs (endpoint voices only, say) never loads one, and
one that seats ``claude`` loads ``claude`` alone. Probing every CLI loads them all.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..cli_adapter import CliAdapter

# In the order detection probes them and the runtime report lists them.
NAMES = ("claude", "codex", "gemini", "qwen", "opencode", "aider", "cline", "amp", "agy", "grok")


class _Builtin(Mapping[str, "CliAdapter"]):
    """The built-in adapters by name; a name's module is imported on first lookup."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self._names = names
        self._loaded: dict[str, CliAdapter] = {}

    def __getitem__(self, name: str) -> CliAdapter:
        found = self._loaded.get(name)
        if found is None:
            if name not in self._names:
                raise KeyError(name)
            found = importlib.import_module(f"{__name__}.{name}").ADAPTER
            assert found.name == name, f"{name}.ADAPTER is named {found.name!r}"
            self._loaded[name] = found
        return found

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __repr__(self) -> str:
        return f"BUILTIN({', '.join(self._names)})"


BUILTIN: Mapping[str, CliAdapter] = _Builtin(NAMES)


def __getattr__(name: str) -> ModuleType:
    # ``clis.claude`` and the like, as the modules were attributes when imported eagerly.
    if name in NAMES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
