"""The council options several commands share are spelled as the intake spells its keys, so
a flag typed at `rune council`, `batch`, `eval` or `review` means what the same key means in
an HTTP body, a tool call or a batch line."""

from __future__ import annotations

import typing

from rune_council.cli import options
from rune_council.council.intake import FLAGS

# Options of the command line itself, not keys of an ask.
OWN = {"--rune-dir", "--retry-failed"}


def _flags_of(alias: object) -> list[str]:
    info = typing.get_args(alias)[1]
    return [name.partition("/")[0] for name in info.param_decls]


def test_every_shared_option_is_an_intake_flag_or_the_commands_own() -> None:
    aliases = {name: getattr(options, name) for name in dir(options) if name.endswith("Option")}
    assert aliases
    for name, alias in aliases.items():
        for flag in _flags_of(alias):
            assert flag in OWN or flag in FLAGS.values(), (name, flag)
