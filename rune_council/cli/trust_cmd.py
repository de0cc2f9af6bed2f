"""``rune council trust``: let a project's council.toml do what only the user may decide.

A repository's ``.rune/council.toml`` may not run programs, seat endpoints as voices, send
keys, pass variables on or grant consent until the user trusts its exact content; this
records (or forgets) that, in the user's config directory, by absolute path and SHA-256.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..core.errors import ExitCode
from .app import council_app, council_errors, echo, fail


@council_app.command(
    "trust",
    help="Trust a project's council.toml as it is now, so its runtimes, endpoints, "
    "[subagent], [env] and [consent] apply; a changed file needs trusting again.",
)
def trust_command(
    path: Annotated[
        Path | None,
        typer.Argument(help="The file to trust (default: council.toml in the rune dir)."),
    ] = None,
    revoke: Annotated[bool, typer.Option("--revoke", help="Stop trusting the file.")] = False,
    list_: Annotated[bool, typer.Option("--list", help="List the trusted files.")] = False,
    rune_dir: Annotated[Path | None, typer.Option(help="Where .rune files go.")] = None,
) -> None:
    from ..config import (
        CONFIG_NAME,
        privileged_parts,
        read_bounded,
        revoke_file,
        trust_file,
        trust_store,
        user_config_file,
    )
    from ..core.errors import RuntimeConfigError
    from ..core.paths import RuneDir
    from ..trust_store import digest, file_key

    if list_:
        if revoke or path is not None:
            raise fail("--list takes no file and no --revoke", ExitCode.BAD_INPUT)
        records = trust_store().records()
        if not records:
            echo("no trusted files")
        for record in records:
            try:
                data = read_bounded(Path(record.path))
            except RuntimeConfigError:
                data = None
            if data is None:
                state = "missing"
            else:
                state = "trusted" if digest(data) == record.sha256 else "changed"
            echo(f"{state:<8} {record.sha256[:12]}  {record.trusted_at}  {record.path}")
        return

    target = path if path is not None else RuneDir.resolve(rune_dir).root / CONFIG_NAME
    shown = file_key(target)
    with council_errors():
        if revoke:
            if revoke_file(target):
                echo(f"no longer trusted: {shown}")
            else:
                echo(f"was not trusted: {shown}")
            return
        if file_key(user_config_file()) == shown:
            echo(f"{shown} is your own config: it always applies, nothing to trust")
            return
        record, settings = trust_file(target)
    parts = privileged_parts(settings)
    what = (
        f"now applies: {', '.join(parts)}"
        if parts
        else "it sets nothing that needed trust (no runtimes, endpoints, [env] or [consent])"
    )
    echo(f"trusted {record.path} (sha256 {record.sha256[:12]}); {what}")
