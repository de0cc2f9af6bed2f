"""One run id, one writer: a council holds an exclusive lock on its id for the whole run.

Checking that ``run-<id>.json`` does not exist and then writing it leaves a window in which
two councils started with the same id both pass the check and then overwrite each other.
The lock closes it: ``flock`` on ``.run-<id>.lock`` beside the run file is taken without
waiting before anything is written, held until the run ends, and released by the kernel
if the process dies, so a crashed council never leaves its id locked. The file is removed
when the run ends; a council that opened it just before checks after locking that the path
still names the file it locked, and refuses otherwise.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from .core.errors import RunFileError, RunIdError

__all__ = ["claim"]


@contextlib.contextmanager
def claim(run_file: Path) -> Iterator[None]:
    """Hold ``run_file``'s id for the block; ``RunIdError`` at once if another holds it.

    The lock file goes when the block ends, and so do directories made for it if the run
    wrote nothing (bad input found after the claim).
    """
    lock_path = run_file.with_name(f".{run_file.stem}.lock")
    made = [d for d in (run_file.parent, *run_file.parent.parents) if not d.exists()]
    try:
        run_file.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunFileError(f"cannot create {run_file.parent}: {exc}") from None
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError as exc:
        raise RunFileError(f"cannot lock run id at {lock_path}: {exc.strerror}") from None
    try:
        _lock(fd, lock_path, run_file)
        try:
            yield
        finally:
            # Removed while we still hold it: a council that opened the old file finds it
            # gone after locking (the inode check in _lock) and refuses, so no trace is left.
            with contextlib.suppress(OSError):
                os.unlink(lock_path)
            for directory in made:
                with contextlib.suppress(OSError):
                    directory.rmdir()  # only if nothing was written
    finally:
        os.close(fd)


def _lock(fd: int, lock_path: Path, run_file: Path) -> None:
    try:
        import fcntl
    except ImportError:  # no flock on this platform: the exists check is all there is
        return
    in_use = RunIdError(
        f"run id {run_file.stem.removeprefix('run-')!r} is in use by another council right "
        "now; pick another id"
    )
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise in_use from None
    try:
        same = os.stat(lock_path).st_ino == os.fstat(fd).st_ino
    except OSError:
        same = False
    if not same:
        raise in_use
