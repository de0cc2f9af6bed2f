"""``rune council tally FILE``: validate and tally a council transcript, no model involved."""

from __future__ import annotations

import gc
import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from ..core import safejson
from ..core.errors import ExitCode
from ..safefile import read_capped
from .app import council_app, echo, echo_json, fail

MAX_TRANSCRIPT_BYTES = 20_000_000


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
    from ..render import tally_json_chunks, tally_lines

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
    held = [_transcript_from(raw)]
    del raw
    from .tally_two import echo_lines, tallied_on_two_cores

    # A long transcript is read, counted and printed on two cores; what cannot be split
    # into halves (or is short) is tallied here, in one process. The text is held in a
    # list, nowhere else, so that the two processes can let it go.
    valid = tallied_on_two_cores(held, source, as_json)
    if valid is not None:
        if not valid:
            raise typer.Exit(ExitCode.NO_VERDICT)
        return
    transcript = parse(held.pop())  # the moves keep what they need of the text
    # Each ranker's detail is made as it is printed, so a long tally never holds them all.
    parts = tally_parts(transcript)
    del transcript
    report = parts.report
    if as_json:
        for data in tally_json_chunks(report, parts):
            echo_json(data, nl=False)
        echo()
    else:
        echo_lines(tally_lines(report, source, parts))
    if not report.valid:
        raise typer.Exit(ExitCode.NO_VERDICT)
