"""``rune council endpoints``: which endpoint models a council would seat, in which order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from .app import council_app, council_errors


@council_app.command(
    "endpoints", help="List the HTTP endpoints' models, ranked, with their families."
)
def endpoints_command(
    endpoint: Annotated[
        list[str] | None,
        typer.Option(help="Base URL, preset (nim, ollama) or configured name; repeatable."),
    ] = None,
    key_env: Annotated[
        str | None, typer.Option(help="Environment variable holding the key for --endpoint.")
    ] = None,
    refresh_models: Annotated[
        bool, typer.Option(help="List the models again, ignoring the 6 h cache.")
    ] = False,
    rune_dir: Annotated[Path | None, typer.Option(help="Where .rune files go.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the survey as JSON.")] = False,
) -> None:
    import asyncio
    import os

    from ..config import load_config
    from ..endpoints import setup_from_options, survey
    from ..paths import RuneDir

    where = RuneDir.resolve(rune_dir)
    with council_errors():
        config = load_config(where)
        setup = setup_from_options(
            where,
            endpoints=endpoint or (),
            key_env=key_env,
            refresh=refresh_models,
            with_subagent=False,
            config=config,
        )
        surveys = asyncio.run(survey(setup, where, dict(os.environ)))
    for note in config.notes:
        typer.echo(f"rune council: note: {note}", err=True)
    if as_json:
        doc = [
            {
                "endpoint": s.name,
                "base_url": s.base_url,
                "key": s.key,
                "models_from": s.source,
                "fetched_at": s.fetched_at,
                "ranked": [
                    {
                        "model": c.model,
                        "family": c.family,
                        "family_confidence": c.confidence,
                        "why": c.why,
                    }
                    for c in s.ranked
                ],
                "left_out": s.left_out,
                "notes": s.notes,
            }
            for s in surveys
        ]
        typer.echo(json.dumps(doc, indent=2))
        return
    if not surveys:
        typer.echo(
            "no endpoints: add [endpoints.NAME] to council.toml or pass --endpoint URL "
            "(presets: nim, ollama)"
        )
        return
    for s in surveys:
        when = f" at {s.fetched_at}" if s.fetched_at else ""
        typer.echo(f"{s.name}  {s.base_url}  key: {s.key}  ({s.source}{when})")
        for rank, c in enumerate(s.ranked, start=1):
            typer.echo(f"  {rank:>2} {c.model:<48} {c.family:<10} {c.confidence:<9} {c.why}")
        if s.left_out:
            typer.echo(
                f"  left out ({len(s.left_out)}, excluded or not a chat model): "
                + ", ".join(s.left_out)
            )
        for note in s.notes:
            typer.echo(f"  note: {note}")
