"""``results.jsonl``: one line per item as it ends, and the running counts for the summary.

Each line is written whole and flushed as soon as its item ends, so the file is readable
at any moment and a batch stopped by Ctrl-C leaves every line it wrote complete. Nothing
keeps the rows once written: the summary needs only the counts in ``Tally`` and the first
few problems.

The file lives in ``.rune/batch/``, where a cloned repository can have put anything first:
a new batch replaces the name with a file of its own (a symlink there is refused, a hard
link or a FIFO is replaced, never written into), and a reader takes each line as data,
bounded and checked field by field.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal, TextIO

from pydantic import TypeAdapter, ValidationError

from ..core.contract import CouncilResult
from ..core.errors import RunFileError, file_error
from ..runs import seconds_between
from ..safefile import is_symlink, read_capped

Status = Literal["complete", "no_verdict", "failed", "cancelled", "busy", "invalid"]
# complete: the council finished with a verdict (now or in an earlier run that still verifies)
# no_verdict: it ran to its end, but no voice's answer counted: nothing was decided
# failed: it raised, or an earlier run failed and --retry-failed was not given
# cancelled: the batch was stopped while it ran; the next run picks it up
# busy: another council holds its run id right now; left alone
# invalid: the line is not an item; it never ran
PROBLEMS_SHOWN = 20
# A results file of a million items is far smaller; a bigger one is not a results file.
MAX_RESULTS_BYTES = 512_000_000
# One row is a few hundred bytes; its error text is the longest part.
MAX_ROW_BYTES = 64_000


@dataclass(frozen=True)
class Row:
    """One item's outcome, as written to ``results.jsonl``."""

    id: str | None
    line: int
    status: Status
    stamp: str | None = None
    consensus: int | None = None
    needs_decision: bool | None = None
    voices_valid: int | None = None
    duration_s: float | None = None
    run_file: str | None = None
    resumed: bool = False
    error: str | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Row:
        """A row from one line; ``ValueError`` (one line saying why) if it is not a row."""
        if len(text) > MAX_ROW_BYTES:
            raise ValueError(f"longer than {MAX_ROW_BYTES} characters")
        try:
            # pydantic's own parser bounds the nesting; strict: no "1" taken for 1.
            return _ROW.validate_json(text, strict=True)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "row"
            raise ValueError(f"not a results row: {where}: {first['msg']}") from None


def row_for(result: CouncilResult, line: int, run_file: Path, *, resumed: bool = False) -> Row:
    """The row for a council that ran to an end (any end) and wrote ``run_file``."""
    shown = result.shown_status()
    status: Status = shown if shown in ("complete", "no_verdict", "cancelled") else "failed"
    error = None
    if status == "no_verdict":
        error = "no voice produced a usable answer; the run file's notes say why"
    elif status != "complete":
        error = result.notes[-1] if result.notes else f"the run ended {result.status}"
    return Row(
        id=result.id,
        line=line,
        status=status,
        stamp=result.decorrelation,
        consensus=len(result.agreement.consensus_claims),
        needs_decision=result.needs_decision,
        voices_valid=result.voices_valid,
        duration_s=seconds_between(result.started_at, result.finished_at),
        run_file=str(run_file),
        resumed=resumed,
        error=error,
    )


@dataclass
class Tally:
    """Counts over every row so far, and the first problems by line."""

    by_status: Counter[str] = field(default_factory=Counter)
    by_stamp: Counter[str] = field(default_factory=Counter)
    resumed: int = 0
    needs_decision: int = 0
    problems: list[Row] = field(default_factory=list)

    def add(self, row: Row) -> None:
        self.by_status[row.status] += 1
        if row.resumed:
            self.resumed += 1
        if row.status == "complete":
            self.by_stamp[row.stamp or "no stamp"] += 1
            if row.needs_decision:
                self.needs_decision += 1
        elif len(self.problems) < PROBLEMS_SHOWN:
            self.problems.append(row)

    @property
    def total(self) -> int:
        return sum(self.by_status.values())

    @property
    def all_complete(self) -> bool:
        return self.total == self.by_status["complete"]


class ResultsFile:
    """The results of one batch run, written line by line (the file is replaced whole
    at the start: a run's file covers every line of the items file it read)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: TextIO | None = None

    def __enter__(self) -> ResultsFile:
        directory = self.path.parent
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise file_error(f"cannot create {directory}", exc) from None
        if is_symlink(self.path):
            raise RunFileError(f"refusing to write through a symlink: {self.path}")
        # A file of our own, renamed over the name: whatever was there (a link swapped in
        # after the check included) is replaced, never opened and truncated.
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=directory)
        except OSError as exc:
            raise file_error(f"cannot write in {directory}", exc) from None
        try:
            os.replace(tmp, self.path)
        except OSError as exc:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise file_error(f"cannot write {self.path}", exc) from None
        self._fh = os.fdopen(fd, "w", encoding="utf-8")
        return self

    def write(self, row: Row) -> None:
        assert self._fh is not None, "results file not open"
        self._fh.write(row.to_json() + "\n")
        self._fh.flush()

    def __exit__(self, *exc: object) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


_ROW: TypeAdapter[Row] = TypeAdapter(Row)


def read_rows(path: Path) -> list[Row]:
    """Every row of a results file (for tests and tools; a batch never reads its own).

    The file may not be the batch's own: a symlink is refused, and a line that is not a row
    is a ``RunFileError`` naming the line, never an exception from deep inside the parser.
    """
    try:
        raw, cut = read_capped(path, MAX_RESULTS_BYTES, follow_symlinks=False)
    except OSError as exc:
        raise file_error(f"cannot read {path}", exc) from None
    if cut:
        raise RunFileError(f"{path} is larger than {MAX_RESULTS_BYTES} bytes; not read")
    rows: list[Row] = []
    for number, line in enumerate(raw.decode("utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(Row.from_json(line))
        except ValueError as exc:
            raise RunFileError(f"{path}:{number}: {exc}") from None
    return rows
