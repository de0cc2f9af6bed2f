"""rune-council: convene independent AI voices on one question and arbitrate honestly.

    from rune_council import CouncilOptions, PerspectiveRequest, convene
    request = PerspectiveRequest(id="shard-1", question="Should we shard orders?")
    result = convene(request, CouncilOptions(allow_external=True))
    print(result.decorrelation)

Names are loaded on first use so that importing the package (and starting ``rune``) stays
cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .core.contract import SCHEMA_VERSION, CouncilResult, PerspectiveRequest, VoiceAnswer
    from .core.errors import (
        CouncilError,
        NotImplementedModeError,
        RequestError,
        RunFileError,
        RunIdError,
        RuntimeConfigError,
        StorageError,
    )
    from .council import CouncilOptions, aconvene, convene
    from .runtimes.subagent import CommandRuntime, FunctionRuntime

__all__ = [
    "SCHEMA_VERSION",
    "CommandRuntime",
    "CouncilError",
    "CouncilOptions",
    "CouncilResult",
    "FunctionRuntime",
    "NotImplementedModeError",
    "PerspectiveRequest",
    "RequestError",
    "RunFileError",
    "RunIdError",
    "RuntimeConfigError",
    "StorageError",
    "VoiceAnswer",
    "aconvene",
    "convene",
]

_HOME = {
    "SCHEMA_VERSION": "core.contract",
    "CouncilResult": "core.contract",
    "PerspectiveRequest": "core.contract",
    "VoiceAnswer": "core.contract",
    "CouncilOptions": "council",
    "aconvene": "council",
    "convene": "council",
    "CouncilError": "core.errors",
    "NotImplementedModeError": "core.errors",
    "RequestError": "core.errors",
    "RunFileError": "core.errors",
    "RunIdError": "core.errors",
    "RuntimeConfigError": "core.errors",
    "StorageError": "core.errors",
    "CommandRuntime": "runtimes.subagent",
    "FunctionRuntime": "runtimes.subagent",
}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'rune_council' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
    globals()[name] = value
    return value
