"""The run-file edge: each state of a run becomes one atomic rewrite of ``run-<id>.json``.

It is also the last net under every redaction upstream. Each state is scrubbed of the
secrets in play (``runtimes.base.secrets_in_play``) in place before it is written, so the
result a door prints or returns (``--json``, the markdown, an MCP result, the HTTP API),
which is this same object, holds what the file holds. ``scrubbed`` is the same net for a
result that did not come from this process's council.
"""

from __future__ import annotations

import threading
from pathlib import Path

from .core.contract import ENDED_STATUSES, CouncilResult
from .core.redaction import Redactor, redact_model
from .core.safetext import mask_url_credentials
from .files import atomic_write_bytes
from .runtimes.base import secrets_in_play

# A run in one of these states is not rewritten again by its council, so that version must
# survive a crash; so must the first version (a file that exists is a run that started).
# Every other one is superseded within seconds and skips the fsync, which costs more than
# all the rest of a rewrite.
FINAL_STATUSES: frozenset[str] = ENDED_STATUSES


# One redactor for the secrets in play, replaced when they change: it remembers which
# strings it has already checked, and that memory goes with it.
_current: tuple[tuple[str, ...], Redactor] | None = None


def scrubbed(result: CouncilResult) -> CouncilResult:
    """``result`` with no secret in play in any of its strings, in any form, changed in
    place (every holder of it sees the same) and returned."""
    global _current
    secrets = secrets_in_play()
    current = _current
    if current is None or current[0] != secrets:
        current = _current = (secrets, Redactor(secrets))
    redact_model(result, current[1])
    return result


class RunRecorder:
    """Turns each state of a run into one atomic rewrite of ``run-<id>.json``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.writes = 0
        self._lock = threading.Lock()

    def write(self, result: CouncilResult) -> None:
        # A last net under every redaction upstream: no secret in play and no URL
        # credential reaches the file, nor the door that prints this object.
        text = mask_url_credentials(scrubbed(result).model_dump_json(indent=2))
        payload = text.encode("utf-8") + b"\n"
        with self._lock:
            durable = result.status in FINAL_STATUSES or not self.path.exists()
            atomic_write_bytes(self.path, payload, durable=durable)
            self.writes += 1
