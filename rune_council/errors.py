"""The one exception hierarchy of rune-council.

Every error the library raises on purpose derives from ``CouncilError`` so a caller can
catch the whole family with one clause; the CLI maps each class to an exit code.
"""

from __future__ import annotations


class CouncilError(Exception):
    """Base of every error raised by rune-council."""


class RequestError(CouncilError, ValueError):
    """The PerspectiveRequest (or a CLI argument that builds it) is malformed."""


class RunIdError(RequestError):
    """A run id is not a safe file name, or would resolve outside the run directory."""


class NotImplementedModeError(CouncilError):
    """The requested mode is declared by the contract but not served (``generate``)."""


class RunFileError(CouncilError):
    """The run file could not be written, or a path to it is unsafe (for example a symlink)."""


class RuntimeConfigError(CouncilError):
    """A runtime or subagent configuration is invalid."""


class EndpointCallError(CouncilError):
    """A call to an HTTP endpoint model failed; ``kind`` says how (timeout, http_status, ...)."""

    def __init__(self, message: str, *, kind: str, http_status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.http_status = http_status
