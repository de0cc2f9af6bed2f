"""The one exception hierarchy of rune-council, and the exit code each error ends a command with.

Every error the library raises on purpose derives from ``CouncilError`` so a caller can
catch the whole family with one clause. ``exit_code_for`` is the single table the doors use
to turn an error into an exit status (the CLI) or its equivalent.
"""

from __future__ import annotations

import errno
from enum import IntEnum


class CouncilError(Exception):
    """Base of every error raised by rune-council."""


class RequestError(CouncilError, ValueError):
    """The PerspectiveRequest (or a CLI argument that builds it) is malformed."""


class RunIdError(RequestError):
    """A run id is not a safe file name, or would resolve outside the run directory."""


class NotImplementedModeError(CouncilError):
    """The requested mode is declared by the contract but not served (``generate``)."""


class RunFileError(CouncilError):
    """A run file (or a path to one) is unusable: missing, not a run file, a symlink, or a
    directory that cannot be created where the caller pointed."""


class StorageError(CouncilError):
    """The disk failed a read or write that should have worked (full, read-only, I/O error)."""


class RuntimeConfigError(CouncilError):
    """A runtime or subagent configuration is invalid."""


class HostInstallError(CouncilError):
    """``rune council install`` cannot do what was asked without losing something of the
    user's: a file or config entry they wrote is in the way, or a config file cannot be
    parsed to edit it."""


class GateFailed(CouncilError):
    """``rune council review --fail-on``: the council's findings on the change fail the gate
    the caller chose (a finding agreed at MUST, or one that needs a person's decision)."""


class EndpointCallError(CouncilError):
    """A call to an HTTP endpoint model failed; ``kind`` says how (timeout, http_status, ...)."""

    def __init__(self, message: str, *, kind: str, http_status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.http_status = http_status


# What the OS says when the path itself is wrong (the caller named something unusable), as
# opposed to the disk failing under a path that was fine.
_PATH_ERRNOS = frozenset(
    {
        errno.ENOENT,
        errno.ENOTDIR,
        errno.EISDIR,
        errno.EEXIST,
        errno.ELOOP,
        errno.ENAMETOOLONG,
        errno.EACCES,
        errno.EPERM,
        errno.EINVAL,  # a FIFO, device or socket where a regular file was expected
        errno.ENXIO,
        errno.ENODEV,
    }
)


def file_error(
    message: str, exc: OSError, *, bad_path: type[CouncilError] = RunFileError
) -> CouncilError:
    """``message: reason`` as the error it is: a wrong path (``bad_path``) or a failing disk."""
    reason = exc.strerror or str(exc)
    kind = bad_path if exc.errno in _PATH_ERRNOS else StorageError
    return kind(f"{message}: {reason}")


class ExitCode(IntEnum):
    """How every ``rune`` command ends (sysexits-style where one applies)."""

    OK = 0
    NO_VERDICT = 1  # the command ran, but nothing usable came of it (no valid voice, a mismatch)
    BAD_INPUT = 2  # usage: a malformed request, option, config file or a path that is wrong
    GATE_FAILED = 3  # review --fail-on: the findings on the change fail the chosen gate
    UNAVAILABLE = 69  # EX_UNAVAILABLE: a service the command needed refused it
    INTERNAL = 70  # EX_SOFTWARE: a bug; the message names the exception
    IO_ERROR = 74  # EX_IOERR: the disk failed a read or write
    ABANDONED = 75  # EX_TEMPFAIL: the run's process died before it finished; run it again
    CANCELLED = 130  # 128 + SIGINT: Ctrl-C; the run file says what had completed


# Most specific class first wins (looked up along the exception's MRO).
EXIT_CODES: dict[type[BaseException], ExitCode] = {
    RequestError: ExitCode.BAD_INPUT,
    NotImplementedModeError: ExitCode.BAD_INPUT,
    RunFileError: ExitCode.BAD_INPUT,
    RuntimeConfigError: ExitCode.BAD_INPUT,
    StorageError: ExitCode.IO_ERROR,
    EndpointCallError: ExitCode.UNAVAILABLE,
    GateFailed: ExitCode.GATE_FAILED,
    CouncilError: ExitCode.BAD_INPUT,
    KeyboardInterrupt: ExitCode.CANCELLED,
    OSError: ExitCode.IO_ERROR,
    BaseException: ExitCode.INTERNAL,
}


# How a run's status ends the command that ran or followed it; ``abandoned`` is the status a
# reader shows for a run whose orchestrator died.
RUN_STATUS_EXIT_CODES: dict[str, ExitCode] = {
    "complete": ExitCode.OK,
    "no_verdict": ExitCode.NO_VERDICT,
    "cancelled": ExitCode.CANCELLED,
    "failed": ExitCode.INTERNAL,
    "abandoned": ExitCode.ABANDONED,
}


def exit_code_for_status(status: str) -> ExitCode:
    """The code for a run that ended with ``status`` (OK for one still under way)."""
    return RUN_STATUS_EXIT_CODES.get(status, ExitCode.OK)


def exit_code_for(exc: BaseException) -> ExitCode:
    for cls in type(exc).__mro__:
        if cls in EXIT_CODES:
            return EXIT_CODES[cls]
    return ExitCode.INTERNAL
