"""``rune council batch ITEMS.jsonl|.csv``: one council per line, resumable, bounded.

Every line is an ask, read by the intake every door uses; the flags are the council flags
of ``rune council``, spelled as the intake spells them (``intake.FLAGS``; a test keeps the
two in step), and give the defaults a line's own keys beat. Each flag's parameter is named
after its key's last part (``multi_round.max_rounds`` is ``max_rounds``, ``--rounds``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..core.errors import ExitCode
from .app import council_app, council_errors, echo, echo_json, fail
from .options import (
    ItemsCouncilTypeOption,
    ItemsDeliberateOption,
    ItemsEndpointOption,
    ItemsKeyEnvOption,
    ItemsTemplateOption,
    OnDivergenceOption,
    PreferOption,
    RetryFailedOption,
    RoundsOption,
    RuneDirOption,
    SubagentCmdOption,
    SubagentFamilyOption,
    SubagentModelOption,
)

if TYPE_CHECKING:
    from ..batch import Row
    from ..batch.progress import Pace
    from ..config import CouncilConfig
    from ..core.paths import RuneDir
    from ..council.intake import AskDefaults, Door
    from ..council.options import CouncilOptions

# The council flag a batch does not take: every line has its own id. Consent (--yes) is
# the batch's own decision, given to every council with the prompt's answer.
NOT_DEFAULTS = frozenset({"id", "yes"})
# Done once for the whole batch, not again by every council.
ONCE = frozenset({"refresh", "refresh_models"})


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
    help="Run one council per line of ITEMS (.jsonl objects or .csv with a header). A line "
    "takes the keys every door takes (question, mode, n, artifact under the items file's "
    "folder, template, chain, deliberation, multi_round, council_type, summon, timeout, ..., "
    "id) plus artifact_text and artifact_name; the flags give their defaults. A rerun keeps "
    "finished items and picks up the rest.",
)
def batch_command(
    ctx: typer.Context,
    items: Annotated[Path, typer.Argument(help="The items file (.jsonl or .csv).")],
    concurrency: Annotated[
        int, typer.Option("--concurrency", "-c", min=1, max=256, help="Councils running at once.")
    ] = 4,
    retry_failed: RetryFailedOption = False,
    strict: Annotated[
        bool, typer.Option(help="Refuse to start if any line is bad (all are listed).")
    ] = False,
    results: Annotated[
        Path | None,
        typer.Option(help="Where results.jsonl goes (default .rune/batch/<items>.results.jsonl)."),
    ] = None,
    mode: Annotated[
        str | None,
        typer.Option("--mode", help="Default mode: critique | review | judge (judge)."),
    ] = None,
    n: Annotated[int | None, typer.Option("--n", help="Default voices per council (3).")] = None,
    artifact: Annotated[
        Path | None,
        typer.Option(
            "--artifact",
            help="A file every line that names none critiques or reviews (read once, inlined).",
        ),
    ] = None,
    template: ItemsTemplateOption = None,
    chain: Annotated[
        str | None,
        typer.Option("--chain", help="Chain of councils every line runs (see templates)."),
    ] = None,
    deliberation: ItemsDeliberateOption = None,
    max_rounds: RoundsOption = None,
    convergence_threshold: Annotated[
        float | None,
        typer.Option(
            "--convergence-threshold",
            help="Stop the rounds early once consensus reaches this (0-1).",
        ),
    ] = None,
    on_divergence: OnDivergenceOption = None,
    round_prompt_prefix: Annotated[
        str | None,
        typer.Option("--round-prompt-prefix", help="Text put before each later round."),
    ] = None,
    council_type: ItemsCouncilTypeOption = None,
    vote_threshold: Annotated[
        float | None,
        typer.Option("--vote-threshold", help="Share of counted ballots an item needs."),
    ] = None,
    orchestrator: Annotated[
        str | None,
        typer.Option("--orchestrator", help="Runtime that consolidates the verdict."),
    ] = None,
    orchestrator_cmd: Annotated[
        str | None,
        typer.Option("--orchestrator-cmd", help="Command (prompt on stdin) as orchestrator."),
    ] = None,
    summon: Annotated[
        list[str] | None,
        typer.Option("--summon", help="Member from a later round: WHO[@ROUND]; needs --rounds."),
    ] = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="Default per-voice timeout in seconds.")
    ] = None,
    deadline: Annotated[
        float | None,
        typer.Option("--deadline", help="Stop waiting for stragglers after this (seconds)."),
    ] = None,
    prefer: PreferOption = None,
    subagent_cmd: SubagentCmdOption = None,
    subagent_family: SubagentFamilyOption = None,
    subagent_endpoint: Annotated[
        str | None,
        typer.Option("--subagent-endpoint", help="Endpoint whose model takes failed slots."),
    ] = None,
    subagent_model: SubagentModelOption = None,
    endpoints: ItemsEndpointOption = None,
    key_env: ItemsKeyEnvOption = None,
    refresh: Annotated[
        bool, typer.Option("--refresh", help="Probe the CLIs again, once, before the batch.")
    ] = False,
    refresh_models: Annotated[
        bool,
        typer.Option(
            "--refresh-models", help="List the endpoints' models again, once, before the batch."
        ),
    ] = False,
    rune_dir: RuneDirOption = None,
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
    ray: Annotated[
        bool, typer.Option("--ray", help="Run the councils as Ray tasks (pip extra: ray).")
    ] = False,
    ray_address: Annotated[
        str | None,
        typer.Option(help="Ray cluster address (default $RAY_ADDRESS, else a local cluster)."),
    ] = None,
) -> None:
    import asyncio
    import dataclasses

    from ..batch import BadItems, Batch, BatchOptions
    from ..batch.progress import progress
    from ..batch.summary import render_summary
    from ..config import load_config
    from ..core.paths import RuneDir
    from ..council.intake import Door
    from ..discovery.assembly import detect_configured
    from ..runtimes.limits import Limits, caps_from_config
    from .consent_prompt import external_consent
    from .signals import signal_exit_code, terminating_signals

    where = RuneDir.resolve(rune_dir)
    stopped: KeyboardInterrupt | None = None
    with council_errors(), terminating_signals():
        config = load_config(where)
        defaults = _defaults(ctx.params)
        caps = {**caps_from_config(config), **_caps(max_concurrent or [])}
        door = Door(
            name="the batch",
            rune_dir=where.root,
            # An items file may come from anywhere: its lines ask, the flags decide.
            artifact_root=items.parent.absolute(),
            trusted_caller=False,
            defaults=defaults,
            config=config,
        )
        options = BatchOptions(
            door=door,
            limits=Limits(caps),
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
            # Asked once the lines are known good, and given to every council as the
            # batch's own answer.
            allow = external_consent(
                where, yes=yes, refresh=False, config=config, options=_planned(batch.options.door)
            )
            consented = defaults.model_copy(update={"yes": allow})
            batch.options = dataclasses.replace(
                batch.options, door=dataclasses.replace(batch.options.door, defaults=consented)
            )
            # Detected once here, so the councils that start together read today's cache
            # instead of each probing every CLI at the same moment.
            asyncio.run(
                detect_configured(where, env=dict(os.environ), refresh=refresh, config=config)
            )
            if refresh_models:
                asyncio.run(_list_models(where, defaults, config))
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


def _defaults(params: Mapping[str, Any]) -> AskDefaults:
    """The council flags given, as the defaults of every line; a bad value is said with its
    flag (``--rounds: ...``)."""
    from pydantic import ValidationError

    from ..batch.items import load_artifact
    from ..council.intake import FLAGS, AskDefaults, AskError, flag_spelling, problems_of

    given: dict[str, Any] = {}
    for key in FLAGS:
        value = params.get(key.rpartition(".")[2])
        if key in NOT_DEFAULTS or key in ONCE or value is None or value is False or value == []:
            continue
        if key == "artifact":
            path = Path(value)
            value = {"name": path.name, "text": load_artifact(path)}
        head, dot, inner = key.partition(".")
        if dot:
            given.setdefault(head, {})[inner] = value
        else:
            given[key] = value
    try:
        return AskDefaults.model_validate(given)
    except ValidationError as exc:
        raise AskError(problems_of(exc, AskDefaults), flag_spelling) from None


def _planned(door: Door) -> CouncilOptions | None:
    """The options every line starts from, so the consent question names the endpoints the
    batch's flags give; None (the configured ones) when the flags alone make no council."""
    from ..core.errors import CouncilError
    from ..council.intake import Ask, prepare

    try:
        return prepare(Ask(question="the batch's questions"), door).options
    except CouncilError:
        return None


async def _list_models(where: RuneDir, defaults: AskDefaults, config: CouncilConfig) -> None:
    from ..endpoints import setup_from_options
    from ..endpoints.assembly import survey

    setup = setup_from_options(
        where,
        endpoints=defaults.endpoints or (),
        key_env=defaults.key_env,
        refresh=True,
        with_subagent=False,
        config=config,
    )
    await survey(setup, where, dict(os.environ))


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
