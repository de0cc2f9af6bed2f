"""Can a CLI answer? Found out without spending a model call.

Each CLI's check lives in its module under ``runtimes/clis/``: its own status command where
one exists and needs no network, otherwise whether its credential files and variables are
there and what its config names. A check looks at presence only: no credential's value is
read into anything it returns, and what it returns is recorded in ``runtimes.json``.

The files and variables a check looked at are returned with the reading, so a cached report
can be checked again as soon as one of them changes (a user who logs in, or sets the key the
fix named, is not told the old answer for the rest of the day).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..contract import AuthState, AuthVar, WatchedFile
from .process import run_process

# A status command is local bookkeeping; one that takes longer is not answering offline.
STATUS_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class AuthReading:
    state: AuthState
    detail: str
    fix: str | None = None
    files: tuple[str, ...] = ()  # paths looked at, present or not
    variables: tuple[str, ...] = ()  # variable names looked at, set or not


@dataclass(frozen=True)
class AuthContext:
    """What a check may use: the resolved binary and the exact environment DISPATCH gives it."""

    path: str
    env: Mapping[str, str]
    timeout_s: float = STATUS_TIMEOUT_S


AuthProbe = Callable[[AuthContext], Awaitable[AuthReading]]


@dataclass(frozen=True)
class StatusResult:
    exit_code: int | None
    stdout: str
    failure: str = ""  # set when the command did not run to an exit (timeout, spawn error)


@dataclass
class Looked:
    """Collects what a check looked at, for the reading's ``files`` and ``variables``."""

    env: Mapping[str, str]
    files: list[str] = field(default_factory=list)
    variables: list[str] = field(default_factory=list)

    def var(self, name: str) -> bool:
        """Whether ``name`` is set to something non-blank; its value is not kept."""
        if name not in self.variables:
            self.variables.append(name)
        return bool(self.env.get(name, "").strip())

    def file(self, path: Path) -> bool:
        text = str(path)
        if text not in self.files:
            self.files.append(text)
        return path.is_file()

    def reading(self, state: AuthState, detail: str, fix: str | None = None) -> AuthReading:
        return AuthReading(state, detail, fix, tuple(self.files), tuple(self.variables))


def home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or "~").expanduser()


async def run_status(ctx: AuthContext, args: Sequence[str]) -> StatusResult:
    """The CLI's own status command, in an empty directory, with nothing on stdin."""
    workdir = tempfile.mkdtemp(prefix="rune-council-auth-")
    try:
        result = await run_process(
            [ctx.path, *args],
            stdin=b"",
            env=ctx.env,
            timeout_s=ctx.timeout_s,
            max_stdout=64_000,
            cwd=workdir,
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if result.outcome not in ("ok", "exit_nonzero"):
        return StatusResult(None, "", result.detail)
    return StatusResult(result.exit_code, result.stdout.decode("utf-8", errors="replace"))


def watched_files(paths: Sequence[str]) -> list[WatchedFile]:
    def mtime(path: str) -> float | None:
        try:
            return os.stat(path).st_mtime
        except OSError:
            return None

    return [WatchedFile(path=p, mtime=mtime(p)) for p in paths]


def watched_vars(names: Sequence[str], env: Mapping[str, str]) -> list[AuthVar]:
    return [AuthVar(name=n, set=bool(env.get(n, "").strip())) for n in names]


def unchanged(
    files: Sequence[WatchedFile], variables: Sequence[AuthVar], env: Mapping[str, str]
) -> bool:
    """Whether every file and variable a check looked at is as it was when it looked."""
    return watched_files([f.path for f in files]) == list(files) and watched_vars(
        [v.name for v in variables], env
    ) == list(variables)
