"""``rune council install <host>``: the skill, a ``/rune`` command and the MCP server in an
agent host (Claude Code, Gemini CLI, Codex), or ``--uninstall`` to take them out again."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from ..core.errors import ExitCode
from .app import council_app, council_errors, echo, echo_json

if TYPE_CHECKING:
    from ..hosts import ServerCheck

_VERBS = {
    "create": ("created", "would create"),
    "update": ("updated", "would update"),
    "overwrite": ("replaced", "would replace"),
    "unchanged": ("unchanged", "unchanged"),
    "remove": ("removed", "would remove"),
    "keep": ("kept", "would keep"),
    "gone": ("already gone", "already gone"),
}


@council_app.command(
    "install",
    help="Put the council into an agent host: the rune-council skill, a /rune command "
    '(`/rune council "<question>"`; in Codex the $rune skill) and the council\'s MCP server. '
    "User-wide by default, or into the current project with --project. Installing again "
    "changes nothing; --uninstall removes exactly what was installed.",
)
def install_command(
    host: Annotated[str, typer.Argument(help="claude, gemini or codex.")],
    project: Annotated[
        bool, typer.Option("--project", help="Install into the current project, not user-wide.")
    ] = False,
    uninstall: Annotated[
        bool, typer.Option("--uninstall", help="Remove what an earlier install wrote.")
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Replace files and config entries rune did not write (or that were changed "
            "since), and on --uninstall remove changed ones too.",
        ),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would change and change nothing.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the changes as JSON.")] = False,
) -> None:
    from ..hosts import install
    from ..hosts import uninstall as remove

    with council_errors():
        run = remove if uninstall else install
        outcome = run(host, project=project, force=force, dry_run=dry_run)
    if as_json:
        doc = {
            "host": outcome.host,
            "scope": outcome.scope,
            "uninstall": outcome.uninstall,
            "dry_run": outcome.dry_run,
            "changed": outcome.changed,
            "usage": outcome.usage,
            "manifest": str(outcome.manifest),
            "changes": [
                {"action": c.action, "path": str(c.path), "what": c.what, "detail": c.detail}
                for c in outcome.changes
            ],
            "notes": list(outcome.notes),
            "server": (
                {"starts": outcome.server.starts, "detail": outcome.server.detail}
                if outcome.server is not None
                else None
            ),
        }
        echo_json(json.dumps(doc, indent=2))
        _exit_if_it_would_not_start(outcome.server)
        return
    for change in outcome.changes:
        done, would = _VERBS[change.action]
        verb = would if dry_run else done
        detail = f" — {change.detail}" if change.detail else ""
        echo(f"{verb:<13} {change.path}  ({change.what}{detail})")
    # A no-op install need not repeat the advice; an uninstall's notes say why it did nothing.
    if outcome.changed or outcome.uninstall:
        for note in outcome.notes:
            echo(note)
    if outcome.server is not None:
        echo(("" if outcome.server.starts else "would fail: ") + outcome.server.detail)
    where = f"{outcome.host} ({outcome.scope})"
    if not outcome.changed:
        summary = f"nothing to change for {where}"
    elif dry_run:
        summary = f"dry run: nothing was changed for {where}"
    elif uninstall:
        summary = f"removed rune-council from {where}"
    else:
        summary = f"installed rune-council into {where}: {outcome.usage}"
    echo(summary)
    _exit_if_it_would_not_start(outcome.server)


def _exit_if_it_would_not_start(server: ServerCheck | None) -> None:
    # Only a dry run gets here with a server that does not start (an install refuses): it
    # fails as the install would, so a script that checks first learns it.
    if server is not None and not server.starts:
        raise typer.Exit(ExitCode.BAD_INPUT)
