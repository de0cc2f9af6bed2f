"""Settings a user keeps in ``<rune dir>/council.toml`` instead of repeating flags.

[subagent]
command = "my-host-agent --answer"   # prompt on stdin, answer on stdout
family = "anthropic"                  # what the host's model is; default unknown
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from typing import Any

from .errors import RuntimeConfigError
from .paths import RuneDir

CONFIG_NAME = "council.toml"


@dataclass(frozen=True)
class CouncilConfig:
    subagent_command: str | None = None
    subagent_family: str | None = None


def read_council_toml(rune_dir: RuneDir) -> dict[str, Any]:
    """The parsed ``council.toml`` (empty when there is none); each section's owner validates it."""
    path = rune_dir.root / CONFIG_NAME
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise RuntimeConfigError(f"{path}: {exc}") from exc


def load_config(rune_dir: RuneDir) -> CouncilConfig:
    path = rune_dir.root / CONFIG_NAME
    data = read_council_toml(rune_dir)
    sub = data.get("subagent", {})
    if not isinstance(sub, dict):
        raise RuntimeConfigError(f"{path}: [subagent] must be a table")
    command, family = sub.get("command"), sub.get("family")
    for key, value in (("command", command), ("family", family)):
        if value is not None and not isinstance(value, str):
            raise RuntimeConfigError(f"{path}: subagent.{key} must be a string")
    return CouncilConfig(subagent_command=command, subagent_family=family)
