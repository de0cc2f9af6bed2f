"""Reading a file someone else may have planted: regular files only, never more than a cap.

``Path.read_bytes`` on a FIFO blocks until a writer appears, on ``/dev/zero`` grows until
memory runs out, and on a sparse multi-gigabyte file reads all of it before anyone can cut
it. Here the file is opened without blocking, must be a regular file, and is read only up
to the cap (one byte more, to know whether it was cut).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from .core import safejson

__all__ = [
    "NotRegularFile",
    "bounded_lines",
    "is_plain_file",
    "is_symlink",
    "jsonl_objects",
    "read_capped",
    "read_capped_text",
    "read_if_present",
    "too_long",
]

_CHUNK = 1 << 20


class NotRegularFile(OSError):
    """The path names a FIFO, device, socket or directory: nothing is read from it."""


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


def read_capped(
    path: str | os.PathLike[str], cap: int, *, follow_symlinks: bool = True
) -> tuple[bytes, bool]:
    """(up to ``cap`` bytes of the file, whether there was more).

    Raises ``FileNotFoundError`` and other ``OSError`` as ``open`` does, and
    ``NotRegularFile`` (an ``OSError`` whose ``strerror`` says what the path is) for
    anything but a regular file. With ``follow_symlinks=False`` a symlink is one of those:
    the refusal is made by ``open`` itself, so the link cannot be swapped in after a check.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        # O_NOFOLLOW on a symlink fails with ELOOP (EMLINK on FreeBSD).
        if not follow_symlinks and exc.errno in (errno.ELOOP, errno.EMLINK) and is_symlink(path):
            raise NotRegularFile(errno.ELOOP, "a symlink, not a regular file", str(path)) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(errno.EINVAL, f"{_kind(mode)}, not a regular file", str(path))
        chunks: list[bytes] = []
        left = cap + 1
        while left > 0:
            chunk = os.read(fd, min(left, _CHUNK))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    return data[:cap], len(data) > cap


def read_if_present(
    path: Path, cap: int, error: Callable[[str], Exception]
) -> tuple[bytes, bool] | None:
    """``read_capped`` for a file that may be absent (None). Every other failure, a FIFO or
    a directory in its place included, raises ``error`` with one line naming the path and
    the reason, so each caller reports it in its own error class; what a cut means (an
    error, or a file that is not ours) stays the caller's to decide."""
    try:
        return read_capped(path, cap)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise error(f"cannot read {path}: {exc.strerror or exc}") from None


def is_symlink(path: str | os.PathLike[str]) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return False


def is_plain_file(path: str | os.PathLike[str]) -> bool:
    """A regular file in its own right, not a symlink to one: the only kind of file a reader
    of untrusted files lists (the read itself refuses the rest, race-free)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def read_capped_text(path: Path, cap: int) -> str:
    """UTF-8 text of a regular file no larger than ``cap`` bytes (``ValueError`` if larger)."""
    data, cut = read_capped(path, cap)
    if cut:
        raise ValueError(f"{path} is larger than {cap} bytes")
    return data.decode("utf-8")


# --------------------------------------------------------------------------- line by line
# An items file or a dataset is read a line at a time, so a file of any size costs one
# line's memory, and a bad line is told by its number while the rest are still read.


def too_long(cap: int) -> str:
    return f"longer than {cap} bytes"


def bounded_lines(fh: BinaryIO, cap: int) -> Iterator[tuple[int, bytes | None]]:
    """(line number, bytes) for every line of ``fh``; None for a line over ``cap`` bytes,
    whose rest is skipped in bounded chunks rather than read into memory."""
    number = 0
    while True:
        chunk = fh.readline(cap + 1)
        if not chunk:
            return
        number += 1
        if len(chunk) > cap and not chunk.endswith(b"\n"):
            while True:
                rest = fh.readline(_CHUNK)
                if not rest or rest.endswith(b"\n"):
                    break
            yield number, None
            continue
        yield number, chunk


def jsonl_objects(fh: BinaryIO, cap: int) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """Every line of a JSONL file that is not blank, by its number: the JSON object it
    holds, or why it holds none (too long, not UTF-8, not JSON, JSON but not an object)."""
    for number, raw in bounded_lines(fh, cap):
        if raw is None:
            yield number, too_long(cap)
            continue
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            yield number, "not UTF-8 text"
            continue
        try:
            value = safejson.loads(text, max_bytes=cap, what=f"line {number}")
        except safejson.UnreadableJSON as exc:
            yield number, f"not JSON: {exc}"
            continue
        if not isinstance(value, dict):
            yield number, f"not a JSON object but a {type(value).__name__}"
            continue
        yield number, value
