"""Settings a user keeps in ``<rune dir>/council.toml`` instead of repeating flags.

[subagent]
command = "my-host-agent --answer"   # prompt on stdin, answer on stdout
family = "anthropic"                  # what the host's model is; default unknown
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import safejson
from .errors import RuntimeConfigError
from .paths import RuneDir
from .safefile import read_capped_text

CONFIG_NAME = "council.toml"
# The per-user settings directory: $RUNE_COUNCIL_CONFIG_DIR, else the XDG config home.
ENV_CONFIG_DIR = "RUNE_COUNCIL_CONFIG_DIR"


@dataclass(frozen=True)
class CouncilConfig:
    subagent_command: str | None = None
    subagent_family: str | None = None


def read_council_toml(rune_dir: RuneDir) -> dict[str, Any]:
    """The parsed ``council.toml`` (empty when there is none); each section's owner validates it."""
    path = rune_dir.root / CONFIG_NAME
    try:
        return safejson.loads_toml(read_capped_text(path, 1_000_000), what=str(path))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise RuntimeConfigError(f"{path}: {exc}") from exc


def user_config_file(env: Mapping[str, str] | None = None) -> Path:
    """``council.toml`` in the user's config directory (shared by every project)."""
    env = os.environ if env is None else env
    if env.get(ENV_CONFIG_DIR):
        return Path(env[ENV_CONFIG_DIR]).expanduser() / CONFIG_NAME
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or "~").expanduser() / ".config")
    return Path(base) / "rune-council" / CONFIG_NAME


def read_toml_file(path: Path) -> dict[str, Any]:
    """A parsed TOML file, empty when it does not exist; unreadable or invalid is an error."""
    try:
        return safejson.loads_toml(read_capped_text(path, 1_000_000), what=str(path))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
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
