"""``rune council tally FILE``: validate and tally a council transcript, no model involved."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from .. import safejson
from ..errors import ExitCode
from ..safefile import read_capped
from ..safetext import plain
from .app import council_app, fail

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
    from ..deliberation.tally import tally_text
    from ..render import render_tally

    if file == "-":
        raw = sys.stdin.read(MAX_TRANSCRIPT_BYTES)
        source = "stdin"
    else:
        try:
            # Regular files only, read up to the cap: a FIFO or a device is refused at once.
            data, cut = read_capped(Path(file), MAX_TRANSCRIPT_BYTES)
        except OSError as exc:
            from ..errors import RequestError, exit_code_for, file_error

            error = file_error(f"cannot read {file}", exc, bad_path=RequestError)
            raise fail(str(error), exit_code_for(error)) from None
        if cut:
            raise fail(f"{file} is larger than {MAX_TRANSCRIPT_BYTES} bytes", ExitCode.BAD_INPUT)
        raw = data.decode("utf-8", errors="replace")
        source = file
    report = tally_text(_transcript_from(raw))
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
    else:
        typer.echo(plain(render_tally(report, source)))
    if not report.valid:
        raise typer.Exit(ExitCode.NO_VERDICT)
