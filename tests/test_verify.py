"""`rune council verify`: the recorded verdict must follow from the recorded raw answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rune_council.cli import app
from rune_council.runs import load
from rune_council.verify import recompute, verify

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / ".rune-example" / "council"
FINISHED = sorted(p for p in EXAMPLES.glob("run-*.json") if "skeleton" not in p.name)


def run_verify(*args: str) -> Any:
    return CliRunner().invoke(app, ["council", "verify", *args])


def tampered(
    tmp: Path, change: Any, source: Path = EXAMPLES / "run-orders-shard-critique.json"
) -> Path:
    doc = json.loads(source.read_text())
    change(doc)
    path = tmp / "tampered.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("example", FINISHED, ids=lambda p: p.name)
def test_every_committed_example_reproduces(example: Path) -> None:
    result = run_verify(str(example))
    assert result.exit_code == 0, result.output
    assert "reproduced" in result.output and "NOT" not in result.output


def test_the_examples_cover_a_degraded_slot_and_real_consensus() -> None:
    # Otherwise "reproduces" would be an easy claim to make.
    docs = [json.loads(p.read_text()) for p in FINISHED]
    assert any(doc["agreement"]["consensus_claims"] for doc in docs)
    assert any(doc["runtime_report"]["degraded_to_subagent"] for doc in docs)
    assert any(v["claims"] for doc in docs for v in doc["voices"])


def test_an_edited_stamp_is_named(tmp_path: Path) -> None:
    path = tampered(tmp_path, lambda d: d.update(decorrelation="NO_DECORRELATION"))
    result = run_verify(str(path))
    assert result.exit_code == 1
    assert "NOT reproduced" in result.output
    assert "  decorrelation: recorded 'NO_DECORRELATION', recomputed 'MULTI_FAMILY'" in (
        result.output
    )


def test_a_consensus_claim_moved_into_dissent_is_named(tmp_path: Path) -> None:
    def demote(doc: dict[str, Any]) -> None:
        claim = doc["agreement"]["consensus_claims"].pop(0)
        doc["agreement"]["dissent"].append(
            {"claim": claim["claim"], "label": "unverified", "voice_ids": claim["voice_ids"]}
        )

    result = run_verify(str(tampered(tmp_path, demote)))
    assert result.exit_code == 1
    assert "agreement.consensus_claims[0]: recorded (absent)" in result.output


def test_an_edited_raw_answer_no_longer_supports_the_recorded_stance(tmp_path: Path) -> None:
    def flip(doc: dict[str, Any]) -> None:
        voice = doc["voices"][0]
        old = voice["stance"]
        assert old in voice["raw"]["text"]
        voice["raw"]["text"] = voice["raw"]["text"].replace(old, "YES, ship it as written")

    result = run_verify(str(tampered(tmp_path, flip)))
    assert result.exit_code == 1
    assert "voices[0].stance: recorded " in result.output
    assert "recomputed 'YES, ship it as written'" in result.output
    assert "voices[0].position: recorded 'no', recomputed 'yes'" in result.output


def test_an_edited_evidence_verdict_is_named(tmp_path: Path) -> None:
    def forge(doc: dict[str, Any]) -> None:
        ev = next(
            e
            for v in doc["voices"]
            for c in v["claims"]
            for e in c["evidence"]
            if e["verified"] == "true"
        )
        ev["verified"] = "false"

    result = run_verify(str(tampered(tmp_path, forge)))
    assert result.exit_code == 1
    assert "evidence" in result.output and "recorded 'false', recomputed 'true'" in result.output


def test_json_output_lists_each_difference(tmp_path: Path) -> None:
    path = tampered(tmp_path, lambda d: d.update(needs_decision=not d["needs_decision"]))
    result = run_verify(str(path), "--json")
    assert result.exit_code == 1
    doc = json.loads(result.output)
    assert doc["reproduced"] is False
    assert [d["field"] for d in doc["differences"]] == ["needs_decision"]


def test_a_run_still_in_progress_cannot_be_verified() -> None:
    result = run_verify(str(EXAMPLES / "run-orders-shard-critique.skeleton.json"))
    assert result.exit_code == 2
    assert "only a completed run has a verdict to verify" in result.output


def test_recompute_leaves_the_recorded_result_untouched() -> None:
    recorded = load(EXAMPLES / "run-orders-shard-codex-fallback.json")
    before = recorded.model_dump()
    fresh = recompute(recorded)
    assert recorded.model_dump() == before
    assert fresh is not recorded and verify(recorded).reproduced


def test_a_missing_run_is_one_clear_line(tmp_path: Path) -> None:
    result = run_verify("nope", "--rune-dir", str(tmp_path))
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"rune council: no run file at {tmp_path / 'council' / 'run-nope.json'}"
    ]


RANKING = """\
@phase propose
v1 PROPOSE p1 "shard by customer"
v2 PROPOSE p2 "partition by month"
v3 PROPOSE p3 "do nothing yet"
@phase rank
v1 RANK p2>p1=p3 conf=0.8
v2 RANK p1>p2>p3
v3 RANK p2>p3>p1
"""


def with_rank_stage(doc: dict[str, Any]) -> None:
    from rune_council.deliberation.tally import tally_text

    tally = tally_text(RANKING).model_dump(mode="json")
    # Borda x conf by hand, N=3: p2 = 2(0.8) + 1 + 2, p1 = 0.5(0.8) + 2 + 0,
    # p3 = 0.5(0.8) + 0 + 1 (a tie for places 1-2 shares (1 + 0) / 2).
    assert {s["label"]: s["score"] for s in tally["scores"]} == pytest.approx(
        {"p2": 4.6, "p1": 2.4, "p3": 1.4}
    )
    doc["deliberation"] = {
        "method": "rank",
        "rank": {
            "proposals": [
                {"label": f"p{i}", "voice_id": f"v{i}", "summary": s}
                for i, s in enumerate(("shard by customer", "partition by month", "wait"), 1)
            ],
            "transcript": RANKING,
            "tally": tally,
        },
    }
    # A rank stage changes the verdict block too; a consistent file carries both.
    from rune_council.core.contract import CouncilResult
    from rune_council.deliberation.metadata import verdict_metadata

    doc["verdict"] = verdict_metadata(CouncilResult.model_validate(doc)).model_dump(mode="json")


def test_a_rank_tally_is_recomputed_from_its_transcript(tmp_path: Path) -> None:
    result = run_verify(str(tampered(tmp_path, with_rank_stage)))
    assert result.exit_code == 0, result.output

    def forged(doc: dict[str, Any]) -> None:
        with_rank_stage(doc)
        doc["deliberation"]["rank"]["tally"]["winner"] = "p1"

    result = run_verify(str(tampered(tmp_path, forged)))
    assert result.exit_code == 1
    assert "deliberation.rank.tally.winner: recorded 'p1', recomputed 'p2'" in result.output


def test_a_vote_is_recounted_under_the_absence_aware_threshold(tmp_path: Path) -> None:
    def voted(doc: dict[str, Any]) -> None:
        doc["deliberation"] = {
            "method": "vote",
            "vote": {
                "threshold": 2 / 3,
                "denominator": 4,
                "counted": ["v1", "v2", "v3", "v4"],
                "items": [
                    # 2/3 of 4 counted ballots rounds up to 3 yes votes, so 2 is not enough.
                    {
                        "number": 1,
                        "text": "Add a rollback step",
                        "yes": ["v1", "v2"],
                        "no": ["v3", "v4"],
                        "required": 2,
                        "outcome": "passed",
                    },
                    {
                        "number": 2,
                        "text": "Shard now",
                        "yes": ["v1", "v2", "v3"],
                        "no": ["v4"],
                        "required": 3,
                        "outcome": "passed",
                    },
                    {"number": 3, "text": "Nobody voted", "required": 3, "outcome": "failed"},
                ],
                "unvoted": [],
            },
        }

    result = run_verify(str(tampered(tmp_path, voted)))
    assert result.exit_code == 1
    assert "deliberation.vote.items[0].required: recorded 2, recomputed 3" in result.output
    assert "deliberation.vote.items[0].outcome: recorded 'passed', recomputed 'failed'" in (
        result.output
    )
    assert "deliberation.vote.items[2].outcome: recorded 'failed', recomputed 'unvoted'" in (
        result.output
    )
    assert "deliberation.vote.unvoted: recorded [], recomputed [3]" in result.output
    assert "items[1]" not in result.output
