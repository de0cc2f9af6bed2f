"""``rune council stats``: what the run history says, as tables, JSON, PNG pictures, a page."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .app import council_app, council_errors, echo, echo_json


@council_app.command(
    "stats",
    short_help="Consensus, family agreement, runtime reliability over the run history.",
    help=(
        "Summarise the run files in <rune dir>/council (and every --rune-dir given): "
        "consensus rate and stamp mix per week, needs-decision rate, family x family "
        "agreement and dissent, dissent per family, per-runtime reliability and latency, "
        "deliberation rounds and Kendall's W; and for each eval kept in <rune dir>/eval, how "
        "often two voices (two families) were wrong on the same item against what "
        "independence predicts, and the effective number of independent votes, as the "
        "eval's report gives them. A file that is not a readable run is skipped "
        "and counted. Digests are kept in <rune dir>/stats-index.json so later passes read "
        "only new or changed files. Pictures (--png, and inside --html) need the "
        "rune-council[analytics] extra; without it --png exits 2 after the numbers and "
        "--html writes the tables alone. Exit codes as elsewhere: 2 bad input, 74 a disk "
        "that fails a write."
    ),
)
def stats_command(
    since: Annotated[
        str | None,
        typer.Option(
            metavar="SPAN|DATE",
            help="Only runs started in this window (30d, 12w, 36h) or since a date.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the statistics as JSON.")] = False,
    png: Annotated[
        Path | None,
        typer.Option(metavar="DIR", help="Write the pictures as PNG files into this directory."),
    ] = None,
    html_file: Annotated[
        Path | None,
        typer.Option(
            "--html",
            metavar="FILE",
            help="Write one self-contained HTML page with tables and pictures.",
        ),
    ] = None,
    rune_dir: Annotated[
        list[Path] | None,
        typer.Option(
            metavar="DIR",
            help="A rune dir to read (repeatable; default ./.rune, or $RUNE_COUNCIL_DIR).",
        ),
    ] = None,
) -> None:
    from ..analytics import charts
    from ..analytics.history import stats
    from ..analytics.page import page
    from ..analytics.since import parse_since
    from ..analytics.tables import text
    from ..core.errors import RequestError, file_error
    from ..core.paths import RuneDir

    with council_errors():
        start = parse_since(since) if since else None
        dirs = [RuneDir.resolve(d) for d in rune_dir] if rune_dir else [RuneDir.resolve()]
        for given in rune_dir or []:
            if not given.is_dir():
                raise RequestError(f"--rune-dir {given} is not a directory")
        result = stats(dirs, since=start)
        if as_json:
            echo_json(result.model_dump_json(indent=2), nl=False)
        else:
            echo(text(result), nl=False)
        if as_json:
            echo("")
        wants_pictures = png is not None or html_file is not None
        pictures: dict[str, bytes] = {}
        if wants_pictures and charts.available():
            pictures = charts.render(result)
        if png is not None and not pictures:
            raise charts.PicturesUnavailable(charts.INSTALL_HINT)
        try:
            # The user's own paths, written as any tool writes its output.
            if png is not None:
                png.mkdir(parents=True, exist_ok=True)
                for name, data in pictures.items():
                    (png / name).write_bytes(data)
                echo(f"wrote {len(pictures)} picture(s) to {png}", err=True)
            if html_file is not None:
                notes = [] if pictures else [f"{charts.INSTALL_HINT} (this page has tables only)"]
                shown = {n: (charts.PICTURES[n][0], data) for n, data in pictures.items()}
                html_file.write_text(page(result, shown, notes=notes), encoding="utf-8")
                echo(f"wrote {html_file}", err=True)
                for note in notes:
                    echo(f"rune council: {note}", err=True)
        except OSError as exc:
            # A wrong path is bad input (2); a failing disk is an I/O error (74).
            raise file_error(f"cannot write {exc.filename}", exc) from None
        if not wants_pictures and not as_json and not charts.available():
            echo(f"({charts.INSTALL_HINT})")
