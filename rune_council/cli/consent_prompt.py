"""The interactive half of consent: ask on a terminal before the first external dispatch.

The library never prompts; it takes ``allow_external`` or the standing settings (see
``rune_council.consent``). The command line adds ``--yes`` and, when both stdin and stderr
are a terminal and nothing has decided yet, one question naming the CLIs that would get the
prompt. A yes is remembered for this project's rune dir.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import TYPE_CHECKING

import typer

from .app import echo

if TYPE_CHECKING:
    from ..config import CouncilConfig
    from ..paths import RuneDir


def _interactive() -> bool:
    return sys.stdin.isatty() and sys.stderr.isatty()


def external_consent(
    where: RuneDir, *, yes: bool, refresh: bool = False, config: CouncilConfig | None = None
) -> bool | None:
    """True/False when decided here; None leaves it to the environment and config files."""
    if yes:
        return True
    if not _interactive():
        return None
    from ..config import load_config
    from ..consent import decide, remember
    from ..discovery.assembly import assemble_clis

    env = dict(os.environ)
    config = load_config(where, env) if config is None else config
    if decide(None, env, config, where) is not None:
        return None
    found = asyncio.run(
        assemble_clis(where, env=env, refresh=refresh, allow_external=True, config=config)
    )
    names = [r.name for r in found.runtimes]
    if not names:
        return None
    echo(
        f"rune council: this sends the question (and any artifact) to {', '.join(names)}, "
        "which pass it to the model services they are configured for.",
        err=True,
    )
    granted = typer.confirm("Allow external AI CLIs for this project?", default=False, err=True)
    if granted:
        remember(where, env)
    return granted
