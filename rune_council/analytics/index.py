"""The run history of one or more rune dirs as digests, through an index of what was read.

The index (``<rune dir>/stats-index.json``) maps each JSON file in ``council/`` to its digest,
or to the reason it was skipped, under the key ``run_index`` keeps for every cache of run
files (size, modification time, inode, change time): only a file whose key still matches is
not read again, and an index planted from elsewhere never matches (see ``run_index``). One
that cannot be read whole, or was written by another version, is rebuilt from the run files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..core.errors import CouncilError
from ..core.paths import RuneDir
from ..run_index import (
    StatKey,
    read_index,
    scan,
    settled_before,
    stat_key,
    still_fresh,
    write_index,
)
from ..runs import load
from .digest import RunDigest, digest

INDEX_NAME = "stats-index.json"
# Bumped whenever a digest's meaning changes, so an old index is rebuilt, never misread.
INDEX_VERSION = 3  # 3: a council no voice answered is no_verdict, even in an old file
# Reasons for skipped files are shown to the user; one line each.
MAX_SKIP_REASON = 300


class Entry(StatKey):
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
    index, note = read_index(path, IndexFile)
    if index is None or index.version != INDEX_VERSION:
        return {}, note
    return index.entries, None


def _summarise(path: Path) -> tuple[RunDigest | None, str | None]:
    try:
        result = load(path, artifact=False)
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
    found = scan(rune_dir.council_dir)
    settled = settled_before()
    for name in sorted(found):
        st = found[name]
        entry = old.get(name)
        if entry is not None and still_fresh(entry, st, settled):
            out.reused += 1
        else:
            run, why = _summarise(rune_dir.council_dir / name)
            entry = Entry(**stat_key(st), run=run, skipped=why)
            out.read += 1
        new[name] = entry
        if entry.run is not None:
            out.runs.append(entry.run)
        else:
            out.skipped.append(Skipped(name, entry.skipped or "not a run file"))
    out.forgotten = len(set(old) - set(new))
    if use_index and (out.read or out.forgotten or not index_path.exists()) and found:
        note = write_index(index_path, IndexFile(version=INDEX_VERSION, entries=new))
        if note:
            out.notes.append(note)
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
