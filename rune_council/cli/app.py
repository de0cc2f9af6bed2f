"""The ``rune`` Typer apps and the helpers every command shares.

Heavy modules (pydantic, the stages) are imported inside the commands so ``rune --help``
starts fast. Every command ends with a code from ``rune_council.core.errors.ExitCode``; an error
is turned into one through ``exit_code_for``, the one table (see README "Exit codes").

Commands print only through ``echo`` (text) and ``echo_json`` (documents): what they print
quotes model ids, endpoint names, error bodies, voice answers and file names, any of which
can carry escape sequences, and these two are where all of it is made inert. A test keeps
every other way of writing to the terminal out of the command modules.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import typer
from typer.core import TyperGroup
from typer.models import CommandInfo

from ..core.errors import ExitCode


def _asks_a_question(args: Sequence[str], commands: Collection[str]) -> bool:
    """``rune council "<question>" ...``: the first word is no subcommand and no help flag."""
    return bool(args) and args[0] not in commands and args[0] not in ("--help", "-h")


# Typer parses with its own copy of click where it ships one.
try:
    from typer._click.exceptions import NoSuchOption as _NoSuchOption
except ImportError:  # pragma: no cover - a Typer that uses click itself
    from click.exceptions import NoSuchOption as _NoSuchOption  # type: ignore[assignment]

# How alike an unknown option and a real one must be to be offered: a typo (--mdoe, --yse,
# --artefact) is, a different word that shares a few letters (--bogus and --rounds) is not.
CLOSE_MATCH = 0.66


def close_options(given: str, options: Collection[str]) -> list[str]:
    """The long options ``given`` is most likely a typo of, compared without their dashes
    (which every option shares, and which would make any two look alike)."""
    bare = {o.lstrip("-"): o for o in options if o.startswith("--")}
    found = difflib.get_close_matches(given.lstrip("-"), bare, n=3, cutoff=CLOSE_MATCH)
    return [bare[name] for name in found]


def _with_close_matches(exc: _NoSuchOption) -> _NoSuchOption:
    command = exc.ctx.command if exc.ctx is not None else None
    options = [o for p in command.params for o in p.opts] if command is not None else []
    return _NoSuchOption(
        exc.option_name, possibilities=close_options(exc.option_name, options), ctx=exc.ctx
    )


class _CouncilGroup(TyperGroup):
    """``rune council "<question>"`` runs a council; known words run subcommands.

    Its help leads with the council's own options: asking a question is what the command is
    for, and ``run`` is only its explicit spelling."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if _asks_a_question(args, self.commands):
            args = ["run", *args]
        return super().parse_args(ctx, args)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except _NoSuchOption as exc:
            raise _with_close_matches(exc) from None

    def format_usage(self, ctx: Any, formatter: Any) -> None:
        formatter.write_usage(ctx.command_path, '"<question>" [OPTIONS]')
        formatter.write_usage(ctx.command_path, "COMMAND [ARGS]...", prefix="   or: ")

    def format_options(self, ctx: Any, formatter: Any) -> None:
        run = self.commands.get("run")
        if run is not None:
            run_ctx = type(ctx)(run, info_name="run", parent=ctx)
            rows = [
                record
                for param in run.get_params(run_ctx)
                if param.param_type_name == "option" and param.name != "help"
                if (record := param.get_help_record(run_ctx)) is not None
            ]
            with formatter.section(f'Council options ({ctx.command_path} "<question>" ...)'):
                formatter.write_dl(rows)
        super().format_options(ctx, formatter)


# ``rune council <name>``: the module that declares it. A command line loads only the module
# of the command it names (each brings its own dependencies: asyncio, the batch runner, the
# review diff); help, shell completion and library callers see every command.
COMMAND_MODULES = {
    "batch": "batch_cmd",
    "consent": "consent_cmd",
    "run": "council_cmds",
    "templates": "council_cmds",
    "detect": "council_cmds",
    "demo": "demo_cmd",
    "doctor": "doctor_cmd",
    "endpoints": "endpoint_cmds",
    "eval": "eval_cmd",
    "install": "install_cmd",
    "mcp": "mcp_cmd",
    "review": "review_cmd",
    "watch": "runs_cmds",
    "show": "runs_cmds",
    "list": "runs_cmds",
    "verify": "runs_cmds",
    "serve": "serve_cmd",
    "stats": "stats_cmd",
    "tally": "tally_cmd",
    "trust": "trust_cmd",
}


class _CouncilTyper(typer.Typer):
    """The ``council`` app, whose commands are declared by their modules on first look.

    Typer reads ``registered_commands`` when it builds the command line (and a test or
    caller when it inspects it); that first read imports the command modules: every one,
    unless ``only`` has named the single command this process runs.
    """

    def __init__(self, **settings: Any) -> None:
        self._commands: list[CommandInfo] = []
        self._only: str | None = None
        self._loaded = False
        super().__init__(**settings)

    @property
    def registered_commands(self) -> list[CommandInfo]:
        if not self._loaded:
            # Set first: each module's decorators append through this property.
            self._loaded = True
            import importlib

            wanted = [COMMAND_MODULES[self._only]] if self._only else COMMAND_MODULES.values()
            for module in dict.fromkeys(wanted):
                importlib.import_module(f".{module}", __package__)
            if self._only:
                self._commands[:] = [c for c in self._commands if _name_of(c) == self._only]
        return self._commands

    @registered_commands.setter
    def registered_commands(self, value: list[CommandInfo]) -> None:
        self._commands = value

    def only(self, name: str) -> None:
        """Declare only the command ``name`` (before anything has looked at the commands)."""
        if not self._loaded:
            self._only = name


def _name_of(info: CommandInfo) -> str:
    if info.name:
        return info.name
    from typer.main import get_command_name

    assert info.callback is not None
    return get_command_name(info.callback.__name__)


app = typer.Typer(
    help="rune-council: convene independent AI voices on one question, honestly arbitrated.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
council_app = _CouncilTyper(
    cls=_CouncilGroup,
    help='Convene a council: rune council "<question>" with the council options listed '
    "below (the same as rune council run), or run one of the commands.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
app.add_typer(council_app, name="council")


def command_to_run(argv: Sequence[str]) -> str | None:
    """The one ``rune council`` command this command line runs, or None when it may need
    them all (help, shell completion, anything but ``council``).

    Typer reads the signature of every declared command before it parses anything, and
    each command module imports what it needs; a command that loads only its own module
    saves every other command's imports and signatures.
    """
    if argv[:1] != ["council"] or any(k.endswith("_COMPLETE") for k in os.environ):
        return None
    if _asks_a_question(argv[1:], COMMAND_MODULES):
        return "run"
    return argv[1] if len(argv) > 1 and argv[1] in COMMAND_MODULES else None


def load_only_what_runs(argv: Sequence[str]) -> str | None:
    """Before Typer builds the command line, declare only the command ``argv`` runs; which
    one that is (``command_to_run``)."""
    name = command_to_run(argv)
    if name is not None:
        council_app.only(name)
    return name


# What a line of plain printable ASCII holds besides its printable characters: newline and
# tab, which ``plain`` keeps, and carriage return, which a JSON serializer may write between
# tokens and ``json_text`` keeps. Text made only of these holds no escape sequence and no
# character either filter removes or escapes, so only its URL credentials are left to mask;
# a bytes table deletes the allowed bytes in one C pass, where the filters' regular
# expressions look at every character (a third of a second for a 40 MB tally).
_PRINTABLE = bytes(range(0x20, 0x7F))
_PLAIN_KEEP = _PRINTABLE + b"\n\t"
_JSON_KEEP = _PLAIN_KEEP + b"\r"


def _only(text: str, allowed: bytes) -> bytes | None:
    """``text`` as ASCII bytes if it is made of ``allowed`` bytes only, else None: the bytes
    made for the check are handed back so a caller can print them without encoding again."""
    if not text.isascii():
        return None
    encoded = text.encode("ascii")
    return None if encoded.translate(None, allowed) else encoded


# Bytes handed to the stream's binary writer come out as they are; text would have its
# newlines turned into the platform's, so bytes are written only where that changes nothing.
_BYTES_AS_TEXT = os.linesep == "\n"


def _takes_bytes(err: bool = False) -> bool:
    """Whether the stream ``typer.echo`` writes to has the binary writer bytes go to."""
    import sys

    return _BYTES_AS_TEXT and hasattr(sys.stderr if err else sys.stdout, "buffer")


def echo(message: str = "", *, err: bool = False, nl: bool = True) -> None:
    """Print text for a person: no escape sequence, control character (but newline and tab)
    or URL credential in ``message`` reaches the terminal (``safetext.plain``)."""
    from ..core.safetext import mask_url_credentials, plain

    encoded = _only(message, _PLAIN_KEEP)
    if encoded is None:
        typer.echo(plain(message), err=err, nl=nl)
    elif b"://" not in encoded and _takes_bytes(err):
        # Nothing to mask: the bytes already made for the check are what is printed, not
        # encoded again by the text stream (40 MB for a long tally).
        typer.echo(encoded, err=err, nl=nl)
    else:
        typer.echo(mask_url_credentials(message), err=err, nl=nl)


def echo_json(document: str | bytes, *, nl: bool = True) -> None:
    """Print a serialized JSON document on stdout, every control character in it escaped
    so a terminal shows it inert and a program reads the same values (``safetext.json_text``)."""
    from ..core.safetext import json_text, mask_url_credentials

    if isinstance(document, bytes):
        # Checked as the bytes they are: a 90 MB document is not encoded again to be checked.
        if document.isascii() and not document.translate(None, _JSON_KEEP):
            if b"://" not in document and _takes_bytes():
                # Nothing to mask either: printed as the bytes they are, never decoded and
                # encoded again on the way out.
                typer.echo(document, nl=nl)
                return
            shown = mask_url_credentials(document.decode("ascii"))
        else:
            shown = json_text(document.decode("utf-8", "replace"))
    else:
        shown = (
            mask_url_credentials(document)
            if _only(document, _JSON_KEEP) is not None
            else json_text(document)
        )
    typer.echo(shown, nl=nl)


def fail(message: str, code: int) -> typer.Exit:
    """Print one clear line to stderr and hand back the exit to raise."""
    echo(f"rune council: {message}", err=True)
    return typer.Exit(code)


@contextmanager
def council_errors(cancellable: bool = False) -> Iterator[None]:
    """The library's errors as one line and the exit code the table gives their class."""
    from ..core.errors import CouncilError, exit_code_for

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
