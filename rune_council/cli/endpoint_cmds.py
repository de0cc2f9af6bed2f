"""``rune council endpoints``: which endpoint models a council would seat, in which order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from .app import council_app, council_errors, echo, echo_json


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
    from ..core.paths import RuneDir
    from ..core.safetext import one_line
    from ..endpoints import setup_from_options, survey, untrusted_endpoints

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
        echo(f"rune council: note: {note}", err=True)
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
        echo_json(json.dumps(doc, indent=2))
        return
    if not surveys:
        left_out = untrusted_endpoints(config)
        if left_out:
            files = sorted(set(left_out.values()))
            echo(
                f"no endpoints in force: {', '.join(sorted(left_out))} "
                f"{'is' if len(left_out) == 1 else 'are'} defined only by {', '.join(files)}, "
                "which is not trusted (a repository may not seat voices); review it, then "
                f"run: rune council trust {files[0]}"
            )
            return
        echo(
            "no endpoints: add [endpoints.NAME] to council.toml or pass --endpoint URL "
            "(presets: nim, ollama)"
        )
        return
    for s in surveys:
        when = f" at {s.fetched_at}" if s.fetched_at else ""
        echo(f"{s.name}  {s.base_url}  key: {s.key}  ({s.source}{when})")
        for rank, c in enumerate(s.ranked, start=1):
            # A model id is the server's text: a newline in it must not forge a row.
            model, why = one_line(c.model, 200), one_line(c.why, 200)
            echo(f"  {rank:>2} {model:<48} {c.family:<10} {c.confidence:<9} {why}")
        if s.left_out:
            echo(
                f"  left out ({len(s.left_out)}, excluded or not a chat model): "
                + one_line(", ".join(s.left_out), 4000)
            )
        for note in s.notes:
            echo(f"  note: {one_line(note, 1000)}")
