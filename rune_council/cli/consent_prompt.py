"""The interactive half of consent: ask on a terminal before the first external dispatch.

The library never prompts; it takes ``allow_external`` or the standing settings (see
``rune_council.consent``). The command line adds ``--yes`` and, when both stdin and stderr
are a terminal and nothing has decided yet, one question naming every external CLI and
endpoint that would get the prompt. A yes is remembered for this project's rune dir.
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
    from ..core.paths import RuneDir
    from ..council.options import CouncilOptions


def _interactive() -> bool:
    return sys.stdin.isatty() and sys.stderr.isatty()


def external_consent(
    where: RuneDir,
    *,
    yes: bool,
    refresh: bool = False,
    config: CouncilConfig | None = None,
    options: CouncilOptions | None = None,
) -> bool | None:
    """True/False when decided here; None leaves it to the environment and config files.

    ``options``: the council about to run, so the question names the endpoints it would
    use (``--endpoint`` included); without them, the configured ones."""
    if yes:
        return True
    if not _interactive():
        return None
    from ..config import load_config
    from ..consent import decide, remember
    from ..council.options import CouncilOptions
    from ..council.seating import external_recipients

    env = dict(os.environ)
    config = load_config(where, env) if config is None else config
    if decide(None, env, config, where) is not None:
        return None
    if options is None:
        options = CouncilOptions(rune_dir=where.root, refresh=refresh, config=config)
    names = asyncio.run(external_recipients(options, where, env, config))
    if not names:
        return None
    echo(
        f"rune council: this sends the question (and any artifact) to {', '.join(names)}; "
        "a CLI passes it on to the model service it is configured for.",
        err=True,
    )
    granted = typer.confirm(
        "Allow external AI CLIs and endpoints for this project?", default=False, err=True
    )
    if granted:
        remember(where, env)
    return granted
