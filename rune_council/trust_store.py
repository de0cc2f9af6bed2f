"""Which project config files the user has trusted, by absolute path and content hash.

A repository's ``.rune/council.toml`` arrives with the repository, so what it asks for
(running a program, sending a key, granting consent) waits until the user trusts that
exact content, like ``direnv allow`` or ``mise trust``. The record lives in the user's own
config directory, never beside the file it vouches for, and holds the SHA-256 of the bytes
that were trusted: one changed byte and the file is untrusted again.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from .core.records import record
from .files import atomic_write_json

STORE_NAME = "trusted.json"
CACHES_NAME = "runtime-caches.json"
_VERSION = 1

TrustState = Literal["trusted", "changed", "unknown"]


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_key(path: Path) -> str:
    """The name a file is trusted under: absolute, symlinks resolved, so two spellings of
    one file share one record and a symlink cannot borrow another file's trust."""
    return str(Path(path).expanduser().resolve())


@record(frozen=True)
class TrustRecord:
    path: str
    sha256: str
    trusted_at: str


class TrustStore:
    """``trusted.json`` in the user's config directory: trusted files, and the rune dirs
    where the user said yes to external dispatch at the prompt."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / STORE_NAME

    def _doc(self) -> dict[str, Any]:
        # Unreadable or malformed trusts nothing: the safe reading of a damaged store.
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return {}
        return doc if isinstance(doc, dict) else {}

    def _consents(self) -> dict[str, str]:
        found = self._doc().get("consent")
        if not isinstance(found, dict):
            return {}
        return {k: v for k, v in found.items() if isinstance(k, str) and isinstance(v, str)}

    def _load(self) -> dict[str, TrustRecord]:
        files = self._doc().get("files")
        if not isinstance(files, dict):
            return {}
        records: dict[str, TrustRecord] = {}
        for key, entry in files.items():
            if (
                isinstance(key, str)
                and isinstance(entry, dict)
                and isinstance(entry.get("sha256"), str)
            ):
                records[key] = TrustRecord(key, entry["sha256"], str(entry.get("trusted_at", "?")))
        return records

    def _save(
        self, records: dict[str, TrustRecord], consents: dict[str, str] | None = None
    ) -> None:
        atomic_write_json(
            self.path,
            {
                "version": _VERSION,
                "files": {
                    key: {"sha256": r.sha256, "trusted_at": r.trusted_at}
                    for key, r in sorted(records.items())
                },
                "consent": dict(
                    sorted((self._consents() if consents is None else consents).items())
                ),
            },
        )

    def state(self, file: Path, sha256: str) -> TrustState:
        record = self._load().get(file_key(file))
        if record is None:
            return "unknown"
        return "trusted" if record.sha256 == sha256 else "changed"

    def trust(self, file: Path, sha256: str) -> TrustRecord:
        records = self._load()
        stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        record = TrustRecord(file_key(file), sha256, stamp)
        records[record.path] = record
        self._save(records)
        return record

    def revoke(self, file: Path) -> bool:
        records = self._load()
        if records.pop(file_key(file), None) is None:
            return False
        self._save(records)
        return True

    def records(self) -> list[TrustRecord]:
        return sorted(self._load().values(), key=lambda r: r.path)

    def grant_consent(self, rune_dir: Path) -> str:
        """Remember a yes given at the prompt for this rune dir; the time it was given."""
        consents = self._consents()
        stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        consents[file_key(rune_dir)] = stamp
        self._save(self._load(), consents)
        return stamp

    def consent_granted_at(self, rune_dir: Path) -> str | None:
        return self._consents().get(file_key(rune_dir))


class CacheVouchers:
    """Fingerprints of the runtime caches this user's own detection wrote.

    ``.rune/runtimes.json`` sits in the project, so a repository can ship one that names any
    program as ``claude``; a cache is reused only when its content is what detection wrote
    here. Kept apart from ``trusted.json`` so a detection never rewrites the trust records.
    """

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / CACHES_NAME

    def _load(self) -> dict[str, str]:
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return {}
        if not isinstance(doc, dict):
            return {}
        return {k: v for k, v in doc.items() if isinstance(k, str) and isinstance(v, str)}

    def vouch(self, file: Path, sha256: str) -> None:
        found = self._load()
        found[file_key(file)] = sha256
        atomic_write_json(self.path, dict(sorted(found.items())))

    def vouched(self, file: Path, sha256: str) -> bool:
        return self._load().get(file_key(file)) == sha256
