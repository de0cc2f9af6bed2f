"""Whole-file, atomic writes: the one way rune-council puts a file on disk.

A reader polling a file (a run file, the detection cache) must never see half a document,
so each write goes to a temporary file in the same directory, then is renamed over the
target. The rename replaces a symlink rather than following it, and we refuse outright to
write through one. The temporary file is fsynced first unless the caller says the state is
transient: a run file is rewritten on every status change, and only its final state needs
to survive a power cut (on this disk an fsync costs several milliseconds, the rest of a
rewrite well under one).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from .core.errors import RunFileError, file_error


def atomic_write_json(path: Path, data: Any) -> None:
    payload = json.dumps(data, indent=2, ensure_ascii=False).encode("utf-8") + b"\n"
    atomic_write_bytes(path, payload)


def atomic_write_bytes(path: Path, payload: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``payload`` in one step; a wrong path is a ``RunFileError``, a
    failing disk a ``StorageError``. ``durable=False`` skips the fsync: readers still never
    see a torn file, but a crash of the machine may lose this version."""
    directory = path.parent
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise file_error(f"cannot create {directory}", exc) from exc
    if path.is_symlink():
        raise RunFileError(f"refusing to write through a symlink: {path}")
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise file_error(f"cannot write {path}", exc) from exc
    if mode is not None and not stat.S_ISREG(mode):
        # Replacing is only for our own regular files: run as root, a rename over /dev/null
        # or a FIFO would put a plain file where the device or pipe was.
        raise RunFileError(f"refusing to replace {path}: it is not a regular file")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise file_error(f"cannot write in {directory}", exc) from exc
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise file_error(f"cannot write {path}", exc) from exc
        raise
