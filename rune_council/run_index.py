"""A cache of what this program read from each run file, shared by ``list`` and ``stats``.

An index sits beside ``council/`` and maps each file name to what was read from it, keyed on
the file's size, modification time, inode and change time. Only a file whose key still
matches is not read again; a new or changed file is, and an entry whose file is gone is
dropped. The inode and change time are set by the kernel when the file is made or touched on
this machine and nobody can set them back, so an index written anywhere else (planted with
a cloned repository, pairing real run files with rows they do not hold) never matches, and
every file it describes is read again: an index is never believed more than the file.

An index is only a cache: one that is a symlink, too large, of another shape or version is
ignored and rebuilt from the run files, and one that cannot be written only costs the next
pass its speed. A file changed in the last moments is never cached, since a same-size
rewrite could hide inside the timestamp's granularity (a live run's heartbeat).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .core.errors import CouncilError
from .files import atomic_write_bytes
from .safefile import read_capped

# Far above an index of 100,000 runs; an index bigger than this is not ours.
MAX_INDEX_BYTES = 512_000_000
# A file modified this recently may be rewritten again with the same size and timestamp.
RACY_S = 2.0


class StatKey(BaseModel):
    """What the file system says about a file; every index entry starts with it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    size: int = Field(ge=0)
    mtime_ns: int = Field(ge=0)
    # Set by the kernel on this machine; a planted index cannot know them.
    ino: int = Field(default=0, ge=0)
    ctime_ns: int = Field(default=0, ge=0)


def stat_key(st: os.stat_result) -> dict[str, int]:
    """The key fields of an entry for a file with this stat."""
    return {
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "ino": st.st_ino,
        "ctime_ns": st.st_ctime_ns,
    }


def settled_before() -> int:
    """A file modified at or after this (ns) is too fresh to trust or to cache."""
    return time.time_ns() - int(RACY_S * 1e9)


def still_fresh(entry: StatKey, st: os.stat_result, settled: int) -> bool:
    """Whether ``entry`` still describes the file with this stat."""
    return (
        entry.size == st.st_size
        and entry.mtime_ns == st.st_mtime_ns
        and entry.ino == st.st_ino
        and entry.ctime_ns == st.st_ctime_ns
        and st.st_mtime_ns < settled
    )


def scan(council: Path, *, prefix: str = "") -> dict[str, os.stat_result]:
    """Every plain ``<prefix>*.json`` file in ``council`` (no symlinks) with its stat."""
    found: dict[str, os.stat_result] = {}
    try:
        entries = list(os.scandir(council))
    except (FileNotFoundError, NotADirectoryError):
        return found
    for item in entries:
        name = item.name
        if not name.endswith(".json") or name.startswith(".") or not name.startswith(prefix):
            continue
        try:
            if item.is_symlink() or not item.is_file(follow_symlinks=False):
                continue
            found[name] = item.stat(follow_symlinks=False)
        except OSError:
            continue
    return found


Doc = TypeVar("Doc", bound=BaseModel)


def read_index(path: Path, model: type[Doc]) -> tuple[Doc | None, str | None]:
    """(the index, or None when it must be rebuilt; a note for the user, if any).

    The whole document is validated against ``model`` in one pass (pydantic's own parser,
    with its depth limit); anything that does not fit is not ours and is rebuilt.
    """
    try:
        raw, cut = read_capped(path, MAX_INDEX_BYTES, follow_symlinks=False)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"index {path} unreadable ({exc.strerror}); rebuilt"
    if cut:
        return None, f"index {path} is too large; rebuilt"
    try:
        return model.model_validate_json(raw), None
    except ValidationError:
        return None, f"index {path} is not one this version wrote; rebuilt"


def write_index(path: Path, doc: BaseModel) -> str | None:
    """Save the index in one step (never through a symlink); a note when it could not be."""
    payload = doc.model_dump_json(exclude_defaults=True).encode("utf-8")
    if len(payload) > MAX_INDEX_BYTES:
        return f"index not saved at {path}: larger than {MAX_INDEX_BYTES} bytes"
    try:
        # A cache: losing the last version to a crash costs one rebuild, not data.
        atomic_write_bytes(path, payload, durable=False)
    except (OSError, CouncilError) as exc:
        return f"index not saved at {path}: {exc}"
    return None
