"""The run history of one or more rune dirs as digests, through an index of what was read.

The index (``<rune dir>/stats-index.json``) maps each JSON file in ``council/`` to its size,
modification time and digest, or to the reason it was skipped. A file whose size and
modification time still match is not read again (unless it changed in the last moments,
when a same-size rewrite could hide inside the timestamp's granularity); a new or changed
file is; an entry whose file is gone is dropped. The index is a cache: one that cannot be
read whole, or was written by another version, is rebuilt from the run files, and one that
cannot be written (a read-only directory) only costs the next pass its speed.

An index can arrive with a repository like any other file in ``.rune/``, and a planted one
could pair real run files with digests they do not hold. So an entry is also keyed on what
only this machine knows about the file: its inode and its change time, which the kernel sets
when the file is created here and nobody can set back. An index written anywhere else never
matches, and every file it describes is read again. A symlinked index is not read.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import CouncilError
from ..files import atomic_write_bytes
from ..paths import RuneDir
from ..runs import load
from ..safefile import read_capped
from .digest import RunDigest, digest

INDEX_NAME = "stats-index.json"
# Bumped whenever a digest's meaning changes, so an old index is rebuilt, never misread.
INDEX_VERSION = 3  # 3: a council no voice answered is no_verdict, even in an old file
# Far above an index of 100,000 runs; an index bigger than this is not ours.
MAX_INDEX_BYTES = 512_000_000
# A file modified this recently may be rewritten again within the file system's timestamp
# granularity with the same size (a live run's heartbeat), so its entry is never trusted.
RACY_S = 2.0
# Reasons for skipped files are shown to the user; one line each.
MAX_SKIP_REASON = 300


class Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    size: int = Field(ge=0)
    mtime_ns: int = Field(ge=0)
    # Set by the kernel when the file was made on this machine; a planted index cannot
    # know them, so its entries never match (see the module's note).
    ino: int = Field(default=0, ge=0)
    ctime_ns: int = Field(default=0, ge=0)
    run: RunDigest | None = None
    skipped: str | None = Field(default=None, max_length=MAX_SKIP_REASON)


class IndexFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int
    entries: dict[str, Entry] = Field(default_factory=dict)


@dataclass(frozen=True)
class Skipped:
    file: str
    reason: str


@dataclass
class Collected:
    """Every run digest found, the files that were skipped, and what the index saved."""

    runs: list[RunDigest] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    reused: int = 0
    read: int = 0
    forgotten: int = 0
    notes: list[str] = field(default_factory=list)


def _read_index(path: Path) -> tuple[dict[str, Entry], str | None]:
    try:
        raw, cut = read_capped(path, MAX_INDEX_BYTES, follow_symlinks=False)
    except FileNotFoundError:
        return {}, None
    except OSError as exc:
        return {}, f"index {path} unreadable ({exc.strerror}); rebuilt"
    if cut:
        return {}, f"index {path} is too large; rebuilt"
    try:
        # Parsed and validated in one go: the shape is fixed, so pydantic's own parser
        # (with its depth limit) refuses anything else, and it is several times faster.
        index = IndexFile.model_validate_json(raw)
    except ValidationError:
        return {}, f"index {path} is not one this version wrote; rebuilt"
    if index.version != INDEX_VERSION:
        return {}, None
    return index.entries, None


def _summarise(path: Path) -> tuple[RunDigest | None, str | None]:
    try:
        result = load(path)
    except CouncilError as exc:
        # The reason names the file already shown beside it.
        return None, str(exc).replace(str(path), path.name, 1)[:MAX_SKIP_REASON]
    try:
        return digest(result, path.stem.removeprefix("run-")), None
    except ValidationError as exc:
        # A file the contract accepts but no real council writes (thousands of voices).
        return None, f"{path} holds more than a council run: {exc.errors()[0]['msg']}"[
            :MAX_SKIP_REASON
        ]


def _scan(council: Path) -> dict[str, os.stat_result]:
    found: dict[str, os.stat_result] = {}
    try:
        entries = list(os.scandir(council))
    except FileNotFoundError:
        return found
    for item in entries:
        if not item.name.endswith(".json") or item.name.startswith("."):
            continue
        try:
            if item.is_symlink() or not item.is_file(follow_symlinks=False):
                continue
            found[item.name] = item.stat(follow_symlinks=False)
        except OSError:
            continue
    return found


def collect_one(rune_dir: RuneDir, *, use_index: bool = True) -> Collected:
    """The digests of every JSON file in ``<rune dir>/council``, reusing the index."""
    out = Collected()
    index_path = rune_dir.root / INDEX_NAME
    old: dict[str, Entry] = {}
    if use_index:
        old, note = _read_index(index_path)
        if note:
            out.notes.append(note)
    new: dict[str, Entry] = {}
    found = _scan(rune_dir.council_dir)
    settled_before = time.time_ns() - int(RACY_S * 1e9)
    for name in sorted(found):
        st = found[name]
        entry = old.get(name)
        if (
            entry is not None
            and entry.size == st.st_size
            and entry.mtime_ns == st.st_mtime_ns
            and entry.ino == st.st_ino
            and entry.ctime_ns == st.st_ctime_ns
            and st.st_mtime_ns < settled_before
        ):
            out.reused += 1
        else:
            run, why = _summarise(rune_dir.council_dir / name)
            entry = Entry(
                size=st.st_size,
                mtime_ns=st.st_mtime_ns,
                ino=st.st_ino,
                ctime_ns=st.st_ctime_ns,
                run=run,
                skipped=why,
            )
            out.read += 1
        new[name] = entry
        if entry.run is not None:
            out.runs.append(entry.run)
        else:
            out.skipped.append(Skipped(name, entry.skipped or "not a run file"))
    out.forgotten = len(set(old) - set(new))
    if use_index and (out.read or out.forgotten or not index_path.exists()) and found:
        payload = IndexFile(version=INDEX_VERSION, entries=new).model_dump_json(
            exclude_defaults=True
        )
        try:
            atomic_write_bytes(index_path, payload.encode("utf-8"))
        except (OSError, CouncilError) as exc:
            out.notes.append(f"index not saved at {index_path}: {exc}")
    return out


def collect(rune_dirs: list[RuneDir], *, use_index: bool = True) -> Collected:
    """The run history of several rune dirs together."""
    total = Collected()
    for rune_dir in rune_dirs:
        part = collect_one(rune_dir, use_index=use_index)
        total.runs += part.runs
        total.skipped += [
            Skipped(str(rune_dir.council_dir / s.file), s.reason) for s in part.skipped
        ]
        total.reused += part.reused
        total.read += part.read
        total.forgotten += part.forgotten
        total.notes += part.notes
    return total
