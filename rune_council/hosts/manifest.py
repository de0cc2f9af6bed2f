"""The record of one install: every file written and every config entry merged, with the
digest each had when rune wrote it, so ``--uninstall`` removes exactly that and notices what
the user changed since.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import HostInstallError
from ..core.safejson import UnreadableJSON, loads
from ..safefile import read_capped

FORMAT = 1
MAX_MANIFEST_BYTES = 1_000_000


@dataclass
class FileRecord:
    path: str
    sha256: str


@dataclass
class ConfigRecord:
    path: str
    format: str
    keys: list[str]
    sha256: str
    created_file: bool
    """The file did not exist before rune added its entry."""
    made: list[str] = field(default_factory=list)
    """Containers rune created on the way to its entry (dotted key paths)."""


@dataclass
class Manifest:
    host: str
    scope: str
    files: list[FileRecord] = field(default_factory=list)
    configs: list[ConfigRecord] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)
    """Directories rune created; removed on uninstall when empty."""

    def file(self, path: Path) -> FileRecord | None:
        return next((f for f in self.files if f.path == str(path)), None)

    def config(self, path: Path, keys: tuple[str, ...]) -> ConfigRecord | None:
        return next(
            (c for c in self.configs if c.path == str(path) and tuple(c.keys) == keys), None
        )

    def is_empty(self) -> bool:
        return not self.files and not self.configs

    def to_text(self) -> str:
        doc = {"format": FORMAT, **asdict(self)}
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def load(path: Path, host: str, scope: str) -> Manifest | None:
    try:
        data, cut = read_capped(path, MAX_MANIFEST_BYTES)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise HostInstallError(f"cannot read the install record {path}: {exc}") from None
    try:
        if cut:
            raise UnreadableJSON(f"{path} is too large")
        doc = loads(data, what=str(path))
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise UnreadableJSON(f"{path} is not an install record this version reads")
        return _from_doc(doc, host, scope)
    except (UnreadableJSON, KeyError, TypeError, ValueError) as exc:
        raise HostInstallError(
            f"the install record {path} is unreadable ({exc}); move it away to start afresh"
        ) from None


def _from_doc(doc: dict[str, Any], host: str, scope: str) -> Manifest:
    if doc.get("host") != host or doc.get("scope") != scope:
        raise ValueError(f"it records {doc.get('host')} ({doc.get('scope')})")
    return Manifest(
        host=host,
        scope=scope,
        files=[FileRecord(path=str(f["path"]), sha256=str(f["sha256"])) for f in doc["files"]],
        configs=[
            ConfigRecord(
                path=str(c["path"]),
                format=str(c["format"]),
                keys=[str(k) for k in c["keys"]],
                sha256=str(c["sha256"]),
                created_file=bool(c["created_file"]),
                made=[str(m) for m in c.get("made", [])],
            )
            for c in doc["configs"]
        ],
        dirs=[str(d) for d in doc.get("dirs", [])],
    )
