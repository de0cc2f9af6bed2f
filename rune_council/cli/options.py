"""Council options worded alike in more than one command, declared once.

A flag that names a key of an ask is spelled as the intake spells it (``intake.FLAGS``);
the intake is not imported here, because it loads the contract and every command's
``--help`` would pay for it. Tests hold each command's flags to ``FLAGS`` instead.

Where a command words an option its own way (a batch's ``--n`` is the default of every
line, a review's ``--yes`` sends a change), it keeps its own declaration: the help a user
reads stays the command's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

# Every command that convenes a council.
RuneDirOption = Annotated[
    Path | None, typer.Option("--rune-dir", help="Where .rune files go (default ./.rune).")
]
PreferOption = Annotated[
    list[str] | None, typer.Option("--prefer", help="Model family to seat first; repeatable.")
]
RunIdOption = Annotated[str | None, typer.Option("--id", help="Run id (a safe file name).")]
RoundsOption = Annotated[int | None, typer.Option("--rounds", help="Deliberation rounds at most.")]
OnDivergenceOption = Annotated[
    str | None,
    typer.Option("--on-divergence", help="warn | halt | continue when consensus falls."),
]
SubagentCmdOption = Annotated[
    str | None,
    typer.Option(
        "--subagent-cmd",
        help="Command that answers a prompt on stdin; takes failed or empty slots.",
    ),
]
SubagentFamilyOption = Annotated[
    str | None,
    typer.Option("--subagent-family", help="Model family of the subagent command."),
]
SubagentModelOption = Annotated[
    str | None, typer.Option("--subagent-model", help="Model id for --subagent-endpoint.")
]
TimeoutOption = Annotated[
    float | None, typer.Option("--timeout", help="Per-voice timeout in seconds.")
]

# The commands that run items (a batch's lines, an eval's labelled changes): their flags
# give every item's defaults, in the short words of a list of items.
RetryFailedOption = Annotated[
    bool,
    typer.Option(
        "--retry-failed/--no-retry-failed",
        help="Run again the items whose earlier run failed or gave no verdict.",
    ),
]
ItemsTemplateOption = Annotated[
    str | None, typer.Option("--template", help="Council template (see templates).")
]
ItemsDeliberateOption = Annotated[
    str | None, typer.Option("--deliberate", help="After the single pass: vote | rank.")
]
ItemsCouncilTypeOption = Annotated[
    str | None, typer.Option("--council-type", help="standard | red_team (risk register).")
]
ItemsEndpointOption = Annotated[
    list[str] | None,
    typer.Option(
        "--endpoint", help="OpenAI-compatible endpoint (URL, preset or council.toml name)."
    ),
]
ItemsKeyEnvOption = Annotated[
    str | None,
    typer.Option("--key-env", help="Environment variable holding the key for --endpoint."),
]
