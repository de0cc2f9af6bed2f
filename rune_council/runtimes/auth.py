"""Can a CLI answer? Found out without spending a model call.

Each CLI's check lives in its module under ``runtimes/clis/``: its own status command where
one exists and needs no network, otherwise whether its credential files and variables are
there and what its config names. A check looks at presence only: no credential's value is
read into anything it returns, and what it returns is recorded in ``runtimes.json``.

The files and variables a check looked at are returned with the reading, so a cached report
can be checked again as soon as one of them changes (a user who logs in, or sets the key the
fix named, is not told the old answer for the rest of the day). A wrapper CLI's family is
read through the same ``Looked`` and watched the same way (``watched_files``,
``watched_vars``, ``first_change``), with content and values digested as well, since there
a changed model name is the change that matters.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import field
from pathlib import Path

from ..core.contract import AuthState, AuthVar, WatchedFile
from ..core.records import record
from ..safefile import read_capped
from .base import secret_values

# A status command is local bookkeeping; one that takes longer is not answering offline.
STATUS_TIMEOUT_S = 15.0
# A config file is read (and digested) up to this much; nothing a CLI keeps there is larger.
READ_CAP = 1_000_000


@record(frozen=True)
class AuthReading:
    state: AuthState
    detail: str
    fix: str | None = None
    files: tuple[str, ...] = ()  # paths looked at, present or not
    variables: tuple[str, ...] = ()  # variable names looked at, set or not


@record(frozen=True)
class AuthContext:
    """What a check may use: the resolved binary and the exact environment DISPATCH gives it."""

    path: str
    env: Mapping[str, str]
    timeout_s: float = STATUS_TIMEOUT_S


AuthProbe = Callable[[AuthContext], Awaitable[AuthReading]]


@record(frozen=True)
class StatusResult:
    exit_code: int | None
    stdout: str
    failure: str = ""  # set when the command did not run to an exit (timeout, spawn error)


class _Noting(Mapping[str, str]):
    """An environment that notes every name looked up in it, set or not, so a helper that
    is handed the environment (``home(env)``) cannot read a variable nobody watches."""

    def __init__(self, env: Mapping[str, str], names: list[str]) -> None:
        self._env = env
        self._names = names

    def __getitem__(self, name: str) -> str:
        if name not in self._names:
            self._names.append(name)
        return self._env[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._env)

    def __len__(self) -> int:
        return len(self._env)


@record
class Looked:
    """Collects what a check looked at, for the reading's ``files`` and ``variables``: every
    variable read through ``env`` and every file asked about or read through it."""

    env: Mapping[str, str]
    files: list[str] = field(default_factory=list)
    variables: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.env = _Noting(self.env, self.variables)

    def var(self, name: str) -> bool:
        """Whether ``name`` is set to something non-blank; its value is not kept."""
        return bool(self.env.get(name, "").strip())

    def value(self, name: str) -> str | None:
        """The variable's value, None when unset or blank."""
        found = self.env.get(name, "")
        return found if found.strip() else None

    def file(self, path: Path) -> bool:
        self._note(path)
        return path.is_file()

    def text(self, path: Path) -> str | None:
        """Up to ``READ_CAP`` bytes of a regular file (never a FIFO or a device, which could
        block or flood), None when there is none."""
        self._note(path)
        try:
            data, _cut = read_capped(path, READ_CAP)
        except OSError:
            return None
        return data.decode("utf-8", errors="replace")

    def _note(self, path: Path) -> None:
        text = str(path)
        if text not in self.files:
            self.files.append(text)

    def reading(self, state: AuthState, detail: str, fix: str | None = None) -> AuthReading:
        return AuthReading(state, detail, fix, tuple(self.files), tuple(self.variables))


def home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or "~").expanduser()


async def run_status(ctx: AuthContext, args: Sequence[str]) -> StatusResult:
    """The CLI's own status command, with nothing on stdin, in the fresh empty directory
    every process gets from ``run_process`` (named after its marker, so it is swept like a
    voice's if the council is killed while the command runs)."""
    # Here, not at the top: a council that finds no CLI checks no login and starts nothing.
    from .process import run_process

    result = await run_process(
        [ctx.path, *args],
        stdin=b"",
        env=ctx.env,
        timeout_s=ctx.timeout_s,
        max_stdout=64_000,
    )
    if result.outcome not in ("ok", "exit_nonzero"):
        return StatusResult(None, "", result.detail)
    return StatusResult(result.exit_code, result.stdout.decode("utf-8", errors="replace"))


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def watched_file(path: str, *, content: bool = False) -> WatchedFile:
    """How ``path`` is now: its times, size and inode (following a symlink to the file an
    upgrade replaces), and with ``content`` the digest of what it holds."""
    try:
        found = os.stat(path)
    except OSError:
        return WatchedFile(path=path)
    sha = None
    if content:
        try:
            data, _cut = read_capped(path, READ_CAP)
            sha = _sha(data)
        except OSError:
            sha = ""  # there, but not a regular file to read: still unlike any digest
    return WatchedFile(
        path=path, mtime=found.st_mtime, size=found.st_size, inode=found.st_ino, sha256=sha
    )


def watched_files(paths: Sequence[str], *, content: bool = False) -> list[WatchedFile]:
    return [watched_file(p, content=content) for p in paths]


def watched_var(name: str, env: Mapping[str, str], *, value: bool = False) -> AuthVar:
    """Whether ``name`` is set, and with ``value`` a digest of what it is set to; never of a
    credential's value (a name the redaction rule counts as secret), even digested."""
    found = env.get(name, "")
    is_set = bool(found.strip())
    keep = value and is_set and not secret_values({name: found})
    return AuthVar(name=name, set=is_set, sha256=_sha(found.encode()) if keep else None)


def watched_vars(
    names: Sequence[str], env: Mapping[str, str], *, values: bool = False
) -> list[AuthVar]:
    return [watched_var(n, env, value=values) for n in names]


def first_change(
    files: Sequence[WatchedFile], variables: Sequence[AuthVar], env: Mapping[str, str]
) -> str | None:
    """What changed first among the files and variables a check looked at, in words; None
    when each is as it was. Each is taken again the way it was recorded (with its content
    or value digest when one was kept)."""
    for was in files:
        now = watched_file(was.path, content=was.sha256 is not None)
        if now != was:
            if was.mtime is None:
                return f"{was.path} appeared"
            return f"{was.path} is gone" if now.mtime is None else f"{was.path} changed"
    for var in variables:
        if watched_var(var.name, env, value=var.sha256 is not None) != var:
            return f"${var.name} changed"
    return None


def unchanged(
    files: Sequence[WatchedFile], variables: Sequence[AuthVar], env: Mapping[str, str]
) -> bool:
    """Whether every file and variable a check looked at is as it was when it looked."""
    return first_change(files, variables, env) is None
