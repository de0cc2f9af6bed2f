"""``rune council serve``: the HTTP API and the live web view."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from .app import EXIT_BAD_INPUT, council_app, council_errors, fail


@council_app.command("serve", help="Serve councils over HTTP, with a live web view at /.")
def serve_command(
    host: Annotated[
        str, typer.Option(help="Address to listen on; anything but loopback needs a token.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8765,
    max_concurrent: Annotated[
        int, typer.Option(help="Councils that run at once; more wait in the queue.")
    ] = 4,
    max_queued: Annotated[
        int, typer.Option(help="Councils that may wait; beyond it requests get 429.")
    ] = 32,
    artifact_root: Annotated[
        Path | None,
        typer.Option(help="Directory requests may name artifact files under (else text only)."),
    ] = None,
    cors_origin: Annotated[
        list[str] | None, typer.Option(help="Allow this browser origin (CORS); repeatable.")
    ] = None,
    max_body_bytes: Annotated[int, typer.Option(help="Largest request body accepted.")] = 1_000_000,
    subagent_cmd: Annotated[
        str | None,
        typer.Option(help="Command that answers a prompt on stdin; takes failed or empty slots."),
    ] = None,
    subagent_family: Annotated[
        str | None, typer.Option(help="Model family of the subagent command.")
    ] = None,
    rune_dir: Annotated[
        Path | None, typer.Option(help="Where .rune files go (default ./.rune).")
    ] = None,
    yes: Annotated[
        bool,
        typer.Option(
            "--yes",
            "-y",
            help="Allow councils to use the external AI CLIs found (no request can grant this).",
        ),
    ] = False,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "warning",
) -> None:
    from ..config import load_config
    from ..paths import RuneDir

    try:
        from ..serve import TOKEN_ENV, ServeSettings
        from ..serve.server import serve
    except ImportError as exc:
        raise fail(
            f"serve needs the serve extra: pip install 'rune-council[serve]' ({exc})",
            EXIT_BAD_INPUT,
        ) from None
    where = RuneDir.resolve(rune_dir)
    with council_errors():
        config = load_config(where)
        settings = ServeSettings(
            rune_dir=where.root,
            host=host,
            port=port,
            token=os.environ.get(TOKEN_ENV) or None,
            max_concurrent=max_concurrent,
            max_queued=max_queued,
            artifact_root=artifact_root.absolute() if artifact_root else None,
            allow_external=True if yes else None,
            cors_origins=tuple(cors_origin or ()),
            max_body_bytes=max_body_bytes,
            subagent_command=subagent_cmd or config.subagent.command,
            subagent_family=subagent_family or config.subagent.family or "unknown",
        )
        settings.check()
    shown = f"[{host}]" if ":" in host else host
    typer.echo(
        f"rune council serve: http://{shown}:{port}/ (run files in {where.council_dir})", err=True
    )
    serve(settings, log_level=log_level)
