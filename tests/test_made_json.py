"""A run file and ``--json`` are written without building ``CouncilResult``'s schema.

``made_json`` walks the contract's models itself and hands plain values to pydantic-core's
JSON writer. These tests hold it to pydantic's own ``model_dump_json``, byte for byte, on
what councils of every kind really produce (a single pass with a dropped voice, a vote, a
rank council with a chairman, a red team, rounds), on the run files as they lie on disk,
and on the values a walker could get wrong; and they fail the day a contract model gains a
feature the walker does not follow (an alias, an exclusion, a serializer).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

from rune_council import CouncilOptions, FunctionRuntime, convene
from rune_council.core import contract, contract_deliberation
from rune_council.core.contract import CouncilResult, PerspectiveRequest, TokenUsage
from rune_council.core.made import made, made_json
from tests.helpers import (
    CHAIR_TEXT,
    MERGE,
    REGISTER,
    ROLLBACK,
    answer,
    member,
    orchestrator_merging,
    request,
    three,
)
from tests.helpers import QUESTION as Q


def same_as_pydantic(model: BaseModel) -> None:
    for indent in (None, 2):
        assert made_json(model, indent=indent) == model.model_dump_json(indent=indent)


def on_disk_as_pydantic_writes_it(tmp_path: Path, run_id: str) -> None:
    """The run file is what pydantic prints for the document it holds."""
    text = (tmp_path / "council" / f"run-{run_id}.json").read_text(encoding="utf-8")
    assert text == CouncilResult.model_validate_json(text).model_dump_json(indent=2) + "\n"


def garbled(prompt: str) -> str:
    return "not an answer at all"


COUNCILS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "single pass, one voice dropped": (
        {"id": "single-1", "question": Q, "n": 3},
        {},
    ),
    "vote, merged by a chairman": (
        request("vote-1", method="vote"),
        {"orchestrator": FunctionRuntime(orchestrator_merging(MERGE), name="chair")},
    ),
    "rank, chaired": (
        request("rank-1", method="rank"),
        {"orchestrator": FunctionRuntime(lambda p: CHAIR_TEXT, name="chair")},
    ),
    "red team": (
        request("red-1", council_type="red_team"),
        {"orchestrator": FunctionRuntime(lambda p: f"```json\n{REGISTER}\n```", name="chair")},
    ),
    "rank over rounds": (
        request("rounds-1", method="rank", rounds={"max_rounds": 2, "convergence_threshold": 1}),
        {},
    ),
}


@pytest.mark.parametrize("kind", list(COUNCILS))
def test_councils_of_every_kind_print_and_store_what_pydantic_would(
    tmp_path: Path, kind: str
) -> None:
    ask, extra = COUNCILS[kind]
    runtimes = three()
    if kind.startswith("single"):
        runtimes[2] = member(garbled, "gemini", "google")
    result = convene(ask, CouncilOptions(runtimes=runtimes, rune_dir=tmp_path, **extra))
    if kind.startswith("single"):
        assert result.voices_valid == 2 and any(v.status == "dropped" for v in result.voices)
    else:
        assert result.deliberation is not None
    same_as_pydantic(result)
    on_disk_as_pydantic_writes_it(tmp_path, str(ask["id"]))
    # And the text read back is the same model.
    again = CouncilResult.model_validate_json(made_json(result))
    assert again == result


def test_the_printed_json_of_a_whole_process_is_pydantics(tmp_path: Path) -> None:
    """``rune council --json`` prints what pydantic would for the result it prints."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "RUNE_COUNCIL_DIR": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-m", "rune_council.cli", "council", "demo", "--json"],
        env={**env, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    printed = out.stdout.rstrip("\n")
    assert printed == CouncilResult.model_validate_json(printed).model_dump_json(indent=2)


def test_values_a_walker_could_get_wrong() -> None:
    """Text that needs escaping, other scripts, big and small numbers, empty and nested
    collections, unset optional models: the same text as pydantic's."""
    voice_text = 'quote " backslash \\ tab \t nul \x00 line\u2028sep é 中文 🙂'
    usage = made(TokenUsage, prompt_tokens=10**9, completion_tokens=0)
    same_as_pydantic(usage)
    result = CouncilResult.model_validate_json(
        made_json(
            made(
                CouncilResult,
                id="walk-1",
                question=voice_text,
                mode="critique",
                voices_requested=3,
                request=PerspectiveRequest.model_validate(
                    {"id": "walk-1", "question": voice_text, "n": 3}
                ),
                notes=[voice_text, ""],
                started_at="2026-12-02T00:00:00Z",
                run_file="/tmp/x",
            )
        )
    )
    same_as_pydantic(result)


def test_infinities_become_null_and_unknown_types_are_refused() -> None:
    """Walked or through a built serializer (another test may have built TokenUsage's), a
    value a bug upstream left behind is written as pydantic writes it, or refused."""
    usage = made(TokenUsage, prompt_tokens=1, completion_tokens=2)
    usage.__dict__["prompt_tokens"] = math.inf
    with warnings.catch_warnings():
        # pydantic's serializer also warns that the field holds a float
        warnings.simplefilter("ignore")
        assert made_json(usage) == '{"prompt_tokens":null,"completion_tokens":2}'
        usage.__dict__["prompt_tokens"] = object()
        with pytest.raises(PydanticSerializationError):
            made_json(usage)


def _models() -> list[type[BaseModel]]:
    found = {
        value
        for module in (contract, contract_deliberation)
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, BaseModel) and value is not BaseModel
    }
    return sorted(found, key=lambda m: m.__name__)


@pytest.mark.parametrize("model", _models(), ids=lambda m: m.__name__)
def test_no_contract_model_serializes_in_a_way_the_walker_does_not_follow(
    model: type[BaseModel],
) -> None:
    decorators = model.__pydantic_decorators__
    assert not decorators.field_serializers and not decorators.model_serializers
    assert not decorators.computed_fields
    assert not model.model_config.get("serialize_by_alias")
    for name, field in model.model_fields.items():
        assert field.alias in (None, name) and field.serialization_alias in (None, name), name
        assert not field.exclude, name
    assert model.model_config.get("ser_json_inf_nan", "null") == "null"


def test_a_single_pass_answer_round_trips(tmp_path: Path) -> None:
    """An answer's every field, through a whole council, reads back the same."""

    def full(prompt: str) -> str:
        return answer(Q, "NO, not before a rollback exists", [ROLLBACK])

    result = convene(
        {"id": "trip-1", "question": Q, "n": 2},
        CouncilOptions(
            runtimes=[member(full, "claude", "anthropic"), member(full, "codex", "openai")],
            rune_dir=tmp_path,
        ),
    )
    assert result.voices_valid == 2
    assert CouncilResult.model_validate_json(made_json(result)) == result
    on_disk_as_pydantic_writes_it(tmp_path, "trip-1")


def test_a_process_that_writes_much_more_than_a_single_pass_builds_the_serializer() -> None:
    """Walking pays per byte; past the budget the serializer is built once and used, and the
    text does not change at the switch."""
    code = """
import json
from rune_council.core.contract import CouncilResult, PerspectiveRequest
from rune_council.core.made import WALK_BUDGET, made, made_json
req = PerspectiveRequest.model_validate({"id": "big-1", "question": "q", "n": 3})
result = made(CouncilResult, id="big-1", question="q", mode="critique", voices_requested=3,
              request=req, notes=["x" * 20_000], started_at="t", run_file="f")
texts, built = [], []
while len(texts) * 20_000 < 2 * WALK_BUDGET:
    built.append(CouncilResult.__pydantic_complete__)
    texts.append(made_json(result, indent=2))
print(json.dumps({"first": built[0], "last": built[-1], "same": len(set(texts)) == 1,
                  "switched_at": built.index(True) if True in built else None,
                  "pydantic": texts[-1] == result.model_dump_json(indent=2)}))
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    seen = json.loads(out.stdout)
    assert seen["first"] is False and seen["last"] is True
    assert seen["same"] and seen["pydantic"]
    # Not before the budget: a single pass's dozen versions of a few tens of KB never switch.
    assert seen["switched_at"] >= 40
