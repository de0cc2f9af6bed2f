"""From what a caller hands in to a request the pipeline can run: parsed, served, readable."""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..core.contract import PerspectiveRequest
from ..core.errors import NotImplementedModeError, RequestError, file_error
from ..core.paths import RuneDir
from ..core.records import record
from ..safefile import read_capped

ARTIFACT_READ_CAP = 2_000_000


def new_run_id() -> str:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{secrets.token_hex(3)}"


def parse_request(request: PerspectiveRequest | Mapping[str, Any]) -> PerspectiveRequest:
    if isinstance(request, PerspectiveRequest):
        req = request
    else:
        try:
            req = PerspectiveRequest.model_validate(dict(request))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'request'}: {e['msg']}"
                for e in exc.errors()
            )
            raise RequestError(f"malformed PerspectiveRequest: {problems}") from exc
    if req.deliberation is not None and req.deliberation.method is not None:
        from ..deliberation.registry import lookup

        lookup(req.deliberation.method)  # an unknown method fails before anything runs
    return req


# Values the contract declares that this council does not serve, by request field; a door
# offering the valid values leaves these out.
UNSERVED: dict[str, frozenset[str]] = {"mode": frozenset({"generate"})}


def refuse_unserved(request: PerspectiveRequest) -> None:
    if request.mode in UNSERVED["mode"]:
        raise NotImplementedModeError(
            f"NOT_IMPLEMENTED: mode {request.mode!r} is declared by the contract but not "
            "served; use critique, review or judge"
        )


@record(frozen=True)
class Artifact:
    """The artifact as the voices will see it (both None when the request has none)."""

    name: str | None = None
    text: str | None = None


def read_artifact(request: PerspectiveRequest) -> Artifact:
    artifact = request.artifact
    if artifact is None:
        return Artifact()
    if artifact.text is not None:
        return Artifact(artifact.name, artifact.text)
    assert artifact.path is not None
    path = Path(artifact.path)
    try:
        # A FIFO, a device or a huge sparse file is refused or capped before it is read.
        raw, _cut = read_capped(path, ARTIFACT_READ_CAP)
    except OSError as exc:
        message = f"cannot read artifact {artifact.path}"
        raise file_error(message, exc, bad_path=RequestError) from exc
    return Artifact(artifact.shown_name, raw.decode("utf-8", errors="replace"))


def claim_run_file(where: RuneDir, run_id: str, overwrite: bool) -> Path:
    """The run file this run will write; an earlier run's file is kept unless ``overwrite``."""
    path = where.run_file(run_id)
    if path.exists() and not overwrite:
        raise RequestError(f"run id {run_id!r} is already used ({path}); pick another id")
    return path
