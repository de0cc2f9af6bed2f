"""The run-file edge: each state of a run becomes one atomic rewrite of ``run-<id>.json``."""

from __future__ import annotations

import threading
from pathlib import Path

from .contract import CouncilResult
from .files import atomic_write_bytes
from .safetext import mask_url_credentials

# A run in one of these states is not rewritten again by its council, so that version must
# survive a crash; so must the first version (a file that exists is a run that started).
# Every other one is superseded within seconds and skips the fsync, which costs more than
# all the rest of a rewrite.
FINAL_STATUSES = frozenset({"complete", "cancelled", "failed"})


class RunRecorder:
    """Turns each state of a run into one atomic rewrite of ``run-<id>.json``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.writes = 0
        self._lock = threading.Lock()

    def write(self, result: CouncilResult) -> None:
        # A last net under every redaction upstream: no URL credential reaches the file.
        text = mask_url_credentials(result.model_dump_json(indent=2))
        payload = text.encode("utf-8") + b"\n"
        with self._lock:
            durable = result.status in FINAL_STATUSES or not self.path.exists()
            atomic_write_bytes(self.path, payload, durable=durable)
            self.writes += 1
