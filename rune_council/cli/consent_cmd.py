"""``rune council consent``: the user allows this project's councils to send the question out.

It records the yes the terminal prompt of ``rune council`` records (``consent.remember``),
so the library's one rule reads it for every door: the CLI, ``serve`` and the MCP server a
host starts, whose tools cannot grant it. It asks on the user's own terminal and takes no
flag that answers for them: an agent's shell tool has no terminal to answer on, and a piped
"y" is refused, so the yes is the person's.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from ..core.errors import ExitCode
from .app import council_app, council_errors, echo, fail


@council_app.command(
    "consent",
    help="Allow councils in this project to send the question (and any artifact) to the AI "
    "CLIs and endpoints found here; asked on your terminal, remembered for this project. "
    "This is what an agent host's /rune council asks you to run.",
)
def consent_command(
    rune_dir: Annotated[
        Path | None, typer.Option(help="The project's rune dir (default ./.rune).")
    ] = None,
) -> None:
    from ..config import load_config
    from ..consent import decide, remember
    from ..core.paths import RuneDir
    from ..discovery.assembly import assemble_clis
    from ..endpoints import load_setup

    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        raise fail(
            "consent is asked on your own terminal; run this there yourself (a script sets "
            "RUNE_COUNCIL_ALLOW_EXTERNAL=1 instead)",
            ExitCode.BAD_INPUT,
        )
    env = dict(os.environ)
    with council_errors():
        where = RuneDir.resolve(rune_dir)
        config = load_config(where, env)
        standing = decide(None, env, config, where)
        found = asyncio.run(assemble_clis(where, env=env, allow_external=True, config=config))
        names = [r.name for r in found.runtimes]
        names += [f"endpoint {e.name}" for e in load_setup(where, env, config=config).endpoints]
    project = where.root.parent
    if standing is not None and not standing.allowed:
        # The environment and council.toml come first in the one rule: a yes here would not
        # change what councils do, so say what does.
        raise fail(
            f"external dispatch is {standing.describe()}, which wins over a yes given here; "
            "change that setting instead",
            ExitCode.BAD_INPUT,
        )
    sent_to = ", ".join(names) if names else "the AI CLIs and endpoints found when a council runs"
    echo(
        f"rune council: councils in {project} will send the question (and any artifact) to "
        f"{sent_to}, which pass it to the model services they are configured for.",
        err=True,
    )
    if not typer.confirm("Allow this for this project?", default=False, err=True):
        echo("not allowed; nothing was changed")
        raise typer.Exit(ExitCode.NO_VERDICT)
    with council_errors():
        remember(where, env)
    echo(
        f"allowed for {project}: councils there may use {sent_to}. To take it back, delete "
        f"{where.root / 'consent.json'}."
    )
