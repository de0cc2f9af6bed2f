"""``rune council demo``: the whole council on built-in simulated voices, in a few seconds."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..core.errors import ExitCode
from .app import council_app, council_errors, echo, echo_json


@council_app.command(
    "demo",
    short_help="Run a council of built-in simulated voices (no CLI, no network).",
    help=(
        "See a council work with nothing installed: four built-in simulated voices of four "
        "model families (no AI CLI, no network) critique a small migration plan. Two agree "
        "on a verified finding, one disagrees, one fails; the real GATE, NORMALIZE and "
        "ARBITRATE decide. Writes a real run file you can then show, watch or verify."
    ),
)
def demo_command(
    pace: Annotated[
        float,
        typer.Option(
            help="Scale the simulated voices' delays (1 is about 2.5 s; 0 answers at once).",
            min=0,
            max=60,
        ),
    ] = 1.0,
    run_id: Annotated[
        str | None, typer.Option("--id", help="Run id (default demo-<time>-<random>).")
    ] = None,
    rune_dir: Annotated[
        Path | None,
        typer.Option(help="Where .rune files go (default ./.rune, or $RUNE_COUNCIL_DIR)."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the CouncilResult as JSON and nothing else.")
    ] = False,
) -> None:
    from ..core.paths import RuneDir
    from ..council import CouncilOptions, convene, new_run_id, parse_request
    from ..demo import demo_request, demo_runtimes
    from .live import progress
    from .runs_cmds import report
    from .signals import terminating_signals

    where = RuneDir.resolve(rune_dir)
    with council_errors():  # a bad --id
        request = parse_request(demo_request(run_id or f"demo-{new_run_id()}"))
    if not as_json:
        echo(
            f"demo: {len(demo_runtimes())} simulated voices (no AI CLI, no network) on: "
            f"{request.question}",
            err=True,
        )
    with (
        council_errors(cancellable=True),
        terminating_signals(),
        progress(enabled=not as_json) as on_event,
    ):
        options = CouncilOptions(
            runtimes=demo_runtimes(pace), rune_dir=where.root, on_event=on_event
        )
        result = convene(request, options)
    if as_json:
        echo_json(result.model_dump_json(indent=2))
    else:
        echo(report(result))
        echo(
            f"\nNext: rune council show {result.id} | rune council verify {result.id} | "
            f"rune council list" + ("" if rune_dir is None else f"  (with --rune-dir {rune_dir})"),
            err=True,
        )
    if result.voices_valid == 0:
        raise typer.Exit(ExitCode.NO_VERDICT)
