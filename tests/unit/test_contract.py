"""The contract: committed schemas match the models, bad requests say what is wrong."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from rune_council import (
    CouncilOptions,
    PerspectiveRequest,
    RequestError,
    RunIdError,
    convene,
)
from rune_council.core.paths import RuneDir
from rune_council.core.schema import SCHEMAS, render_schema
from rune_council.council import parse_request

ROOT = Path(__file__).resolve().parents[2]
CONTRACTS = ROOT / "contracts"


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_committed_schema_matches_the_models(name: str) -> None:
    committed = (CONTRACTS / f"{name}.schema.json").read_text(encoding="utf-8")
    assert committed == render_schema(name), (
        f"contracts/{name}.schema.json is stale: run `python -m rune_council.core.schema contracts`"
    )


def test_prose_contract_exists_and_names_the_version() -> None:
    prose = (CONTRACTS / "council-voice-contract.md").read_text(encoding="utf-8")
    assert "2.0" in prose and "question_echo" in prose


def _schema(name: str) -> dict:  # type: ignore[type-arg]
    return json.loads((CONTRACTS / f"{name}.schema.json").read_text(encoding="utf-8"))


def test_every_example_file_validates() -> None:
    examples = sorted((ROOT / ".rune-example").rglob("*.json"))
    assert examples, ".rune-example/ holds no example"
    for path in examples:
        data = json.loads(path.read_text(encoding="utf-8"))
        name = "runtimes" if path.name == "runtimes.json" else "council-result"
        jsonschema.validate(data, _schema(name))


@pytest.mark.parametrize(
    ("patch", "fragment"),
    [
        ({"id": "../../etc/passwd"}, "not a safe file name"),
        ({"id": "a/b"}, "not a safe file name"),
        ({"id": ".hidden"}, "not a safe file name"),
        ({"n": 1}, "n: Input should be greater than or equal to 2"),
        ({"mode": "vote"}, "mode"),
        ({"question": "   "}, "question is blank"),
        ({"artifact": {"text": "x", "path": "y"}}, "exactly one of 'text' or 'path'"),
        ({"budget": {"per_voice_timeout_s": 0}}, "per_voice_timeout_s"),
        ({"colour": "blue"}, "colour: Extra inputs are not permitted"),
    ],
)
def test_malformed_requests_are_rejected_with_the_reason(patch: dict, fragment: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(RequestError) as err:
        parse_request({"id": "ok", "question": "Q?", **patch})
    assert fragment in str(err.value)


def test_run_ids_cannot_escape_the_run_directory(tmp_path: Path) -> None:
    where = RuneDir(tmp_path)
    for bad in ["..", "../x", "x/../../y", "/abs", "a\\b", ""]:
        with pytest.raises(RunIdError):
            where.run_file(bad)
    assert where.run_file("ok-1.2_3").parent == tmp_path / "council"


def test_generate_mode_answers_not_implemented(tmp_path: Path) -> None:
    from rune_council import NotImplementedModeError

    with pytest.raises(NotImplementedModeError, match="NOT_IMPLEMENTED"):
        convene(
            PerspectiveRequest(id="g", question="Write it", mode="generate"),
            CouncilOptions(rune_dir=tmp_path),
        )
    assert not (tmp_path / "council").exists()
