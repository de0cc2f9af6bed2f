"""The ``rune`` Typer apps and the helpers every command shares.

Heavy modules (pydantic, the stages) are imported inside the commands so ``rune --help``
starts fast. Every command ends with a code from ``rune_council.errors.ExitCode``; an error
is turned into one through ``exit_code_for``, the one table (see README "Exit codes").
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer
from typer.core import TyperGroup

from ..errors import ExitCode

# The names commands used before the table; each is the table's code.
EXIT_OK = ExitCode.OK
EXIT_NOTHING_GATHERED = ExitCode.NO_VERDICT
EXIT_BAD_INPUT = ExitCode.BAD_INPUT
EXIT_INTERNAL = ExitCode.INTERNAL
EXIT_CANCELLED = ExitCode.CANCELLED


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
    """The library's errors as one line and the exit code the table gives their class."""
    from ..errors import CouncilError, exit_code_for

    try:
        yield
    except KeyboardInterrupt as exc:
        if not cancellable:
            raise
        from .signals import signal_exit_code

        code = signal_exit_code(exc)
        why = f" by {exc}" if code != ExitCode.CANCELLED else ""
        raise fail(f"cancelled{why}; the run file records what had completed", code) from None
    except CouncilError as exc:
        raise fail(str(exc), exit_code_for(exc)) from None
