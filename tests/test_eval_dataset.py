"""The eval's dataset file read line by line: each bad line named by its number and reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rune_council.core.errors import RequestError
from rune_council.council.eval_items import load_dataset, review_artifact

GOOD = {
    "id": "ok",
    "label": "flawed",
    "path": "src/a.py",
    "pre_image": "x = 1\n",
    "post_image": "x = 2\ny = x + 1\n",
    "seeded": [{"path": "src/a.py", "line": 2}],
}


def write(tmp: Path, lines: list[bytes]) -> Path:
    path = tmp / "set.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_each_bad_line_is_named_and_the_good_ones_are_kept(tmp_path: Path) -> None:
    lines = [
        json.dumps(GOOD).encode(),
        b"\xff\xfe not utf-8",
        b"[1, 2]",
        json.dumps({**GOOD, "id": "past", "seeded": [{"path": "src/a.py", "line": 9}]}).encode(),
        json.dumps({**GOOD, "id": "lbl", "label": "broken"}).encode(),
        json.dumps({k: v for k, v in GOOD.items() if k != "post_image"} | {"id": "m"}).encode(),
        b"",
        json.dumps({**GOOD, "id": "clean-seeded", "label": "clean"}).encode(),
    ]
    items, bad = load_dataset(write(tmp_path, lines))
    assert [i.id for i in items] == ["ok"]
    said = {b.line: b.reason for b in bad}
    assert said[2] == "not UTF-8 text"
    assert said[3] == "not a JSON object but a list"
    assert said[4] == "seeded line 9 is past the post-image's 2 lines"
    assert said[5].startswith("label: Input should be 'flawed' or 'clean'")
    assert said[6].startswith("post_image: missing")
    assert said[8] == "a clean item names no seeded place"


def test_a_dataset_that_is_not_jsonl_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "set.csv"
    path.write_text("id,label\n")
    with pytest.raises(RequestError, match=r"an eval dataset is a \.jsonl file"):
        load_dataset(path)


def test_the_item_is_laid_out_as_the_review_door_lays_out_a_change(tmp_path: Path) -> None:
    items, _ = load_dataset(write(tmp_path, [json.dumps(GOOD).encode()]))
    text = review_artifact(items[0]).text
    # The seeded line is shown at its place in the new file, as a reviewer cites it.
    assert "src/a.py:2 | +y = x + 1" in text
    assert "| -x = 1" in text
