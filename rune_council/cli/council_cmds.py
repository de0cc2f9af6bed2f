"""``rune council "<question>"`` and ``rune council detect``.

The annotations here are evaluated where they are written, not postponed: Typer reads every
option of a command from them, and a postponed one is a string it must compile and evaluate
again in each process (32 of them for a council, some 5 ms of every run).
"""

import contextlib
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..core.errors import ExitCode, exit_code_for_status
from ..core.made import made_json
from .app import council_app, council_errors, echo, echo_json
from .options import (
    OnDivergenceOption,
    PreferOption,
    RoundsOption,
    RuneDirOption,
    RunIdOption,
    SubagentCmdOption,
)

if TYPE_CHECKING:
    from ..core.contract import CouncilResult
    from ..council.options import OnEvent


@council_app.command("run", help="Ask the council a question (the default command).")
def run_command(
    question: Annotated[
        str,
        typer.Argument(
            help="The question. '-' reads it from stdin, which keeps it out of this "
            "process's own command line (visible to other local users in ps)."
        ),
    ],
    mode: Annotated[
        str | None,
        typer.Option(help="critique | review | judge (generate is not served); default judge."),
    ] = None,
    n: Annotated[
        int | None, typer.Option("--n", help="Voices, 2-5 (more is capped at 5); default 3.")
    ] = None,
    template: Annotated[
        str | None,
        typer.Option(
            help="A named council setup (rune council templates); other options override it."
        ),
    ] = None,
    artifact: Annotated[
        Path | None, typer.Option(help="A file the voices critique or review, inlined.")
    ] = None,
    timeout: Annotated[
        float | None, typer.Option(help="Per-voice timeout in seconds (default 180).")
    ] = None,
    deadline: Annotated[
        float | None,
        typer.Option(
            help="Seconds after which the council stops waiting for stragglers once two "
            "confirmed families have answered; the verdict says it is partial "
            "(default: [council] deadline in council.toml, else none)."
        ),
    ] = None,
    run_id: RunIdOption = None,
    subagent_cmd: SubagentCmdOption = None,
    subagent_family: Annotated[
        str | None, typer.Option(help="Model family of the subagent command (default unknown).")
    ] = None,
    prefer: PreferOption = None,
    refresh: Annotated[
        bool, typer.Option(help="Probe the CLIs again, ignoring the cache.")
    ] = False,
    endpoint: Annotated[
        list[str] | None,
        typer.Option(
            help="OpenAI-compatible endpoint for this run: a base URL, a preset (nim, "
            "ollama) or a name from council.toml; repeatable; replaces the configured ones."
        ),
    ] = None,
    key_env: Annotated[
        str | None,
        typer.Option(help="Environment variable holding the API key for --endpoint."),
    ] = None,
    refresh_models: Annotated[
        bool, typer.Option(help="List the endpoints' models again, ignoring the 6 h cache.")
    ] = False,
    subagent_endpoint: Annotated[
        str | None,
        typer.Option(help="Endpoint whose model takes failed or empty slots (URL or name)."),
    ] = None,
    subagent_model: Annotated[
        str | None,
        typer.Option(help="Model id for --subagent-endpoint (default: its top-ranked model)."),
    ] = None,
    rune_dir: RuneDirOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the CouncilResult as JSON.")
    ] = False,
    deliberate: Annotated[
        str | None, typer.Option(help="After the single pass: vote | rank (see README).")
    ] = None,
    rounds: RoundsOption = None,
    council_type: Annotated[
        str | None, typer.Option(help="standard | red_team (attack prompts, risk register).")
    ] = None,
    orchestrator: Annotated[
        str | None, typer.Option(help="Runtime that consolidates and writes the verdict.")
    ] = None,
    orchestrator_cmd: Annotated[
        str | None, typer.Option(help="Command (prompt on stdin) that acts as orchestrator.")
    ] = None,
    vote_threshold: Annotated[
        float | None, typer.Option(help="Share of counted ballots an item needs (2/3).")
    ] = None,
    on_divergence: OnDivergenceOption = None,
    convergence_threshold: Annotated[
        float | None,
        typer.Option(help="Agreement (0-1) at which rounds stop early (default 0.85)."),
    ] = None,
    round_prompt_prefix: Annotated[
        str | None,
        typer.Option(help="Text put before the draft verdict in every later round's prompt."),
    ] = None,
    summon: Annotated[
        list[str] | None,
        typer.Option(
            help="Add a member from a later round: a runtime, a model family or 'any', "
            "optionally @ROUND (default 2); needs --rounds; repeatable."
        ),
    ] = None,
    chain: Annotated[
        str | None,
        typer.Option(
            help="Run a chain of councils (rune council templates lists them; "
            "red-team-first: a red team, then a council told its risk register)."
        ),
    ] = None,
    yes: Annotated[
        bool,
        typer.Option(
            "--yes",
            "-y",
            help="Allow sending the question to the external AI CLIs found, without asking "
            "(also: RUNE_COUNCIL_ALLOW_EXTERNAL=1, or [consent] in council.toml).",
        ),
    ] = False,
) -> None:
    from ..core.paths import RuneDir
    from ..council.intake import FLAGS, Door, parse_ask, prepare
    from . import lifetime
    from .consent_prompt import external_consent
    from .signals import terminating_signals

    where = RuneDir.resolve(rune_dir)
    if question == "-":
        question = sys.stdin.read().strip()
    # Only the flags given go in, so a template (and the contract) fills the rest; the
    # intake reads them exactly as it reads an HTTP body, tool arguments or a batch line.
    flags: dict[str, Any] = {
        "mode": mode,
        "n": n,
        "template": template,
        "chain": chain,
        # Absolute: the user at the terminal may name any file, and the run file still
        # says which file it was from anywhere.
        "artifact": str(artifact.absolute()) if artifact is not None else None,
        "timeout": timeout,
        "deadline": deadline,
        "id": run_id,
        "prefer": prefer,
        "deliberation": deliberate,
        "council_type": council_type,
        "orchestrator": orchestrator,
        "vote_threshold": vote_threshold,
        "summon": summon,
        "endpoints": endpoint,
        "key_env": key_env,
        "refresh": refresh,
        "refresh_models": refresh_models,
        "subagent_cmd": subagent_cmd,
        "subagent_family": subagent_family,
        "subagent_endpoint": subagent_endpoint,
        "subagent_model": subagent_model,
        "orchestrator_cmd": orchestrator_cmd,
        "yes": yes,
    }
    rounds_given = {
        "max_rounds": rounds,
        "convergence_threshold": convergence_threshold,
        "on_divergence": on_divergence,
        "round_prompt_prefix": round_prompt_prefix,
    }
    # ``is``, not ``in``: 0 equals False, and --n 0 must reach the intake to be refused.
    given = {k: v for k, v in flags.items() if v is not None and v is not False and v != []}
    multi_round = {key: value for key, value in rounds_given.items() if value is not None}
    if multi_round:
        given["multi_round"] = multi_round
    # Any file the user names (the filesystem's root confines nothing but the file kind);
    # a complaint about its path is told at the flag that gave it.
    spelling = {**FLAGS, "artifact.path": FLAGS["artifact"]}
    door = Door(rune_dir=where.root, artifact_root=Path(Path.cwd().anchor), spelling=spelling)
    with council_errors(cancellable=True), terminating_signals():
        prepared = prepare(parse_ask({"question": question, **given}, door.spell), door)
        if prepared.consent_undecided:
            # Asked before the live view starts: a redrawn table would overwrite the question.
            allowed = external_consent(
                where,
                yes=False,
                refresh=refresh,
                config=prepared.options.config,
                options=prepared.options,
            )
            prepared = prepared.with_consent(allowed)
        # Live per-voice table on a terminal, plain lines otherwise, nothing with --json.
        # --json shows no progress, so it does not load the live view's module either.
        with _progress() if not as_json else contextlib.nullcontext(None) as on_event:
            lifetime.settle()  # the council is loaded; the collector runs from here
            result = prepared.with_options(on_event=on_event).convene()
    if as_json:
        echo_json(made_json(result, indent=2))
    else:
        # The text form's modules, only for the text form.
        from ..deliberation.render import render_deliberation
        from ..render import render

        echo(render(result) + render_deliberation(result))
    code = exit_code_for_status(result.shown_status())
    if code == ExitCode.NO_VERDICT and not as_json:
        echo(f"rune council: {no_voice_hint(result, given)}", err=True)
        for entry in result.runtime_report.detected:
            if entry.auth == "logged-out" and entry.auth_fix:
                echo(f"  {entry.runtime}: {entry.auth_fix}", err=True)
    if code != ExitCode.OK:
        raise typer.Exit(code)


def no_voice_hint(result: "CouncilResult", given: Mapping[str, Any]) -> str:
    """What to try when no voice answered, naming only what was not already tried: a flag
    the user gave (or consent already granted) is not suggested again."""
    consented = (result.runtime_report.consent or "").startswith("granted")
    adds = [
        flag
        for flag, tried in (
            ("--yes", consented or bool(given.get("yes"))),
            ("--subagent-cmd", "subagent_cmd" in given or "subagent_endpoint" in given),
            ("--endpoint", "endpoints" in given),
        )
        if not tried
    ]
    more = f"; {', '.join(adds)} add voices" if adds else ""
    return (
        "no voice produced a usable answer, so there is no verdict (status no_verdict); "
        f"the Notes above and `rune council doctor` say why{more}"
    )


@council_app.command("templates", help="List the named council setups and chains.")
def templates_command(
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the templates and chains as JSON.")
    ] = False,
    rune_dir: Annotated[Path | None, typer.Option(help="Where .rune files go.")] = None,
) -> None:
    from ..config import load_config
    from ..core.paths import RuneDir
    from ..council.templates import chains, templates

    where = RuneDir.resolve(rune_dir)
    with council_errors():
        config = load_config(where)
        found, linked = templates(config), chains(config)
    for note in config.notes:
        echo(f"rune council: note: {note}", err=True)
    if as_json:
        doc = {
            "templates": [
                {
                    "name": t.name,
                    "description": t.spec.description,
                    "version": t.spec.version,
                    "source": t.source,
                    "path": t.path,
                    "settings": t.settings(),
                }
                for t in found.values()
            ],
            "chains": [
                {
                    "name": c.name,
                    "description": c.description,
                    "steps": c.spec.steps,
                    "source": c.source,
                    "path": c.path,
                }
                for c in linked.values()
            ],
        }
        echo_json(json.dumps(doc, indent=2))
        return
    width = max(len(name) for name in [*found, *linked])
    echo("templates (--template NAME):")
    for t in found.values():
        origin = "" if t.source == "builtin" else f" [{t.source}]"
        # A project's description is the repository's text: shown as text, never escapes.
        echo(f"  {t.name:<{width}}  {t.spec.description}{origin}")
    echo("chains (--chain NAME):")
    for c in linked.values():
        origin = "" if c.source == "builtin" else f" [{c.source}]"
        echo(f"  {c.name:<{width}}  {c.description}{origin}")


@council_app.command("detect", help="Show which AI CLIs are installed and their families.")
def detect_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print runtimes.json.")] = False,
    refresh: Annotated[bool, typer.Option(help="Probe again, ignoring today's cache.")] = False,
    rune_dir: Annotated[Path | None, typer.Option(help="Where .rune files go.")] = None,
) -> None:
    import asyncio

    from ..config import load_config
    from ..core.paths import RuneDir
    from ..discovery.assembly import detect_configured

    where = RuneDir.resolve(rune_dir)
    with council_errors():
        config = load_config(where)
        report, cached = asyncio.run(
            detect_configured(where, env=dict(os.environ), refresh=refresh, config=config)
        )
    for note in config.notes:
        echo(f"rune council: note: {note}", err=True)
    if as_json:
        echo_json(json.dumps(report.model_dump(mode="json"), indent=2))
        return
    source = "cached today" if cached else "probed now"
    echo(f"runtimes ({source}, {report.checked_at}) → {where.runtimes_file}")
    for d in report.detected:
        version = d.version or "-"
        where_ = d.path or d.detail
        # Version strings and details are what the CLIs printed: text, never escapes.
        echo(
            f"  {d.runtime:<8} {d.status:<11} {d.model_family:<10} {d.family_confidence:<9} "
            f"{version:<12} {where_}"
        )
        if d.path and d.detail:
            # Why a CLI is ineligible, or where a wrapper's family came from.
            echo(f"      {d.detail}")
        if d.auth is not None:
            fix = f"; fix: {d.auth_fix}" if d.auth_fix else ""
            echo(f"      auth {d.auth}: {d.auth_detail}{fix}")
    if report.login_shell:
        echo(f"login-shell PATH from {report.login_shell}: {len(report.login_path)} entries")
    if not any(d.status == "available" for d in report.detected):
        echo("no AI CLI found: councils will run subagent-only (--subagent-cmd)")


def _progress() -> "contextlib.AbstractContextManager[OnEvent | None]":
    from .live import progress

    return progress()
