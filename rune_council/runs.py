"""Reading run files that any process wrote: find, load, list, and tell live from abandoned.

A run file names the process that writes it (``orchestrator``: pid, host, a heartbeat
refreshed every few seconds). On the same host the pid settles whether the writer is alive;
from another host only the heartbeat's age can, so a silent remote run is declared
abandoned only after many missed heartbeats.

A run file is data, never instructions: it can arrive with a cloned repository, so every
reader opens it without following a symlink, and a value in it that leads to an action (the
pid to inspect, the marker whose leftover processes are killed and whose working directories
are removed) is used only when it has the exact shape this program writes (``shapes``), and
then only on processes and directories that prove to be this run's themselves.
"""

from __future__ import annotations

import datetime as dt
import errno
import hashlib
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .core import safejson, shapes
from .core.errors import RunFileError, file_error
from .core.paths import RuneDir
from .core.safetext import one_line
from .run_index import StatKey, read_index, scan, settled_before, stat_key, still_fresh, write_index
from .safefile import NotRegularFile, is_plain_file, is_symlink, read_capped

if TYPE_CHECKING:
    # A listing answered by its index never builds the contract's models; ``load`` does.
    from .core.contract import ArtifactFile, CouncilResult, Orchestrator

# Six missed heartbeats (they come every 5 s) before a run on another host counts as gone.
REMOTE_STALE_AFTER_S = 30.0
# A heartbeat this old from a live pid on this host is worth a warning, not a verdict: a
# blocking subagent callable can hold the event loop for minutes.
LOCAL_STALL_WARN_S = 20.0
# Statuses of a run that has not ended; its writer's liveness still matters.
UNFINISHED = ("queued", "running")
# What a reader is told beside ``no_verdict``.
NO_VERDICT_WHY = "no voice produced a usable answer, so nothing was decided"
# Slack between a process starting and it writing ``started_at``; a pid whose process began
# later than that has been reused by something else.
PID_REUSE_SLACK_S = 2.0
# Run files come from anywhere (a shared directory, a download); bigger than any real one.
MAX_RUN_FILE_BYTES = safejson.DEFAULT_MAX_BYTES


def locate(ref: str, rune_dir: str | os.PathLike[str] | None = None) -> Path:
    """The run file for a run id, or ``ref`` itself when it reads as a path.

    Anything with a path separator is a path; so is an existing ``*.json`` file. Otherwise it
    is a run id, checked for safety before it touches the file system.
    """
    if os.sep in ref or "/" in ref or (ref.endswith(".json") and Path(ref).is_file()):
        return Path(ref).absolute()
    return RuneDir.resolve(rune_dir).run_file(ref)


def is_plain_run_file(path: Path) -> bool:
    """Whether a reader may look at ``path`` at all: a regular file, not a symlink to one.

    Every door that lists or serves run files asks this one question; the read itself
    (``read_bytes``) refuses a symlink again when it opens the file, so a link swapped in
    after this check is refused all the same.
    """
    return is_plain_file(path)


def read_bytes(path: Path) -> bytes:
    """A run file's bytes, capped; every failure is one ``RunFileError`` line.

    A symlink is refused: a repository could ship ``.rune/council/run-x.json`` pointing at
    any file of the user's, and the run file's contents are shown by ``show`` and served.
    """
    try:
        raw, cut = read_capped(path, MAX_RUN_FILE_BYTES, follow_symlinks=False)
    except FileNotFoundError:
        raise RunFileError(f"no run file at {path}") from None
    except NotRegularFile as exc:
        if exc.errno == errno.ELOOP and is_symlink(path):
            raise RunFileError(
                f"{path} is a symlink; run files are read only as plain files"
            ) from None
        raise file_error(f"cannot read {path}", exc) from None
    except OSError as exc:
        raise file_error(f"cannot read {path}", exc) from None
    if cut:
        raise RunFileError(f"{path} is larger than {MAX_RUN_FILE_BYTES} bytes; not read")
    return raw


def load(path: Path, *, artifact: bool = True) -> CouncilResult:
    """Parse a run file; every failure is one ``RunFileError`` line saying what is wrong.

    A file that keeps its artifact in a sidecar (2.8) gets it back from there, checked
    against the length and digest the file records, so every reader sees the artifact where
    an older file had it inline. ``artifact=False`` skips that read, for readers that never
    look at the artifact and read the file again at each change (``watch``, the event
    stream, ``list``). A sidecar that is missing or does not match leaves the artifact out,
    says so in one note and in ``artifact_problem`` (which ``verify`` reports); the rest of
    the run is still read.
    """
    from .core.contract import CouncilResult

    raw = read_bytes(path)
    try:
        data = safejson.loads(raw, max_bytes=MAX_RUN_FILE_BYTES, what=str(path))
    except safejson.UnreadableJSON as exc:
        raise RunFileError(f"{path} is not JSON we can read: {exc}") from None
    problem = _put_back_artifact(data, path, read=artifact)
    try:
        result = CouncilResult.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "document"
        raise RunFileError(
            f"{path} is not a council run file: {where}: {first['msg']}"
            + (f" (and {exc.error_count() - 1} more problem(s))" if exc.error_count() > 1 else "")
        ) from None
    if problem is not None:
        result._artifact_problem = problem
        result.notes.append(f"read: {problem}; the run is shown without its artifact")
    return result


# Bigger than any artifact a council reads (a path is read up to 2 MB; inline text is
# bounded by the request it came in), as the run file itself is.
MAX_ARTIFACT_BYTES = MAX_RUN_FILE_BYTES


def _put_back_artifact(data: object, path: Path, *, read: bool) -> str | None:
    """Put the artifact of a 2.8 run file back where an older file had it, in place; why it
    could not be, if so. Unread (``read=False``) or unreadable, an inline request artifact
    stays the empty text the writer left in its place."""
    if not isinstance(data, dict) or data.get("artifact_text") is not None:
        return None
    from .core.contract import ArtifactFile

    try:
        record = ArtifactFile.model_validate(data.get("artifact_file"))
    except ValidationError:
        return None  # absent, or malformed: the document's own validation says which
    text, problem = read_artifact_sidecar(path, record) if read else (None, None)
    data["artifact_text"] = text
    request = data.get("request")
    given = request.get("artifact") if isinstance(request, dict) else None
    if record.inline and isinstance(given, dict) and given.get("text") in ("", None):
        given["text"] = "" if text is None else text
    return problem


def read_artifact_sidecar(path: Path, record: ArtifactFile) -> tuple[str | None, str | None]:
    """(the artifact the run file at ``path`` keeps in its sidecar, or None; why not).

    The sidecar's name is derived from ``path`` alone, never from the file's content. It is
    read as a plain file only (a symlink is refused when it is opened), never beyond the
    length the run file records, and taken only when its digest is the recorded one."""
    from .recorder import artifact_sidecar

    sidecar = artifact_sidecar(path)
    name = sidecar.name
    if record.bytes > MAX_ARTIFACT_BYTES:
        return None, f"artifact sidecar {name} is said to hold {record.bytes} bytes; not read"
    try:
        raw, cut = read_capped(sidecar, record.bytes, follow_symlinks=False)
    except FileNotFoundError:
        return None, f"artifact sidecar {name} is missing"
    except NotRegularFile as exc:
        return None, f"artifact sidecar {name} is {exc.strerror}; it is read only as a plain file"
    except OSError as exc:
        return None, f"artifact sidecar {name} cannot be read: {exc.strerror or exc}"
    if cut or len(raw) != record.bytes or hashlib.sha256(raw).hexdigest() != record.sha256:
        return None, (
            f"artifact sidecar {name} does not match its digest: the run file records "
            f"{record.bytes} bytes, sha256 {record.sha256[:16]}..."
        )
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError:
        return None, f"artifact sidecar {name} is not UTF-8 text"


def parse_time(stamp: str | None) -> dt.datetime | None:
    if not stamp:
        return None
    try:
        value = dt.datetime.fromisoformat(stamp)
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def seconds_between(start: str | None, end: str | None) -> float | None:
    a, b = parse_time(start), parse_time(end)
    if a is None or b is None:
        return None
    return (b - a).total_seconds()


@dataclass(frozen=True)
class Liveness:
    """What can be said about the process writing a run.

    ``finished``: the run has a final status. ``alive``: its writer is known to be running.
    ``gone``: its writer is known to be dead, so the run will never finish. ``unknown``: no
    way to tell yet (another host with a recent heartbeat, or no orchestrator recorded).
    """

    state: Literal["finished", "alive", "gone", "unknown"]
    detail: str = ""
    heartbeat_age_s: float | None = None


def _process_state(pid: int, started_at: str) -> tuple[bool, str]:
    """(alive, why) for a pid on this host, seeing through zombies and reused pids."""
    import psutil

    if not shapes.is_pid(pid):
        # No process of ours has that pid (0, 1, negative: a group, or beyond any pid).
        return False, f"the run file names no usable orchestrator pid ({one_line(repr(pid), 40)})"
    try:
        proc = psutil.Process(pid)
        status = proc.status()
        created = proc.create_time()
    except psutil.NoSuchProcess:
        return False, f"process {pid} no longer exists"
    except psutil.AccessDenied:
        return True, f"process {pid} exists (not ours to inspect)"
    if status == psutil.STATUS_ZOMBIE:
        return False, f"process {pid} has exited"
    began = parse_time(started_at)
    if began is not None and created > began.timestamp() + PID_REUSE_SLACK_S:
        return False, f"process {pid} exited (its pid now belongs to another process)"
    return True, f"process {pid} is running"


def _reap_leftovers(orch: Orchestrator) -> str:
    """Kill what a dead council's voices left running and remove their working directories;
    a note for the detail, if any.

    Nothing here trusts the file: a marker of another shape stops everything; with a
    well-formed one, a process is killed only if it is this user's and carries the marker
    itself, and a directory is removed only if its name has the shape of one of the run's
    working directories and it is this user's own, directly in the temp root.
    """
    marker = orch.voice_marker
    if not shapes.is_run_marker(marker) or not shapes.is_pid(orch.pid):
        return ""
    from .runtimes import lineage
    from .runtimes.process import remove_leftover_dirs

    assert marker is not None  # is_run_marker says so
    recorded = [(p.pid, p.started) for p in orch.voice_processes]
    killed = lineage.kill_recorded(marker, recorded)
    began = parse_time(orch.started_at)
    try:
        not_before = began.timestamp() if began else None
    except (OverflowError, OSError, ValueError):
        not_before = None
    killed += lineage.kill_marked(marker, not_before=not_before)
    remove_leftover_dirs(marker)
    return f"; {killed} voice process(es) it left running were killed" if killed else ""


def liveness(
    result: CouncilResult,
    *,
    now: dt.datetime | None = None,
    host: str | None = None,
) -> Liveness:
    if result.status not in UNFINISHED:
        return Liveness("finished", result.status)
    orch: Orchestrator | None = result.orchestrator
    if orch is None:
        return Liveness("unknown", "the run file records no orchestrator")
    now = now or dt.datetime.now(dt.UTC)
    beat = parse_time(orch.heartbeat_at)
    age = (now - beat).total_seconds() if beat else None
    here = host or socket.gethostname()
    # The host name is the file's word; shown, it is one short line.
    where = one_line(orch.host, 80)
    if orch.host == here:
        alive, why = _process_state(orch.pid, orch.started_at)
        if not alive:
            why += _reap_leftovers(orch)
        return Liveness("alive" if alive else "gone", f"{why} on {where}", age)
    if age is not None and age > REMOTE_STALE_AFTER_S:
        return Liveness(
            "gone",
            f"orchestrator on host {where} (pid {one_line(str(orch.pid), 24)}) sent no "
            f"heartbeat for {age:.0f} s",
            age,
        )
    return Liveness("unknown", f"orchestrator runs on another host ({where})", age)


@dataclass(frozen=True)
class RunSummary:
    """One row of ``rune council list``."""

    path: Path
    run_id: str
    question: str
    status: str
    decorrelation: str | None
    voices_valid: int
    voices_requested: int
    started_at: str
    duration_s: float | None
    problem: str | None = None
    partial: bool = False  # the deadline ended the wait (contract 2.4)
    halted: bool = False  # the deliberation stopped on divergence for a person to decide

    @property
    def stamp(self) -> str | None:
        """The stamp as shown in a listing, marked when the council was partial."""
        if self.decorrelation is None:
            return None
        return f"{self.decorrelation} (partial)" if self.partial else self.decorrelation


def displayed_status(result: CouncilResult, *, host: str | None = None) -> tuple[str, str]:
    """The status a reader is shown: a running run whose writer is gone is abandoned.

    ``list`` and ``show`` both go through this, so they never disagree about one run.
    """
    if result.status in UNFINISHED:
        live = liveness(result, host=host)
        if live.state == "gone":
            return "abandoned", f"{live.detail}; the run will never finish"
    status = result.shown_status()
    if status == "no_verdict":
        return status, NO_VERDICT_WHY
    return status, ""


def summarise(path: Path, *, host: str | None = None) -> RunSummary:
    return _summarise(path, host=host)[0]


def _summarise(path: Path, *, host: str | None = None) -> tuple[RunSummary, bool]:
    """(the row, whether it may be cached): a run that has not ended may be abandoned the
    moment its writer dies, so its row is worked out afresh at every read. An unreadable
    file's row is not cached either: its reason names the path it was reached by."""
    try:
        result = load(path, artifact=False)
    except RunFileError as exc:
        run_id = path.stem.removeprefix("run-")
        return RunSummary(path, run_id, "", "unreadable", None, 0, 0, "", None, str(exc)), False
    status, _ = displayed_status(result, host=host)
    end = result.finished_at
    if end is None and status in UNFINISHED:
        end = dt.datetime.now(dt.UTC).isoformat()
    row = RunSummary(
        path=path,
        # The name is what every command resolves; an id written inside could be anything.
        run_id=path.stem.removeprefix("run-"),
        question=result.question,
        status=status,
        decorrelation=result.decorrelation,
        voices_valid=result.voices_valid,
        voices_requested=result.voices_requested,
        started_at=result.started_at,
        duration_s=seconds_between(result.started_at, end) if end else None,
        partial=result.partial is not None,
        halted=result.deliberation is not None and result.deliberation.halted,
    )
    return row, result.status not in UNFINISHED


LIST_INDEX_NAME = "list-index.json"
# Bumped whenever a row's meaning changes, so an old index is rebuilt, never misread.
LIST_INDEX_VERSION = 1


class _Row(StatKey):
    """A finished run's row as ``list`` shows it, under the key of the file it came from."""

    question: str
    status: str
    decorrelation: str | None = None
    voices_valid: int = 0
    voices_requested: int = 0
    started_at: str = ""
    duration_s: float | None = None
    problem: str | None = None
    partial: bool = False
    halted: bool = False


class _ListIndex(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int
    rows: dict[str, _Row] = Field(default_factory=dict)


def _from_row(path: Path, row: _Row) -> RunSummary:
    return RunSummary(
        path=path,
        run_id=path.stem.removeprefix("run-"),
        question=row.question,
        status=row.status,
        decorrelation=row.decorrelation,
        voices_valid=row.voices_valid,
        voices_requested=row.voices_requested,
        started_at=row.started_at,
        duration_s=row.duration_s,
        problem=row.problem,
        partial=row.partial,
        halted=row.halted,
    )


def _to_row(st: os.stat_result, row: RunSummary) -> _Row:
    return _Row(
        **stat_key(st),
        question=row.question,
        status=row.status,
        decorrelation=row.decorrelation,
        voices_valid=row.voices_valid,
        voices_requested=row.voices_requested,
        started_at=row.started_at,
        duration_s=row.duration_s,
        problem=row.problem,
        partial=row.partial,
        halted=row.halted,
    )


def list_runs(rune_dir: RuneDir, limit: int | None = None) -> list[RunSummary]:
    """Runs in ``<rune dir>/council``, newest first by start time; unreadable files last.

    Every door's listing (``list``, the web view, MCP ``list_runs``) comes through here. A
    finished run's row is kept in ``<rune dir>/list-index.json`` (see ``run_index``), so
    only new or changed files are read; a run that has not ended is always read again.
    """
    directory = rune_dir.council_dir
    found = scan(directory, prefix="run-")
    if not found:
        return []
    index_path = rune_dir.root / LIST_INDEX_NAME
    index, _ = read_index(index_path, _ListIndex)
    old = index.rows if index is not None and index.version == LIST_INDEX_VERSION else {}
    new: dict[str, _Row] = {}
    changed = index is None or index.version != LIST_INDEX_VERSION
    settled = settled_before()
    # Sorted on keys alone; only the rows shown become RunSummary objects with a path.
    keyed: list[tuple[tuple[bool, float, float], str, RunSummary | _Row]] = []
    for name, st in found.items():
        cached = old.get(name)
        row: RunSummary | _Row
        if cached is not None and still_fresh(cached, st, settled):
            row = new[name] = cached
        else:
            row, cacheable = _summarise(directory / name)
            if cacheable and st.st_mtime_ns < settled:
                new[name] = _to_row(st, row)
                changed = True
        started = parse_time(row.started_at)
        mtime = st.st_mtime
        when = started.timestamp() if started else mtime
        keyed.append(((row.problem is None, when, mtime), name, row))
    if changed or len(new) != len(old):
        # A listing never fails for its cache; the next one simply reads more.
        write_index(index_path, _ListIndex(version=LIST_INDEX_VERSION, rows=new))
    keyed.sort(key=lambda item: item[0], reverse=True)
    shown = keyed[:limit] if limit is not None else keyed
    return [
        row if isinstance(row, RunSummary) else _from_row(directory / name, row)
        for _, name, row in shown
    ]
