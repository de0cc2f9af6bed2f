"""The run-file edge: each state of a run becomes one atomic rewrite of ``run-<id>.json``.

The artifact is not part of those rewrites (contract 2.8): it is written once, before the
first version that needs it, to ``run-<id>.artifact`` beside the run file, and each version
records only its length and sha256 (``artifact_file``). A council rewrites its file a dozen
times or more, so an artifact copied into each version made its writes grow with artifact
size times transitions; now they grow with artifact size plus answers. The result the
council returns keeps carrying the text: only what goes to disk leaves it out.

It is also the last net under every redaction upstream. Each state is scrubbed of the
secrets in play (``runtimes.base.secrets_in_play``) in place before it is written, so the
result a door prints or returns (``--json``, the markdown, an MCP result, the HTTP API),
which is this same object, holds what the file holds. ``scrubbed`` is the same net for a
result that did not come from this process's council.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from .core.contract import ENDED_STATUSES, ArtifactFile, CouncilResult
from .core.made import made_json
from .core.redaction import Redactor, redact_model
from .core.safetext import mask_url_credentials
from .files import atomic_write_bytes
from .runtimes.base import secrets_in_play

if TYPE_CHECKING:
    import asyncio

# A run in one of these states is not rewritten again by its council, so that version must
# survive a crash; so must the first version (a file that exists is a run that started).
# Every other one is superseded within seconds and skips the fsync, which costs more than
# all the rest of a rewrite.
FINAL_STATUSES: frozenset[str] = ENDED_STATUSES
ARTIFACT_SUFFIX = ".artifact"
# Intermediate versions asked for on an event loop are made at most this often: a burst of
# changes (a stage's voices ending one after another, a round closing and the next one
# starting) becomes one version holding all of them instead of one per pass of the loop,
# each made from the whole run on the council's thread. A change after a quiet moment is
# still made once the loop has finished its pass; none waits longer than this.
VERSION_SPACING_S = 0.05


def _running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running on this thread, if any (none runs before asyncio is loaded)."""
    loaded = sys.modules.get("asyncio")
    if loaded is None:
        return None
    try:
        loop: asyncio.AbstractEventLoop = loaded.get_running_loop()
    except RuntimeError:
        return None
    return loop


def artifact_sidecar(run_file: Path) -> Path:
    """Where the run at ``run_file`` keeps its artifact: beside it, named after the run file
    alone (``run-<id>.json`` -> ``run-<id>.artifact``). Nothing written inside a run file
    decides the name, so a planted file cannot point a reader at another path."""
    return run_file.with_name(run_file.name.removesuffix(".json") + ARTIFACT_SUFFIX)


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
    """Turns each state of a run into one atomic rewrite of ``run-<id>.json``, and its
    artifact into one write of ``run-<id>.artifact``.

    ``writes`` counts the run-file versions, ``bytes_written`` every byte put on disk (the
    versions and the sidecar): what a caller reads to see that a run's writes stay
    proportional to its artifact plus its answers.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sidecar = artifact_sidecar(path)
        self.writes = 0
        self.bytes_written = 0
        # The text the sidecar was written from and the record of it. Checked by identity
        # first: the council hands the same string object to every write.
        self._stored: tuple[str, ArtifactFile] | None = None
        self._started = False
        self._lock = threading.Lock()
        # Versions between the first and the last are written by one thread of their own, in
        # order, so a council's voices are not held up by the disk (a rename and a write per
        # status change); the first and the final versions are written before write returns.
        self._writer: ThreadPoolExecutor | None = None
        self._queued: list[Future[None]] = []
        # An intermediate version asked for on an event loop's thread is made once the loop
        # finishes what it is doing, and no sooner than VERSION_SPACING_S after the version
        # before: the changes made meanwhile (five voices started, a stage's last answers and
        # the round's next step) become one version instead of one each, each made from the
        # whole run.
        self._pending: CouncilResult | None = None
        self._pending_on: tuple[asyncio.AbstractEventLoop, asyncio.Handle] | None = None
        self._made_at = float("-inf")  # when the last of them was made (time.monotonic)

    def write(self, result: CouncilResult) -> None:
        # A last net under every redaction upstream: no secret in play and no URL
        # credential reaches the file, nor the door that prints this object. Done here and
        # now even for a version made later, since the caller may show the object at once.
        scrubbed(result)
        with self._lock:
            if result.status in FINAL_STATUSES or self.writes == 0:
                # The version a crash must not lose: the file a run starts with, and the
                # one it ends with, after every version queued before it.
                self._drop_pending()
                payload = self._payload(result)
                self._settle(wait=True)
                atomic_write_bytes(self.path, payload, durable=True)
                self._counted(payload)
                return
            loop = _running_loop()
            if loop is None:
                self._queue(result)
                return
            self._pending = result
            if self._pending_on is None or self._pending_on[0] is not loop:
                self._drop_pending(keep=True)
                wait = self._made_at + VERSION_SPACING_S - time.monotonic()
                handle = (
                    loop.call_later(wait, self._write_pending)
                    if wait > 0
                    else loop.call_soon(self._write_pending)
                )
                self._pending_on = (loop, handle)

    def flush(self) -> None:
        """Wait until every version handed to ``write`` is on disk; a failed write raises."""
        with self._lock:
            pending = self._pending
            self._drop_pending()
            if pending is not None:
                self._queue(pending)
            self._settle(wait=True)

    def _write_pending(self) -> None:
        with self._lock:
            pending = self._pending
            self._pending = self._pending_on = None
            if pending is not None:
                self._made_at = time.monotonic()
                self._queue(pending)

    def _drop_pending(self, *, keep: bool = False) -> None:
        """Forget the version waiting for the loop (``keep`` the result it is to be made
        from, to make it on another loop)."""
        if self._pending_on is not None:
            self._pending_on[1].cancel()
            self._pending_on = None
        if not keep:
            self._pending = None

    def _queue(self, result: CouncilResult) -> None:
        """Make an intermediate version now and hand it to the writer thread."""
        payload = self._payload(result)
        self._settle(wait=False)
        if self._writer is None:
            self._writer = ThreadPoolExecutor(1, thread_name_prefix="rune-run-file")
        self._queued.append(
            self._writer.submit(atomic_write_bytes, self.path, payload, durable=False)
        )
        self._counted(payload)

    def _payload(self, result: CouncilResult) -> bytes:
        text = mask_url_credentials(made_json(self._document(result), indent=2))
        return text.encode("utf-8") + b"\n"

    def _counted(self, payload: bytes) -> None:
        self.writes += 1
        self.bytes_written += len(payload)

    def _settle(self, *, wait: bool) -> None:
        """Drop the queued writes that are done (all of them, ``wait``ing for the rest),
        raising the first one's error: a disk that fails is told at the next write."""
        queued = self._queued
        while queued and (wait or queued[0].done()):
            queued.pop(0).result()
        if wait and self._writer is not None:
            self._writer.shutdown(wait=True)
            self._writer = None

    def _document(self, result: CouncilResult) -> CouncilResult:
        """What goes to disk: ``result`` with its artifact replaced by the sidecar's record.

        A shallow copy, so the caller's object (which a door prints) keeps the text."""
        first, self._started = not self._started, True
        request = result.request
        given = request.artifact.text if request.artifact is not None else None
        text = result.artifact_text if result.artifact_text is not None else given
        record = result.artifact_file
        if text is None and record is not None:
            # Read from a file whose sidecar could not be put back: the file's own record
            # and sidecar stay as they are, so writing it again loses nothing.
            inline = record.inline
        elif text is None:
            if first:
                # A sidecar left by an earlier run of this id describes nothing now.
                with contextlib.suppress(OSError):
                    os.unlink(self.sidecar)
            return result
        else:
            inline = given is not None and (given is text or given == text)
            record = self._store(text, inline)
        if inline and request.artifact is not None:
            # Empty, not null: the file on its own still validates as a request.
            artifact = request.artifact.model_copy(update={"text": ""})
            request = request.model_copy(update={"artifact": artifact})
        return result.model_copy(
            update={"artifact_text": None, "artifact_file": record, "request": request}
        )

    def _store(self, text: str, inline: bool) -> ArtifactFile:
        """The sidecar's record, writing the sidecar first when this text is not in it yet
        (the first write of the run, or a redaction that changed the text since)."""
        stored = self._stored
        if stored is not None and (stored[0] is text or stored[0] == text):
            record = stored[1]
            return (
                record if record.inline == inline else record.model_copy(update={"inline": inline})
            )
        data = mask_url_credentials(text).encode("utf-8", errors="replace")
        record = ArtifactFile(
            sha256=hashlib.sha256(data).hexdigest(), bytes=len(data), inline=inline
        )
        # Durable: the first version of the run file, which survives a crash, refers to it.
        atomic_write_bytes(self.sidecar, data, durable=True)
        self.bytes_written += len(data)
        self._stored = (text, record)
        return record
