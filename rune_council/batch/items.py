"""The items file of a batch: one council a line, read twice and never held whole.

``ITEMS.jsonl`` holds one JSON object a line; ``ITEMS.csv`` a header row naming the same
keys. Every line is bounded before it is parsed (a hostile file of one endless line costs
``MAX_LINE_BYTES``, not the file's size) and judged on its own: a line that is not a valid
item becomes a ``BadLine`` with its number and reason, and the batch goes on without it.

Keys of an item (all but ``question`` optional; flags give the defaults):

    id              run id (run-<id>.json); default item-<digest of the item>
    question        the question
    mode            critique | review | judge
    n               voices wanted
    timeout         per-voice timeout in seconds
    prefer          model families to seat first (a list, or "a;b" in CSV)
    artifact        a file path, relative to the items file, that must stay inside its folder
    artifact_text   the artifact inline instead
    artifact_name   how the voices refer to it (default: the file's name, or "artifact")

The artifact is read only when its council starts (``load_artifact``), so a batch of large
files is never in memory at once.
"""

from __future__ import annotations

import csv
import difflib
import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from .. import safejson
from ..contract import is_safe_run_id
from ..council import parse_request
from ..council.request import ARTIFACT_READ_CAP
from ..errors import CouncilError, RequestError
from ..safefile import read_capped

# One line holds a question (20,000 characters at most) and may inline an artifact (read up
# to 2 MB from a file); anything longer is not an item.
MAX_LINE_BYTES = 4 * 1024 * 1024
KEYS = (
    "id",
    "question",
    "mode",
    "n",
    "timeout",
    "prefer",
    "artifact",
    "artifact_text",
    "artifact_name",
)
FORMATS = (".jsonl", ".csv")


@dataclass(frozen=True)
class Defaults:
    """What an item does not say for itself: the batch's flags."""

    mode: str | None = None
    n: int | None = None
    timeout: float | None = None
    prefer: tuple[str, ...] = ()


@dataclass(frozen=True)
class Item:
    """One valid line: its run id and the request it asks, artifact not yet read."""

    line: int
    id: str
    request: Mapping[str, Any]
    artifact_path: Path | None = None
    artifact_name: str | None = None

    def full_request(self) -> dict[str, Any]:
        """The request with its artifact read now (bounded); RequestError if it cannot be."""
        request = dict(self.request)
        if self.artifact_path is not None:
            request["artifact"] = {
                "name": self.artifact_name or self.artifact_path.name,
                "text": load_artifact(self.artifact_path),
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


def _physical_lines(fh: BinaryIO) -> Iterator[tuple[int, bytes | None]]:
    """(line number, bytes) for every line; None for one over ``MAX_LINE_BYTES``, whose
    rest is skipped in bounded chunks rather than read into memory."""
    number = 0
    while True:
        chunk = fh.readline(MAX_LINE_BYTES + 1)
        if not chunk:
            return
        number += 1
        if len(chunk) > MAX_LINE_BYTES and not chunk.endswith(b"\n"):
            while True:
                rest = fh.readline(1024 * 1024)
                if not rest or rest.endswith(b"\n"):
                    break
            yield number, None
            continue
        yield number, chunk


def _too_long() -> str:
    return f"longer than {MAX_LINE_BYTES} bytes"


def _jsonl_records(fh: BinaryIO) -> Iterator[tuple[int, dict[str, Any] | str]]:
    for number, raw in _physical_lines(fh):
        if raw is None:
            yield number, _too_long()
            continue
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            yield number, "not UTF-8 text"
            continue
        try:
            value = safejson.loads(text, max_bytes=MAX_LINE_BYTES, what=f"line {number}")
        except safejson.UnreadableJSON as exc:
            yield number, f"not JSON: {exc}"
            continue
        if not isinstance(value, dict):
            yield number, f"not a JSON object but a {type(value).__name__}"
            continue
        yield number, value


def _csv_records(fh: BinaryIO) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """Rows by the line they start on; a row spanning a too-long or non-UTF-8 line is bad."""
    broken: dict[int, str] = {}

    def lines() -> Iterator[str]:
        for number, raw in _physical_lines(fh):
            if raw is None:
                broken[number] = _too_long()
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
    unknown = [h for h in header if h not in KEYS]
    if unknown:
        raise RequestError(
            f"the CSV header names unknown column(s) {', '.join(map(repr, unknown))}"
            f" (columns: {', '.join(KEYS)})"
        )
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
        yield start, {k: v for k, v in zip(header, row, strict=True) if v != ""}


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


def _closest(word: str) -> str:
    found = difflib.get_close_matches(word, KEYS, n=1)
    return f" (did you mean {found[0]!r}?)" if found else ""


def _number(value: Any, key: str, kind: type) -> Any:
    if isinstance(value, str):  # CSV cells are text
        try:
            value = kind(value.strip())
        except ValueError:
            raise ValueError(f"{key} must be a number, not {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{key} must be a number")
    if kind is int and value != int(value):
        raise ValueError(f"{key} must be a whole number")
    return kind(value)


def _families(value: Any) -> list[str]:
    if isinstance(value, str):
        return [v.strip() for v in value.replace(",", ";").split(";") if v.strip()]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise ValueError("prefer must be a list of family names")


def _text(value: Any, key: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{key} must be text")
    return value


def _inside(base: Path, given: str) -> Path:
    """The artifact path resolved against ``base``; it may not lead out of it (an items
    file from elsewhere must not make the council send ``~/.ssh/id_rsa`` to the voices)."""
    if "\x00" in given:
        raise ValueError("artifact path contains a NUL byte")
    root = base.resolve()
    target = (root / given).resolve()
    if target != root and root not in target.parents:
        raise ValueError(f"artifact {given!r} is outside {root}; only files under it are read")
    if not target.is_file():
        raise ValueError(f"artifact {given!r} is not a file under {root}")
    return target


def _default_id(record: Mapping[str, Any]) -> str:
    """A stable id from what the item asks, so a rerun finds the same run file."""
    blob = json.dumps(record, sort_keys=True, ensure_ascii=True).encode("utf-8")
    return f"item-{hashlib.sha256(blob).hexdigest()[:16]}"


def to_item(number: int, record: Mapping[str, Any], defaults: Defaults, base: Path) -> Item:
    """One raw record as an Item; ValueError or CouncilError says what is wrong with it."""
    unknown = [k for k in record if k not in KEYS]
    if unknown:
        key = unknown[0]
        raise ValueError(f"unknown key {key[:60]!r}{_closest(key)}")
    if "question" not in record:
        raise ValueError("no question")
    run_id = _text(record["id"], "id") if "id" in record else _default_id(record)
    if not is_safe_run_id(run_id):
        raise ValueError(
            f"id {run_id[:80]!r} is not a safe file name (1-128 of A-Z a-z 0-9 . _ -, "
            "starting with a letter or digit, no '..')"
        )
    request: dict[str, Any] = {"id": run_id, "question": _text(record["question"], "question")}
    # What neither the item nor a flag says is left out, so a template or the contract's
    # own default decides it, exactly as for a single council.
    mode = record.get("mode", defaults.mode)
    if mode is not None:
        request["mode"] = _text(mode, "mode")
    n = record.get("n", defaults.n)
    if n is not None:
        request["n"] = _number(n, "n", int)
    timeout = record.get("timeout", defaults.timeout)
    if timeout is not None:
        request["budget"] = {"per_voice_timeout_s": _number(timeout, "timeout", float)}
    prefer = record.get("prefer", list(defaults.prefer))
    if prefer:
        request["diversity"] = {"prefer_model_families": _families(prefer)}
    name = _text(record["artifact_name"], "artifact_name") if "artifact_name" in record else None
    if "artifact" in record and "artifact_text" in record:
        raise ValueError("give artifact (a path) or artifact_text, not both")
    path: Path | None = None
    if "artifact_text" in record:
        request["artifact"] = {
            "name": name or "artifact",
            "text": _text(record["artifact_text"], "artifact_text"),
        }
    elif "artifact" in record:
        path = _inside(base, _text(record["artifact"], "artifact"))
        # Validated with a stand-in text; the file itself is read when the council starts.
        request["artifact"] = {"name": name or path.name, "text": ""}
    parsed = parse_request(request)
    if parsed.mode == "generate":
        raise ValueError("mode 'generate' is not served; use critique, review or judge")
    if path is not None:
        del request["artifact"]
    return Item(number, run_id, request, path, name)


def items(path: Path, defaults: Defaults, base: Path | None = None) -> Iterator[Item | BadLine]:
    """Every line of ``path`` as an Item or a BadLine, in file order."""
    where = base if base is not None else path.parent
    for number, record in records(path):
        if isinstance(record, str):
            yield BadLine(number, record)
            continue
        try:
            yield to_item(number, record, defaults, where)
        except (ValueError, CouncilError) as exc:
            yield BadLine(number, _one_line(str(exc)))


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 300 else text[:297] + "..."


def scan(path: Path, defaults: Defaults, base: Path | None = None) -> Scan:
    """The first pass: count the items, list every bad line and every id used twice.

    Only ids and line numbers are kept, so a file of any length scans in little memory.
    """
    found = Scan()
    first: dict[str, int] = {}
    for entry in items(path, defaults, base):
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
    "KEYS",
    "MAX_LINE_BYTES",
    "BadLine",
    "Defaults",
    "Item",
    "Scan",
    "describe_duplicates",
    "item_format",
    "items",
    "load_artifact",
    "scan",
    "to_item",
]
