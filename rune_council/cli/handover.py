"""Commands that hand the process to another door (``serve``, ``mcp``).

Those doors run as ``python -m <module>`` so the CLI never imports them; help alone is
read from a child so that an in-process caller (a test runner, a shell completer) keeps
its own process. The child only describes its options; they are laid out here the way every
other command of this CLI shows its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import typer

from .app import council_app, echo

# Run in the child: the door's argparse parser, described as data.
_DESCRIBE = """
import importlib, json, sys
p = importlib.import_module(sys.argv[1] + ".__main__").parser()
print(json.dumps({"description": p.description, "options": [
    {"opts": a.option_strings, "metavar": a.metavar, "help": a.help, "takes_value": a.nargs != 0,
     "type": getattr(a.type, "__name__", None)}
    for a in p._actions if a.option_strings and "--help" not in a.option_strings]}))
"""
_METAVARS = {"int": "<int>", "float": "<float>", "Path": "<path>"}


def _sentence(text: str | None) -> str:
    text = (text or "").strip()
    if not text:
        return ""
    text = text[0].upper() + text[1:]
    return text if text.endswith(".") else text + "."


def _option_row(option: dict[str, Any]) -> tuple[str, str]:
    opts = sorted(option["opts"], key=lambda o: o.startswith("--"))  # -y, --yes
    name = ", ".join(opts)
    if option["takes_value"]:
        metavar = option["metavar"]
        name += f" <{metavar.lower()}>" if metavar else " " + _METAVARS.get(option["type"], "<str>")
    return name, _sentence(option["help"])


def door_help(ctx: typer.Context, module: str) -> tuple[str, int]:
    """The door's help as this CLI shows help, and the exit code; the child's own words
    (its error) when it cannot describe itself (an extra it needs is missing)."""
    shown = subprocess.run(
        [sys.executable, "-c", _DESCRIBE, module], capture_output=True, text=True, check=False
    )
    try:
        described = json.loads(shown.stdout)
    except ValueError:
        said = shown.stderr.strip().splitlines()
        return (said[-1] if said else f"{ctx.command_path}: cannot show its options"), (
            shown.returncode or 1
        )
    formatter = ctx.make_formatter()
    formatter.write_usage(ctx.command_path, "[OPTIONS]")
    if described.get("description"):
        formatter.write_paragraph()
        with formatter.indentation():
            formatter.write_text(described["description"])
    rows = [_option_row(option) for option in described["options"]]
    rows.append(("--help", "Show this message and exit."))
    with formatter.section("Options"):
        formatter.write_dl(rows)
    return formatter.getvalue(), 0


def door_command(name: str, module: str, help_text: str) -> None:
    """Register ``rune council NAME`` as a hand-over to ``python -m MODULE``."""

    @council_app.command(
        name,
        help=help_text,
        add_help_option=False,
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    )
    def command(ctx: typer.Context) -> None:
        argv = [sys.executable, "-m", module, *ctx.args]
        if any(arg in ("--help", "-h") for arg in ctx.args):
            text, code = door_help(ctx, module)
            echo(text, err=code != 0, nl=not text.endswith("\n"))
            raise typer.Exit(code)
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(sys.executable, argv)
