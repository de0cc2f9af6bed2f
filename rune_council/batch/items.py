"""The items file of a batch: one council a line, read twice and never held whole.

``ITEMS.jsonl`` holds one JSON object a line; ``ITEMS.csv`` a header row naming the same
keys. Every line is bounded before it is parsed (a hostile file of one endless line costs
``MAX_LINE_BYTES``, not the file's size) and judged on its own: a line that is not a valid
item becomes a ``BadLine`` with its number and reason, and the batch goes on without it.

A line is an ask, the same one every door takes (``council.intake``): ``question`` and any
of ``mode``, ``n``, ``artifact``, ``template``, ``chain``, ``deliberation``,
``multi_round``, ``council_type``, ``summon``, ``timeout``, ``deadline``, ``prefer``, ...,
or a whole ``request``; ``id`` defaults to ``item-<digest of the line>``. The batch's
flags are the defaults a line's own keys beat, and a line may not set what only the one
running the batch decides (consent, commands, keys). Two spellings are the batch's own:
``artifact_text`` and ``artifact_name`` beside or instead of ``artifact``, and in CSV a
list as ``a;b`` and a nested key as a dotted column (``multi_round.max_rounds``).

An artifact path resolves against the items file's folder and must stay inside it; the
file is read only when its council starts, so a batch of large files is never in memory
at once.
"""

from __future__ import annotations

import csv
import hashlib
import json
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import BaseModel

from ..core.errors import CouncilError, RequestError
from ..council.intake import (
    KEYS,
    Ask,
    AskError,
    Door,
    Prepared,
    Problem,
    parse_ask,
    prepare,
    unknown_key,
)
from ..council.request import ARTIFACT_READ_CAP
from ..safefile import bounded_lines, jsonl_objects, read_capped, too_long

# One line holds a question (20,000 characters at most) and may inline an artifact (read up
# to 2 MB from a file); anything longer is not an item.
MAX_LINE_BYTES = 4 * 1024 * 1024
FORMATS = (".jsonl", ".csv")
# The batch line's own spellings of the artifact, folded into ``artifact`` before the
# intake reads the line.
ARTIFACT_KEYS = ("artifact_text", "artifact_name")
LINE_KEYS = (*KEYS, *ARTIFACT_KEYS)


@dataclass(frozen=True)
class Item:
    """One valid line: the council it asks for, prepared by the intake, artifact not yet read."""

    line: int
    prepared: Prepared

    @property
    def id(self) -> str:
        return self.prepared.request.id

    def full_request(self) -> dict[str, Any]:
        """What the item asks, with its artifact read now (bounded) in place of its path:
        what an earlier run is compared with, and what a Ray task is sent. RequestError if
        the artifact cannot be read."""
        request = self.prepared.request.model_dump(mode="json", exclude_unset=True)
        artifact = self.prepared.request.artifact
        if artifact is not None and artifact.path is not None:
            request["artifact"] = {
                "name": artifact.shown_name,
                "text": load_artifact(Path(artifact.path)),
            }
        return request


@dataclass(frozen=True)
class BadLine:
    line: int
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


@dataclass
class Scan:
    """What the first pass found: how many items, every bad line, every repeated id."""

    items: int = 0
    bad: list[BadLine] = field(default_factory=list)
    duplicates: dict[str, list[int]] = field(default_factory=dict)


def load_artifact(path: Path) -> str:
    try:
        raw, _cut = read_capped(path, ARTIFACT_READ_CAP)
    except OSError as exc:
        raise RequestError(f"cannot read artifact {path}: {exc.strerror or exc}") from None
    return raw.decode("utf-8", errors="replace")


def item_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise RequestError(f"{path}: items must be a .jsonl or .csv file, not {suffix or 'this'}")
    return suffix


# --------------------------------------------------------------------------- raw lines


def _jsonl_records(fh: BinaryIO) -> Iterator[tuple[int, dict[str, Any] | str]]:
    return jsonl_objects(fh, MAX_LINE_BYTES)


def _csv_records(fh: BinaryIO) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """Rows by the line they start on; a row spanning a too-long or non-UTF-8 line is bad."""
    broken: dict[int, str] = {}

    def lines() -> Iterator[str]:
        for number, raw in bounded_lines(fh, MAX_LINE_BYTES):
            if raw is None:
                broken[number] = too_long(MAX_LINE_BYTES)
                yield "\n"
                continue
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError:
                broken[number] = "not UTF-8 text"
                yield "\n"

    csv.field_size_limit(MAX_LINE_BYTES)
    reader = csv.reader(lines(), strict=True)
    try:
        header = next(reader)
    except StopIteration:
        return
    except csv.Error as exc:
        raise RequestError(f"the CSV header cannot be read: {exc}") from None
    header = [h.strip() for h in header]
    _check_header(header)
    while True:
        start = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield start, f"not valid CSV: {exc}"
            continue
        end = reader.line_num
        why = next((broken[n] for n in range(start, end + 1) if n in broken), None)
        if why is not None:
            yield start, why
            continue
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            yield start, f"has {len(row)} cells, the header {len(header)}"
            continue
        yield start, _csv_record(header, row)


def _column_model(head: str) -> type[BaseModel] | None:
    """The model a dotted column's head names (``multi_round`` → its keys), if any."""
    info = Ask.model_fields.get(head)
    if info is None:
        return None
    for arg in (info.annotation, *typing.get_args(info.annotation)):
        for inner in (arg, *typing.get_args(arg)):
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                return inner
    return None


def _check_header(header: list[str]) -> None:
    """Every column names a key of a line (dotted: a key inside one), or the file is refused,
    saying the closest valid name, as every door says it."""
    for column in header:
        head, dot, rest = column.partition(".")
        if not dot:
            if column not in LINE_KEYS:
                raise RequestError(f"the CSV header: column {unknown_key(column, LINE_KEYS)}")
            continue
        if head not in KEYS:
            raise RequestError(f"the CSV header: column {unknown_key(head, KEYS)}")
        inner = _column_model(head)
        if inner is None:
            raise RequestError(f"the CSV header: column {column!r}: {head} has no keys inside")
        if rest not in inner.model_fields:
            raise RequestError(
                f"the CSV header: column {column!r}: {unknown_key(rest, inner.model_fields)}"
            )


def _is_list(key: str) -> bool:
    info = Ask.model_fields.get(key)
    if info is None:
        return False
    return any(
        typing.get_origin(arg) is list
        for arg in (info.annotation, *typing.get_args(info.annotation))
    )


def _csv_record(header: list[str], row: list[str]) -> dict[str, Any]:
    """A row as the keys a JSON line would give: empty cells left out, ``a;b`` a list, a
    dotted column a key inside its head's object. Values stay text; the intake reads
    numbers and switches from text as it reads them from any door."""
    record: dict[str, Any] = {}
    for column, cell in zip(header, row, strict=True):
        if cell == "":
            continue
        head, dot, rest = column.partition(".")
        if dot:
            record.setdefault(head, {})[rest] = cell
        elif _is_list(column):
            record[column] = [part.strip() for part in cell.split(";") if part.strip()]
        else:
            record[column] = cell
    return record


def records(path: Path) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """Every line of the items file as a raw record or the reason it is not one."""
    fmt = item_format(path)
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise RequestError(f"cannot read {path}: {exc.strerror or exc}") from None
    with fh:
        yield from (_csv_records if fmt == ".csv" else _jsonl_records)(fh)


# --------------------------------------------------------------------------- items


def _refused(key: str, message: str) -> AskError:
    return AskError([Problem(key, message)])


def _folded(record: Mapping[str, Any]) -> dict[str, Any]:
    """``artifact_text`` / ``artifact_name`` as the ask's one ``artifact``."""
    out = {k: v for k, v in record.items() if k not in ARTIFACT_KEYS}
    if not any(key in record for key in ARTIFACT_KEYS):
        return out
    text, name = record.get("artifact_text"), record.get("artifact_name")
    if "artifact_text" in record and "artifact" in record:
        raise AskError(
            [Problem("artifact_text", "give artifact (a path) or artifact_text, not both")]
        )
    if "artifact_text" in record:
        out["artifact"] = {"text": text, "name": "artifact" if name is None else name}
    elif isinstance(record.get("artifact"), str):
        out["artifact"] = {"path": record["artifact"], "name": name}
    elif "artifact" in record:
        raise AskError(
            [Problem("artifact_name", "goes with artifact as a path; name it inside artifact")]
        )
    else:
        raise AskError(
            [Problem("artifact_name", "names an artifact: give artifact or artifact_text too")]
        )
    return out


def _default_id(record: Mapping[str, Any]) -> str:
    """A stable id from what the item asks, so a rerun finds the same run file."""
    blob = json.dumps(record, sort_keys=True, ensure_ascii=True).encode("utf-8")
    return f"item-{hashlib.sha256(blob).hexdigest()[:16]}"


def to_item(number: int, record: Mapping[str, Any], door: Door) -> Item:
    """One raw record as an Item, prepared as every door prepares an ask; AskError (or
    another CouncilError) says what is wrong with it, at its key."""
    ask = parse_ask(_folded(record))
    nested = record.get("request")
    if ask.id is None and not (isinstance(nested, Mapping) and "id" in nested):
        ask = ask.model_copy(update={"id": _default_id(record)})
    return Item(number, prepare(ask, door))


def items(path: Path, door: Door) -> Iterator[Item | BadLine]:
    """Every line of ``path`` as an Item or a BadLine, in file order."""
    for number, record in records(path):
        if isinstance(record, str):
            yield BadLine(number, record)
            continue
        try:
            yield to_item(number, record, door)
        except CouncilError as exc:
            yield BadLine(number, _one_line(str(exc)))


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 300 else text[:297] + "..."


def scan(path: Path, door: Door) -> Scan:
    """The first pass: count the items, list every bad line and every id used twice.

    Only ids and line numbers are kept, so a file of any length scans in little memory.
    """
    found = Scan()
    first: dict[str, int] = {}
    for entry in items(path, door):
        if isinstance(entry, BadLine):
            found.bad.append(entry)
            continue
        found.items += 1
        if entry.id in first:
            found.duplicates.setdefault(entry.id, [first[entry.id]]).append(entry.line)
        else:
            first[entry.id] = entry.line
    return found


def describe_duplicates(duplicates: Mapping[str, list[int]], limit: int = 20) -> str:
    shown = [
        f"{run_id!r} on lines {', '.join(map(str, lines))}"
        for run_id, lines in list(duplicates.items())[:limit]
    ]
    more = f" (and {len(duplicates) - limit} more)" if len(duplicates) > limit else ""
    return "; ".join(shown) + more


__all__ = [
    "LINE_KEYS",
    "MAX_LINE_BYTES",
    "BadLine",
    "Item",
    "Scan",
    "describe_duplicates",
    "item_format",
    "items",
    "load_artifact",
    "scan",
    "to_item",
]
