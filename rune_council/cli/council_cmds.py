"""``rune council "<question>"`` and ``rune council detect``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .app import (
    EXIT_BAD_INPUT,
    EXIT_CANCELLED,
    EXIT_NOTHING_GATHERED,
    council_app,
    fail,
)

if TYPE_CHECKING:
    from ..contract import CouncilResult, RunEvent


def _progress(result: CouncilResult, event: RunEvent) -> None:
    if event.kind == "voice.status" and event.voice_id:
        voice = next(v for v in result.voices if v.id == event.voice_id)
        typer.echo(
            f"  {voice.id} {voice.runtime:<10} {voice.model_family:<10} {voice.status:<9} "
            f"{event.detail}",
            err=True,
        )
    elif event.kind == "council.dispatched":
        typer.echo(f"council {result.id}: dispatching {len(result.voices)} voice(s)", err=True)


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
        str, typer.Option(help="critique | review | judge (generate is not served).")
    ] = "judge",
    n: Annotated[int, typer.Option("--n", help="Voices, 2-5 (more is capped at 5).")] = 3,
    artifact: Annotated[
        Path | None, typer.Option(help="A file the voices critique or review, inlined.")
    ] = None,
    timeout: Annotated[float, typer.Option(help="Per-voice timeout in seconds.")] = 180.0,
    run_id: Annotated[str | None, typer.Option("--id", help="Run id (a safe file name).")] = None,
    subagent_cmd: Annotated[
        str | None,
        typer.Option(help="Command that answers a prompt on stdin; takes failed or empty slots."),
    ] = None,
    subagent_family: Annotated[
        str | None, typer.Option(help="Model family of the subagent command (default unknown).")
    ] = None,
    prefer: Annotated[
        list[str] | None, typer.Option(help="Model family to seat first; repeatable.")
    ] = None,
    refresh: Annotated[
        bool, typer.Option(help="Probe the CLIs again, ignoring the cache.")
    ] = False,
    rune_dir: Annotated[
        Path | None, typer.Option(help="Where .rune files go (default ./.rune).")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the CouncilResult as JSON.")
    ] = False,
) -> None:
    from ..config import load_config
    from ..council import convene, new_run_id
    from ..errors import CouncilError, NotImplementedModeError, RequestError
    from ..paths import RuneDir
    from ..render import render
    from ..runtimes.subagent import CommandRuntime

    where = RuneDir.resolve(rune_dir)
    if question == "-":
        question = sys.stdin.read().strip()
    try:
        config = load_config(where)
        command = subagent_cmd or config.subagent_command
        family = subagent_family or config.subagent_family or "unknown"
        subagent = (
            CommandRuntime.from_command_line(command, model_family=family) if command else None
        )
        request: dict[str, Any] = {
            "id": run_id or new_run_id(),
            "question": question,
            "mode": mode,
            "n": n,
            "budget": {"per_voice_timeout_s": timeout},
            "diversity": {"prefer_model_families": prefer or []},
        }
        if artifact is not None:
            # Absolute, so the run file still says which file it was from anywhere.
            request["artifact"] = {"name": artifact.name, "path": str(artifact.absolute())}
        result = convene(
            request,
            subagent=subagent,
            rune_dir=where.root,
            refresh=refresh,
            on_event=None if as_json else _progress,
        )
    except NotImplementedModeError as exc:
        raise fail(str(exc), EXIT_BAD_INPUT) from None
    except RequestError as exc:
        raise fail(str(exc), EXIT_BAD_INPUT) from None
    except KeyboardInterrupt:
        raise fail("cancelled; the run file records what had completed", EXIT_CANCELLED) from None
    except CouncilError as exc:
        raise fail(str(exc), EXIT_BAD_INPUT) from None
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
    else:
        typer.echo(render(result))
    if result.voices_valid == 0:
        if not as_json:
            typer.echo("rune council: no voice produced a usable answer", err=True)
        raise typer.Exit(EXIT_NOTHING_GATHERED)


@council_app.command("detect", help="Show which AI CLIs are installed and their families.")
def detect_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print runtimes.json.")] = False,
    refresh: Annotated[bool, typer.Option(help="Probe again, ignoring today's cache.")] = False,
    rune_dir: Annotated[Path | None, typer.Option(help="Where .rune files go.")] = None,
) -> None:
    import asyncio

    from ..paths import RuneDir
    from ..stages.detect import detect

    where = RuneDir.resolve(rune_dir)
    report, cached = asyncio.run(detect(where, refresh=refresh))
    if as_json:
        typer.echo(json.dumps(report.model_dump(mode="json"), indent=2))
        return
    source = "cached today" if cached else "probed now"
    typer.echo(f"runtimes ({source}, {report.checked_at}) → {where.runtimes_file}")
    for d in report.detected:
        version = d.version or "-"
        where_ = d.path or d.detail
        typer.echo(
            f"  {d.runtime:<8} {d.status:<11} {d.model_family:<10} {d.family_confidence:<9} "
            f"{version:<12} {where_}"
        )
    if not any(d.status == "available" for d in report.detected):
        typer.echo("no AI CLI found: councils will run subagent-only (--subagent-cmd)")
