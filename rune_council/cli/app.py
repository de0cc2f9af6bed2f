"""The ``rune`` Typer apps, exit codes and the helpers every command shares.

Heavy modules (pydantic, the stages) are imported inside the commands so ``rune --help``
starts fast. Exit codes: 0 a result with at least one valid voice; 1 nothing could be
gathered (no voice passed); 2 bad input (a malformed request, an unusable option, a mode
that is not served); 70 an internal error; 130 cancelled.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer
from typer.core import TyperGroup

EXIT_OK = 0
EXIT_NOTHING_GATHERED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 70
EXIT_CANCELLED = 130


class _CouncilGroup(TyperGroup):
    """``rune council "<question>"`` runs a council; known words run subcommands."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


app = typer.Typer(
    help="rune-council: convene independent AI voices on one question, honestly arbitrated.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
council_app = typer.Typer(
    cls=_CouncilGroup,
    help='Convene a council: rune council "<question>" [options], or a subcommand.',
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
app.add_typer(council_app, name="council")


def fail(message: str, code: int) -> typer.Exit:
    """Print one clear line to stderr and hand back the exit to raise."""
    from ..safetext import plain

    # Messages quote file names, run files and voice output: shown as text, never escapes.
    typer.echo(f"rune council: {plain(message)}", err=True)
    return typer.Exit(code)


@contextmanager
def council_errors(cancellable: bool = False) -> Iterator[None]:
    """The library's errors as one line and an exit code: bad input, or cancelled."""
    from ..errors import CouncilError

    try:
        yield
    except KeyboardInterrupt as exc:
        if not cancellable:
            raise
        from .signals import exit_code_for

        code = exit_code_for(exc)
        why = f" by {exc}" if code != EXIT_CANCELLED else ""
        raise fail(f"cancelled{why}; the run file records what had completed", code) from None
    except CouncilError as exc:
        raise fail(str(exc), EXIT_BAD_INPUT) from None
