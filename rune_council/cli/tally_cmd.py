"""``rune council tally FILE``: validate and tally a council transcript, no model involved."""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
import tempfile
from collections.abc import Iterable
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..core import safejson
from ..core.errors import ExitCode
from ..safefile import read_capped
from .app import council_app, echo, echo_json, fail

if TYPE_CHECKING:
    from ..deliberation.tally import Counted, TallyParts

MAX_TRANSCRIPT_BYTES = 20_000_000


# Below this many counted ballots the report prints in well under a tenth of a second and a
# second process would not pay for its start.
TWO_CORES_FROM = 20_000
_LINES_PER_ECHO = 1000  # text lines per write; JSON is written per 1,000 rankers (render)


def _print(parts: TallyParts, source: str, as_json: bool) -> None:
    """The report on stdout, in one process."""
    from ..render import tally_json_chunks, tally_lines

    if as_json:
        for data in tally_json_chunks(parts.report, parts):
            echo_json(data, nl=False)
        echo()
        return
    _echo_lines(tally_lines(parts.report, source, parts))


def _echo_lines(lines: Iterable[str]) -> None:
    chunk: list[str] = []
    for line in lines:
        chunk.append(line)
        if len(chunk) == _LINES_PER_ECHO:
            echo("\n".join(chunk))
            chunk.clear()
    if chunk:
        echo("\n".join(chunk))


def _printed_on_two_cores(parts: TallyParts, source: str, as_json: bool) -> bool:
    """Print a long report with its second half of rankers rendered at the same time by a
    forked copy of this process (into a temporary file, copied out after the first half).

    Rendering is a quarter of a long tally and each ranker's text depends only on its own
    ballot, so two cores halve it; fork shares the tally with the copy, nothing is pickled.
    Both halves go through the same ``echo``/``echo_json`` in the same chunks as the
    one-process path, so every check and every byte is the same. False (nothing printed)
    where there is no fork, the report is short, or the copy could not be started; a copy
    that fails is replaced by rendering its half here."""
    counted = parts.counted
    if not hasattr(os, "fork") or len(counted) < TWO_CORES_FROM or not _stdout_is_fd_1():
        return False
    from ..render import tally_json_chunks, tally_lines

    report = parts.report
    if as_json:
        # Rankers are written 1,000 to a chunk; the first half ends on a chunk's end, so its
        # own closing (the brackets and the report after the rankers) is a chunk of its own.
        half = len(counted) // 2 // 1000 * 1000
        head = 0
    else:
        # The lines before the first ranker's: where two one-ranker reports first differ.
        one = list(tally_lines(report, source, _view(parts, counted[:1])))
        other = list(tally_lines(report, source, _view(parts, counted[1:2])))
        head = next((i for i, (a, b) in enumerate(zip(one, other, strict=True)) if a != b), -1)
        if head < 0:
            return False
        # The first half ends on a chunk's end, so the second's chunks are the same lines.
        half = (len(counted) // 2 + head) // _LINES_PER_ECHO * _LINES_PER_ECHO - head
    first, second = _view(parts, counted[:half]), _view(parts, counted[half - 1 :])

    def second_half() -> None:
        if as_json:
            # Written one ranker to a chunk, grouped here as the one-process path groups
            # them: the first chunk (the head and the overlapping last ranker of the first
            # half) is the first half's.
            chunks = tally_json_chunks(report, second, per_chunk=1)
            next(chunks)
            group: list[bytes] = []
            for data in chunks:
                group.append(data)
                if len(group) == 1000:
                    echo_json(b"".join(group), nl=False)
                    group.clear()
            echo_json(b"".join(group), nl=False)
            echo()
        else:
            lines = tally_lines(report, source, second)
            _echo_lines(islice(lines, head + 1, None))

    with tempfile.TemporaryFile() as spool:
        sys.stdout.flush()
        try:
            pid = os.fork()
        except OSError:
            return False
        if pid == 0:  # the copy: its half into the spool, then gone without the parent's exits
            code = 1
            try:
                os.dup2(spool.fileno(), 1)
                second_half()
                sys.stdout.flush()
                code = 0
            finally:
                os._exit(code)
        try:
            if as_json:
                chunks = tally_json_chunks(report, first)
                held = next(chunks)
                for data in chunks:
                    echo_json(held, nl=False)
                    held = data  # the last one is the first half's closing, not printed
            else:
                _echo_lines(islice(tally_lines(report, source, first), head + half))
            sys.stdout.flush()
            _, status = os.waitpid(pid, 0)
            pid = 0
            if os.waitstatus_to_exitcode(status) != 0:
                second_half()
                return True
            spool.seek(0)
            out = sys.stdout.buffer
            while block := spool.read(1 << 20):
                out.write(block)
            out.flush()
        finally:
            if pid:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
    return True


def _stdout_is_fd_1() -> bool:
    """Whether printing goes to this process's file descriptor 1 (the copy writes there)."""
    try:
        return sys.stdout.fileno() == 1 and hasattr(sys.stdout, "buffer")
    except (AttributeError, OSError, ValueError):
        return False


def _view(parts: TallyParts, counted: list[Counted]) -> TallyParts:
    from ..deliberation.tally import TallyParts

    return TallyParts(parts.report, counted, parts.active, parts.tables)


def _transcript_from(raw: str) -> str:
    """A transcript as given, or the rank-stage transcript kept in a run file."""
    if raw.lstrip().startswith("{"):
        try:
            data = safejson.loads(raw, what="the run file")
        except json.JSONDecodeError:
            return raw
        rank = (data.get("deliberation") or {}).get("rank") if isinstance(data, dict) else None
        if isinstance(rank, dict) and isinstance(rank.get("transcript"), str):
            return str(rank["transcript"])
        raise fail(
            "the JSON file holds no rank transcript (deliberation.rank.transcript)",
            ExitCode.BAD_INPUT,
        )
    return raw


@council_app.command(
    "tally", help="Validate and tally a council transcript (typed moves); exit 1 on errors."
)
def tally_command(
    file: Annotated[
        str,
        typer.Argument(help="Transcript file, '-' for stdin, or a run file (its rank transcript)."),
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print the tally as JSON.")] = False,
) -> None:
    from ..deliberation.dsl import parse
    from ..deliberation.tally import tally_parts

    if file == "-":
        raw = sys.stdin.read(MAX_TRANSCRIPT_BYTES)
        source = "stdin"
    else:
        try:
            # Regular files only, read up to the cap: a FIFO or a device is refused at once.
            data, cut = read_capped(Path(file), MAX_TRANSCRIPT_BYTES)
        except OSError as exc:
            from ..core.errors import RequestError, exit_code_for, file_error

            error = file_error(f"cannot read {file}", exc, bad_path=RequestError)
            raise fail(str(error), exit_code_for(error)) from None
        if cut:
            raise fail(f"{file} is larger than {MAX_TRANSCRIPT_BYTES} bytes", ExitCode.BAD_INPUT)
        raw = data.decode("utf-8", errors="replace")
        del data
        source = file
    # A long transcript makes millions of small objects and no cycles; the cyclic collector
    # would walk them again and again (a third of the time at 100,000 lines). This process
    # ends after one tally.
    gc.disable()
    transcript = parse(_transcript_from(raw))
    del raw  # the moves keep what they need of the text
    # Each ranker's detail is made as it is printed, so a long tally never holds them all.
    parts = tally_parts(transcript)
    del transcript
    report = parts.report
    if not _printed_on_two_cores(parts, source, as_json):
        _print(parts, source, as_json)
    if not report.valid:
        raise typer.Exit(ExitCode.NO_VERDICT)
