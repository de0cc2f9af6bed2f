"""verify covers the whole run: every derived field, and model-written text by its digest."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rune_council import CouncilOptions, FunctionRuntime, convene
from rune_council.cli import app
from tests.test_deliberation import request, scripted, three

Edit = Callable[[dict[str, Any]], None]


def _run(tmp_path: Path, run_id: str, orchestrator: Any = None, **deliberation: Any) -> Path:
    convene(
        request(run_id, **deliberation),
        CouncilOptions(runtimes=three(), rune_dir=tmp_path, orchestrator=orchestrator),
    )
    return tmp_path / "council" / f"run-{run_id}.json"


def _chair(prompt: str) -> str:
    return "Shard later: add a rollback step first.\nSYNTH open=[]"


def _verify(path: Path) -> Any:
    return CliRunner().invoke(app, ["council", "verify", str(path)])


def _edited(path: Path, edit: Edit) -> Path:
    doc = json.loads(path.read_text())
    edit(doc)
    out = path.with_name("run-edited.json")
    doc["id"] = "edited"
    out.write_text(json.dumps(doc))
    # The artifact is kept beside the run file, under the file's own name (contract 2.8).
    artifact = path.with_suffix(".artifact")
    if artifact.exists():
        out.with_suffix(".artifact").write_bytes(artifact.read_bytes())
    return out


def _set(*path: Any) -> Edit:
    """An edit that sets the value at ``path[:-1]`` to ``path[-1]``."""
    *keys, value = path

    def edit(doc: dict[str, Any]) -> None:
        target: Any = doc
        for k in keys[:-1]:
            target = target[k]
        target[keys[-1]] = value

    return edit


def test_the_forged_verdict_of_the_issue_is_caught_and_show_says_so(tmp_path: Path) -> None:
    path = _run(
        tmp_path, "rank-forge", orchestrator=FunctionRuntime(_chair, name="chair"), method="rank"
    )
    assert _verify(path).exit_code == 0

    def forge(doc: dict[str, Any]) -> None:
        doc["verdict"]["consensus_score"] = 0.97
        doc["deliberation"]["synthesis"]["text"] = "The council unanimously approves the plan."

    forged = _edited(path, forge)
    result = _verify(forged)
    # Before: verify accepted this file and show printed the forgery as the verdict.
    assert result.exit_code == 1
    assert "verdict.consensus_score: recorded 0.97" in result.output
    assert "deliberation.synthesis.text" in result.output
    shown = CliRunner().invoke(app, ["council", "show", str(forged)]).output.splitlines()
    assert shown[2].startswith("- **Verification**: NOT REPRODUCED")
    assert "verdict.consensus_score" in shown[2]
    honest = CliRunner().invoke(app, ["council", "show", str(path)]).output.splitlines()
    assert honest[2] == "- **Verification**: reproduced from the recorded raw answers"


@pytest.mark.parametrize(
    ("name", "deliberation", "chair", "edit", "field"),
    [
        ("single", {}, False, _set("verdict", "member_count", 9), "verdict.member_count"),
        (
            "vote",
            {"method": "vote"},
            False,
            _set("deliberation", "synthesis", "text", "All passed."),
            "deliberation.synthesis.text",
        ),
        (
            "vote-merge",
            {"method": "vote"},
            False,
            _set("deliberation", "consolidation", "items", 0, "text", "YES: ship it"),
            "deliberation.consolidation.items[0].text",
        ),
        (
            "rank",
            {"method": "rank"},
            False,
            _set("deliberation", "synthesis", "uncertainty_markers", []),
            "deliberation.synthesis.uncertainty_markers[0]",
        ),
        (
            "rounds",
            {"method": "rank", "rounds": {"max_rounds": 2}},
            True,
            _set("deliberation", "rounds", 0, "consensus_score", 0.5),
            "deliberation.rounds[0].consensus_score",
        ),
        (
            "red",
            {"method": "rank", "council_type": "red_team"},
            False,
            _set("deliberation", "risk_register", "summary", "No risks."),
            "deliberation.risk_register.summary",
        ),
        ("decision", {}, False, _set("decision", "Nothing to decide."), "decision"),
    ],
)
def test_an_untouched_run_verifies_and_an_edited_field_is_named(
    tmp_path: Path,
    name: str,
    deliberation: dict[str, Any],
    chair: bool,
    edit: Edit,
    field: str,
) -> None:
    orchestrator = FunctionRuntime(_chair, name="chair") if chair else None
    path = _run(tmp_path, name, orchestrator, **deliberation)
    clean = _verify(path)
    assert clean.exit_code == 0, clean.output
    assert "verify cannot check:" in clean.output
    assert "raw answer edited together with everything derived from it" in clean.output
    result = _verify(_edited(path, edit))
    assert result.exit_code == 1
    assert f"  {field}: recorded" in result.output, result.output


def test_a_halted_run_verifies_and_its_halt_is_re_derived(tmp_path: Path) -> None:
    rts = three()
    rts[1] = FunctionRuntime(
        scripted("NO", [], turns=True),
        name="codex",
        model_family="openai",
        family_confidence="confirmed",
    )
    convene(
        request(
            "halt",
            method="rank",
            rounds={"max_rounds": 3, "on_divergence": "halt", "convergence_threshold": 1.0},
        ),
        CouncilOptions(
            runtimes=rts,
            rune_dir=tmp_path,
            orchestrator=FunctionRuntime(
                lambda p: 'Add a rollback step first.\nSYNTH open=["more?"]', name="chair"
            ),
        ),
    )
    path = tmp_path / "council" / "run-halt.json"
    doc = json.loads(path.read_text())
    assert doc["deliberation"]["halted"] and doc["needs_decision"]
    # Before: re-derivation lost the halt and reported needs_decision / decision as edited.
    assert _verify(path).exit_code == 0
    result = _verify(_edited(path, _set("deliberation", "halted", False)))
    assert result.exit_code == 1 and "  deliberation.halted: recorded false" in result.output


def test_a_chairman_verdict_without_a_digest_is_reported_unchecked(tmp_path: Path) -> None:
    path = _run(tmp_path, "old", orchestrator=FunctionRuntime(_chair, name="chair"), method="rank")
    result = _verify(_edited(path, _set("deliberation", "synthesis", "digest", None)))
    assert result.exit_code == 0
    assert "not checked: deliberation.synthesis: model-written, and no digest" in result.output
