"""What ``rune council mcp`` was started with: the only place consent can come from."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class ServerSettings:
    """Fixed for the life of the server; no tool call can change any of it.

    ``workdir`` bounds artifact paths: a tool call may name a file inside it, never outside.
    ``yes`` is the operator's standing consent to dispatch external AI CLIs (``--yes``).
    """

    workdir: Path
    rune_dir: Path
    yes: bool = False
    subagent_cmd: str | None = None
    subagent_family: str | None = None
    env: dict[str, str] = field(default_factory=dict)
