"""Reading a wrapper CLI's backend model from its own configuration, and what it proves.

cline, amp, opencode and aider front whatever model their user configured, so their brand
says nothing about the backend: they count as ``unknown``. When the CLI's own config names
the model it will use, and ``rune_council.core.families`` (reading it as a client's model name)
puts it in a known family, the wrapper is promoted to that family. Each wrapper's reader
lives in its module under ``runtimes/clis/``; they only read files, never write them, and
read them and the environment through a ``Looked``, so that DETECT knows every file and
variable a family came from and reads it again when one of them changes.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..core import safejson
from ..core.families import classify_model
from ..safefile import read_capped
from .auth import Looked
from .scratch import scratch_root

_READ_CAP = 1_000_000


@dataclass(frozen=True)
class BackendReading:
    family: str
    model: str
    evidence: str  # where the model name was found, for the detect report


BackendReader = Callable[[Looked], BackendReading | None]


def home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or "~").expanduser()


def run_dir_ancestors() -> list[Path]:
    """The directories a CLI finds above the one it runs in, nearest first, up to the git
    work tree holding them (else the root): each voice runs in a fresh, empty private
    directory under the scratch root, so these are its "project" for every CLI that
    looks for a project-local config by walking up from where it runs."""
    found: list[Path] = []
    here = Path(os.path.realpath(scratch_root().path))
    for directory in (here, *here.parents):
        found.append(directory)
        if (directory / ".git").exists():
            break
    return found


def read_text(path: Path) -> str | None:
    """Up to 1 MB of a regular file (never a FIFO or device, which could block or flood)."""
    try:
        data, _cut = read_capped(path, _READ_CAP)
    except OSError:
        return None
    return data.decode("utf-8", errors="replace")


def loads_jsonc(text: str) -> object:
    try:
        return safejson.loads(text, what="config")
    except json.JSONDecodeError:
        pass
    # JSON with comments: drop whole-line and block comments and trailing commas.
    stripped = re.sub(r"/\*.*?\*/", "", text, flags=re.DOTALL)
    stripped = re.sub(r"(?m)^\s*//.*$", "", stripped)
    stripped = re.sub(r",(\s*[}\]])", r"\1", stripped)
    try:
        return safejson.loads(stripped, what="config")
    except json.JSONDecodeError:
        return None


def reading(model: object, evidence: str) -> BackendReading | None:
    """A promotion, if ``model`` (found at ``evidence``) names a model of a known family."""
    if not isinstance(model, str) or not model.strip():
        return None
    family = classify_model(model, named_by="client")
    if family.confidence != "confirmed":
        return None
    return BackendReading(family.family, model, evidence)
