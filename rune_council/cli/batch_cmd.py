"""``rune council batch ITEMS.jsonl|.csv``: one council per line, resumable, bounded."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..errors import ExitCode
from .app import council_app, council_errors, echo, echo_json, fail

if TYPE_CHECKING:
    from ..batch import BatchOptions, Row
    from ..batch.progress import Pace


class _Printer:
    """--json: each row on stdout as its item ends, and nothing else."""

    def __init__(self, view: Pace) -> None:
        self.view = view

    def started(self, total: int, bad: int) -> None:
        self.view.started(total, bad)

    def item_started(self, run_id: str) -> None:
        self.view.item_started(run_id)

    def item_done(self, row: Row, ran: bool) -> None:
        self.view.item_done(row, ran)
        echo_json(row.to_json())


@council_app.command(
    "batch",
    help="Run one council per line of ITEMS (.jsonl objects or .csv with a header): keys id, "
    "question, mode, n, timeout, prefer, artifact (a path under the items file's folder), "
    "artifact_text, artifact_name. A rerun keeps finished items and picks up the rest.",
)
def batch_command(
    items: Annotated[Path, typer.Argument(help="The items file (.jsonl or .csv).")],
    concurrency: Annotated[
        int, typer.Option("--concurrency", "-c", min=1, max=256, help="Councils running at once.")
    ] = 4,
    retry_failed: Annotated[
        bool, typer.Option(help="Run again the items whose earlier run failed.")
    ] = False,
    strict: Annotated[
        bool, typer.Option(help="Refuse to start if any line is bad (all are listed).")
    ] = False,
    results: Annotated[
        Path | None,
        typer.Option(help="Where results.jsonl goes (default .rune/batch/<items>.results.jsonl)."),
    ] = None,
    mode: Annotated[
        str | None, typer.Option(help="Default mode: critique | review | judge (judge).")
    ] = None,
    n: Annotated[int | None, typer.Option("--n", help="Default voices per council (3).")] = None,
    timeout: Annotated[
        float | None, typer.Option(help="Default per-voice timeout in seconds.")
    ] = None,
    prefer: Annotated[
        list[str] | None, typer.Option(help="Model family to seat first; repeatable.")
    ] = None,
    subagent_cmd: Annotated[
        str | None,
        typer.Option(help="Command that answers a prompt on stdin; takes failed or empty slots."),
    ] = None,
    subagent_family: Annotated[
        str | None, typer.Option(help="Model family of the subagent command.")
    ] = None,
    endpoint: Annotated[
        list[str] | None,
        typer.Option(help="OpenAI-compatible endpoint (URL, preset or council.toml name)."),
    ] = None,
    key_env: Annotated[
        str | None, typer.Option(help="Environment variable holding the key for --endpoint.")
    ] = None,
    rune_dir: Annotated[
        Path | None, typer.Option(help="Where .rune files go (default ./.rune).")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print only the result rows, one JSON line each.")
    ] = False,
    yes: Annotated[
        bool,
        typer.Option(
            "--yes", "-y", help="Allow sending the questions to the external AI CLIs found."
        ),
    ] = False,
    max_concurrent: Annotated[
        list[str] | None,
        typer.Option(
            help="NAME=K: at most K calls to runtime NAME at once across the batch (an AI "
            "CLI, or an endpoint by name); repeatable; beats [runtimes.NAME] max_concurrent. "
            "Default 4 per AI CLI, 8 per endpoint."
        ),
    ] = None,
    template: Annotated[
        str | None, typer.Option(help="Council template every item uses (see templates).")
    ] = None,
    ray: Annotated[
        bool, typer.Option("--ray", help="Run the councils as Ray tasks (pip extra: ray).")
    ] = False,
    ray_address: Annotated[
        str | None,
        typer.Option(help="Ray cluster address (default $RAY_ADDRESS, else a local cluster)."),
    ] = None,
) -> None:
    import asyncio

    from ..batch import BadItems, Batch, BatchOptions, Defaults
    from ..batch.progress import progress
    from ..batch.summary import render_summary
    from ..config import load_config
    from ..council import CouncilOptions
    from ..discovery.assembly import detect_configured
    from ..endpoints import setup_from_options
    from ..paths import RuneDir
    from ..runtimes.limits import Limits, caps_from_config
    from .consent_prompt import external_consent
    from .signals import signal_exit_code, terminating_signals

    where = RuneDir.resolve(rune_dir)
    stopped: KeyboardInterrupt | None = None
    with council_errors(), terminating_signals():
        config = load_config(where)
        endpoints = setup_from_options(
            where,
            endpoints=endpoint or (),
            key_env=key_env,
            with_subagent=False,
            config=config,
        )
        caps = {**caps_from_config(config), **_caps(max_concurrent or [])}
        options = BatchOptions(
            council=CouncilOptions(
                subagent_command=subagent_cmd,
                subagent_family=subagent_family,
                endpoints=endpoints,
                rune_dir=where.root,
                config=config,
                template=template,
                limits=Limits(caps),
            ),
            defaults=Defaults(mode=mode, n=n, timeout=timeout, prefer=tuple(prefer or ())),
            concurrency=concurrency,
            retry_failed=retry_failed,
            strict=strict,
            results=results,
            ray=ray,
            ray_address=ray_address,
        )
        with progress(enabled=not as_json) as view:
            batch = Batch(items, options, _Printer(view) if as_json else view)
            try:
                batch.check()
            except BadItems as exc:
                for line in exc.bad:
                    echo(f"rune council: {line}", err=True)
                raise
            allow = external_consent(where, yes=yes, refresh=False, config=config)
            batch.options = _with_consent(batch.options, allow)
            # Detected once here, so the councils that start together read today's cache
            # instead of each probing every CLI at the same moment.
            asyncio.run(detect_configured(where, env=dict(os.environ), config=config))
            try:
                asyncio.run(batch.run())
            except KeyboardInterrupt as exc:
                stopped = exc
            if not as_json:
                for note in batch.notes:
                    echo(f"rune council: note: {note}", err=True)
    if not as_json:
        echo(render_summary(batch.tally, batch.results_path, stopped=stopped is not None))
    if stopped is not None:
        raise fail(
            "batch stopped; running councils were cancelled and the next run picks them up",
            signal_exit_code(stopped),
        )
    if not batch.tally.all_complete:
        raise typer.Exit(ExitCode.NO_VERDICT)


def _caps(given: list[str]) -> dict[str, int]:
    caps: dict[str, int] = {}
    for entry in given:
        name, sep, value = entry.partition("=")
        if not sep or not name.strip() or not value.strip().isdigit() or int(value) < 1:
            raise fail(
                f"--max-concurrent {entry!r}: give NAME=K with K a whole number >= 1",
                ExitCode.BAD_INPUT,
            )
        caps[name.strip()] = int(value)
    return caps


def _with_consent(options: BatchOptions, allow: bool | None) -> BatchOptions:
    import dataclasses

    council = dataclasses.replace(options.council, allow_external=allow)
    return dataclasses.replace(options, council=council)
