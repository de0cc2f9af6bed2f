"""What a rerun does with an item, judged from the run file an earlier run left.

The rule, once for the local and the Ray runner:

- no run file: run it;
- complete, asked the same request, and ``verify`` reproduces it: keep it (not run again);
- complete but the item asks something else now: run it again over the old file;
- complete but it does not verify, failed, or unreadable: a failure, run again only with
  ``--retry-failed``;
- cancelled, or abandoned (its writer is gone): run it again;
- still running in a live process: busy, left alone (the run-id lock would refuse anyway).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..core.contract import CouncilResult
from ..core.errors import RunFileError
from ..council import parse_request
from ..runs import liveness, load
from ..verify import verify
from .results import Row, row_for

Action = Literal["run", "rerun", "keep", "busy"]


@dataclass(frozen=True)
class Decision:
    action: Action
    row: Row | None = None  # the row to report when nothing runs
    why: str = ""


def _failed_row(run_id: str, line: int, path: Path, error: str) -> Row:
    return Row(id=run_id, line=line, status="failed", run_file=str(path), resumed=True, error=error)


def _within(asked: Any, recorded: Any) -> bool:
    """Every value ``asked`` sets is the same in ``recorded``."""
    if isinstance(asked, dict) and isinstance(recorded, dict):
        return all(k in recorded and _within(v, recorded[k]) for k, v in asked.items())
    return bool(asked == recorded)


def _as_asked(recorded: CouncilResult) -> dict[str, Any]:
    """The recorded request with its artifact as the voices read it: an item's artifact is
    compared by name and content, whether the run was given its path or its text."""
    request = recorded.request.model_dump(mode="json")
    artifact = recorded.request.artifact
    if artifact is not None:
        request["artifact"] = {"name": artifact.shown_name, "text": recorded.artifact_text}
    return request


def decide(
    run_id: str, line: int, path: Path, request: dict[str, Any], *, retry_failed: bool
) -> Decision:
    """``request`` is what the item asks, its artifact read (``Item.full_request``)."""
    # A symlink counts as a file even when it dangles: it is refused below (a run file is
    # read only as a plain file), never taken for "no run yet" and written through.
    if not path.exists() and not path.is_symlink():
        return Decision("run")
    failed: Action = "rerun" if retry_failed else "keep"
    try:
        recorded = load(path)
    except RunFileError as exc:
        return Decision(failed, _failed_row(run_id, line, path, str(exc)))
    if recorded.shown_status() == "complete":
        # Only what the item asks is compared: a template may have filled the rest.
        asked = parse_request(request).model_dump(mode="json", exclude_unset=True)
        if not _within(asked, _as_asked(recorded)):
            return Decision("rerun", why="the item changed since its run file was written")
        check = verify(recorded)
        if check.reproduced:
            return Decision("keep", row_for(recorded, line, path, resumed=True))
        first = check.differences[0]
        return Decision(
            failed,
            _failed_row(run_id, line, path, f"the run file does not verify: {first.field} differs"),
        )
    if recorded.shown_status() in ("failed", "no_verdict"):
        # Nothing came of it either way; --retry-failed runs it again.
        return Decision(failed, row_for(recorded, line, path, resumed=True))
    if recorded.status == "cancelled":
        return Decision("rerun", why="cancelled before it finished")
    state = liveness(recorded)
    if state.state == "gone":
        return Decision("rerun", why="abandoned: " + state.detail)
    return Decision(
        "busy",
        Row(
            id=run_id,
            line=line,
            status="busy",
            run_file=str(path),
            error=f"still running elsewhere ({state.detail})",
        ),
    )
