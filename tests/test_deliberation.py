"""Councils that deliberate, end to end, with fake voices; every run file checked by schema.

The members are scripted voices that read the prompt they are given and answer the way a
model would: the JSON answer to the question, VOTE lines to a ballot, a RANK line over the
letters they were shown. Some run in-process (FunctionRuntime), some as real subprocesses
(the fake CLIs under their real names, and a command-line orchestrator).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from rune_council import CouncilOptions, FunctionRuntime, convene
from rune_council.core.contract import SCHEMA_VERSION, CouncilResult
from rune_council.council import convene_chain
from rune_council.runtimes.cli import CliRuntime
from rune_council.runtimes.clis import BUILTIN
from rune_council.runtimes.subagent import CommandRuntime
from tests.fakes.bin import install_fake, path_with
from tests.helpers import (
    CHAIR_TEXT,
    MERGE,
    OFFLINE,
    QUESTION,
    REGISTER,
    ROLLBACK,
    SHARDS,
    UNDO,
    answer,
    council_result_schema,
    member,
    orchestrator_merging,
    request,
    scripted,
    three,
)

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = council_result_schema()
Q = QUESTION


def on_disk(tmp_path: Path, run_id: str) -> dict[str, Any]:
    path = tmp_path / "council" / f"run-{run_id}.json"
    data = json.loads(path.read_text())
    jsonschema.validate(data, SCHEMA)
    assert data["schema_version"] == SCHEMA_VERSION
    # Every kind of run (vote, rank, rounds halted or converged, red team, chain) is
    # re-derived from its raw answers as it lies on disk.
    from rune_council.runs import load
    from rune_council.verify import verify

    # As it lies on disk, its artifact read back from the sidecar (contract 2.8).
    outcome = verify(load(path))
    assert outcome.reproduced, outcome.differences
    return data


# --------------------------------------------------------------------------- consolidate + vote


def test_vote_council_merges_votes_and_records_the_threshold(tmp_path: Path) -> None:
    chair = FunctionRuntime(orchestrator_merging(MERGE), name="chair")
    result = convene(
        request("vote-1", method="vote"),
        CouncilOptions(runtimes=three(), rune_dir=tmp_path, orchestrator=chair),
    )
    d = result.deliberation
    assert d is not None and d.consolidation is not None and d.vote is not None
    assert d.consolidation.fallback is None and d.consolidation.by == "chair"
    assert d.consolidation.items[0].voice_ids == ["v1", "v2"]
    vote = d.vote
    assert vote.denominator == 3 and vote.threshold == pytest.approx(2 / 3)
    # Members approve items that mention the rollback: all three approve item 1 only.
    assert [(i.number, i.outcome, len(i.yes)) for i in vote.items][:2] == [
        (1, "passed", 3),
        (2, "failed", 0),
    ]
    assert all(i.required == 2 for i in vote.items)
    assert d.synthesis is not None and d.synthesis.by == "chair"
    data = on_disk(tmp_path, "vote-1")
    assert data["deliberation"]["vote"]["items"][0]["yes"] == ["v1", "v2", "v3"]
    assert any(e["kind"] == "deliberation.status" for e in data["events"])
    assert data["verdict"]["member_count"] == 3 and data["verdict"]["revision_count"] == 1


@pytest.mark.parametrize(
    ("behaviour", "reason"),
    [
        ("raise", "error_reported"),
        ("garbage", "unusable answer"),
        ("unknown-source", "unknown source v9.c1"),
    ],
)
def test_a_failing_orchestrator_falls_back_to_the_deterministic_merge(
    tmp_path: Path, behaviour: str, reason: str
) -> None:
    def fn(prompt: str) -> str:
        if behaviour == "raise":
            raise RuntimeError("orchestrator down")
        if behaviour == "garbage":
            return "I think everyone basically agrees."
        return 'PROPOSE p1 "made up" ev=v9.c1'

    result = convene(
        request("vote-fb", method="vote"),
        CouncilOptions(
            runtimes=three(),
            rune_dir=tmp_path,
            orchestrator=FunctionRuntime(fn, name="chair"),
        ),
    )
    merged = result.deliberation.consolidation  # type: ignore[union-attr]
    assert merged is not None and merged.fallback == "deterministic"
    assert reason in (merged.fallback_reason or "")
    texts = [i.text for i in merged.items]
    # One item per position, one per claim cluster; the rollback claims share an anchor ref.
    assert texts[0].startswith("YES") and texts[1].startswith("NO")
    assert sum("rollback" in t.lower() or "undo" in t.lower() for t in texts) >= 1
    assert on_disk(tmp_path, "vote-fb")["deliberation"]["consolidation"]["fallback"] == (
        "deterministic"
    )


def test_absent_members_leave_the_denominator(tmp_path: Path) -> None:
    rts = [
        member(scripted("NO", [ROLLBACK]), "claude", "anthropic"),
        member(scripted("NO", [UNDO]), "codex", "openai"),
        member(scripted("YES", [SHARDS], fail_on="Items:"), "gemini", "google"),  # ballot fails
        member(
            lambda p: "I would rather not vote" if "Items:" in p else answer(Q, "NO", []),
            "qwen",
            "alibaba",
        ),
        member(scripted("NO", [], fail_on="independent voice"), "grok", "xai"),  # never answers
    ]
    result = convene(
        request("vote-absent", n=5, method="vote"),
        CouncilOptions(runtimes=rts, rune_dir=tmp_path),
    )
    vote = result.deliberation.vote  # type: ignore[union-attr]
    assert vote is not None
    assert vote.counted == ["v1", "v2"] and vote.denominator == 2
    absent = {(a.voice_id, a.stage) for a in vote.absent}
    assert absent == {("v3", "ballot"), ("v4", "ballot"), ("v5", "answer")}
    assert {b.voice_id: b.outcome for b in vote.ballots} == {
        "v1": "counted",
        "v2": "counted",
        "v3": "failed",
        "v4": "malformed",
    }
    assert all(i.required == 2 for i in vote.items)  # ceil(2/3 x 2), not x 5
    on_disk(tmp_path, "vote-absent")


def test_fake_clis_that_cannot_vote_leave_every_item_unvoted(tmp_path: Path) -> None:
    # Real subprocesses under the CLIs' names; they answer the question but reply to a
    # ballot with the same JSON, which holds no VOTE line: a malformed ballot, so absent.
    bin_dir = tmp_path / "bin"
    install_fake(bin_dir, "claude", answer=answer(Q, "NO", [ROLLBACK]))
    install_fake(bin_dir, "codex", answer=answer(Q, "NO", [UNDO]))
    env = {"PATH": path_with(bin_dir), "HOME": str(tmp_path)}
    rts = [CliRuntime(BUILTIN[n], str(bin_dir / n), env) for n in ("claude", "codex")]
    result = convene(
        request("vote-cli", method="vote", n=2),
        CouncilOptions(runtimes=rts, rune_dir=tmp_path),
    )
    vote = result.deliberation.vote  # type: ignore[union-attr]
    assert vote is not None and vote.denominator == 0
    assert {i.outcome for i in vote.items} == {"unvoted"} and vote.unvoted
    assert {a.reason for a in vote.absent} == {"malformed ballot: no usable VOTE or ABSTAIN line"}
    assert result.deliberation.consolidation.fallback == "deterministic"  # type: ignore[union-attr]
    on_disk(tmp_path, "vote-cli")


# --------------------------------------------------------------------------- rank + synth


def test_rank_council_blind_ballots_tally_and_chairman(tmp_path: Path) -> None:
    seen: dict[str, list[str]] = {"claude": [], "codex": [], "gemini": []}
    rts = [
        member(
            scripted("NO, not before a rollback exists", [ROLLBACK], seen=seen["claude"]),
            "claude",
            "anthropic",
        ),
        member(scripted("NO", [UNDO, OFFLINE], seen=seen["codex"]), "codex", "openai"),
        member(scripted("YES, with care", [SHARDS], seen=seen["gemini"]), "gemini", "google"),
    ]
    chair_prompts: list[str] = []

    def chair(prompt: str) -> str:
        chair_prompts.append(prompt)
        return CHAIR_TEXT

    result = convene(
        request("rank-1", method="rank"),
        CouncilOptions(
            runtimes=rts,
            rune_dir=tmp_path,
            orchestrator=FunctionRuntime(chair, name="chair"),
        ),
    )
    d = result.deliberation
    assert d is not None and d.rank is not None and d.synthesis is not None
    # Each member saw the others' answers, never its own.
    for name, own in (("claude", "not before a rollback"), ("gemini", "YES, with care")):
        ballot_prompt = next(p for p in seen[name] if "\nRANK " in p)
        assert own not in ballot_prompt
    tally = d.rank.tally
    assert tally.final_order[0] == ["p1"] and tally.winner == "p1"
    assert tally.consensus.w is not None and "incomplete" in tally.consensus.method
    assert d.synthesis.by == "chair" and d.synthesis.closed
    assert "p1" in chair_prompts[0] and "score" in chair_prompts[0]
    [marker] = d.synthesis.uncertainty_markers
    assert marker.text.startswith("Whether eight shards leave enough headroom")
    assert result.verdict is not None and result.verdict.uncertainty_markers == [marker]
    assert result.verdict.consensus_score == tally.consensus.w
    data = on_disk(tmp_path, "rank-1")
    # The stored transcript re-tallies to the same numbers with the CLI.
    transcript = tmp_path / "rank.dsl"
    transcript.write_text(data["deliberation"]["rank"]["transcript"], encoding="utf-8")
    out = _rune("council", "tally", str(transcript), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == data["deliberation"]["rank"]["tally"]


def test_without_a_chairman_the_verdict_comes_from_the_arithmetic(tmp_path: Path) -> None:
    result = convene(
        request("rank-arith", method="rank"),
        CouncilOptions(runtimes=three(), rune_dir=tmp_path),
    )
    s = result.deliberation.synthesis  # type: ignore[union-attr]
    assert s is not None and s.fallback == "arithmetic"
    assert s.fallback_reason == "no orchestrator configured"
    assert "ranks p1 (v1) first" in s.text and "Borda x confidence" in s.text
    # The YES/NO split from ARBITRATE becomes a structured uncertainty marker.
    assert any("split on the question" in m.text for m in s.uncertainty_markers)
    on_disk(tmp_path, "rank-arith")


def test_a_chairman_that_fails_is_replaced_by_the_arithmetic(tmp_path: Path) -> None:
    chair = CommandRuntime(argv=[sys.executable, "-c", "import sys; sys.stdin.read(); sys.exit(3)"])
    result = convene(
        request("rank-chair-dies", method="rank"),
        CouncilOptions(runtimes=three(), rune_dir=tmp_path, orchestrator=chair),
    )
    s = result.deliberation.synthesis  # type: ignore[union-attr]
    assert s is not None and s.fallback == "arithmetic"
    assert s.attempt is not None and s.attempt.outcome == "exit_nonzero"
    on_disk(tmp_path, "rank-chair-dies")


def test_a_malformed_rank_ballot_is_absent_and_logged(tmp_path: Path) -> None:
    rts = three()
    rts[2] = member(
        lambda p: "RANK v1>v2" if "\nRANK " in p else answer(Q, "YES", [SHARDS]), "gemini", "google"
    )
    result = convene(
        request("rank-bad", method="rank"),
        CouncilOptions(runtimes=rts, rune_dir=tmp_path),
    )
    rank = result.deliberation.rank  # type: ignore[union-attr]
    assert rank is not None and [a.voice_id for a in rank.absent] == ["v3"]
    assert any("anonymised labels" in d.reason and d.source == "v3" for d in rank.dropped_lines)
    assert [r.ranker for r in rank.tally.rankers] == ["v1", "v2"]


# --------------------------------------------------------------------------- rounds


def test_rounds_stop_early_once_the_council_converges(tmp_path: Path) -> None:
    result = convene(
        request("rounds-conv", method="rank", rounds={"max_rounds": 3}),
        CouncilOptions(runtimes=three(), rune_dir=tmp_path),
    )
    d = result.deliberation
    assert d is not None and len(d.rounds) == 1 and d.converged_early
    assert d.rounds[0].consensus_score == 1.0
    assert result.verdict is not None and result.verdict.converged_early
    assert result.verdict.revision_count == 1


def test_an_open_synth_keeps_the_council_open_for_another_round(tmp_path: Path) -> None:
    seen: list[str] = []
    answers = iter(
        [
            'Shard later.\nSYNTH open=["who owns the lookup service?"]',
            "Shard later; the platform team owns the lookup service.\nSYNTH open=[]",
        ]
    )
    rts = three()
    rts[0] = member(
        scripted("NO, not before a rollback exists", [ROLLBACK], seen=seen), "claude", "anthropic"
    )
    result = convene(
        request("rounds-open", method="rank", rounds={"max_rounds": 3}),
        CouncilOptions(
            runtimes=rts,
            rune_dir=tmp_path,
            orchestrator=FunctionRuntime(lambda p: next(answers), name="chair"),
        ),
    )
    d = result.deliberation
    assert d is not None and [r.closed for r in d.rounds] == [False, True]
    assert d.converged_early and result.verdict.revision_count == 2  # type: ignore[union-attr]
    # Round 2's prompt starts with the prefix and carries the draft verdict.
    second = [p for p in seen if "Draft verdict" in p]
    assert second and second[0].startswith("An earlier round of this council")
    assert "who owns the lookup service?" not in second[0] or "Shard later." in second[0]
    on_disk(tmp_path, "rounds-open")


@pytest.mark.parametrize(
    ("policy", "rounds_run", "flag"), [("warn", 3, True), ("halt", 2, True), ("continue", 3, False)]
)
def test_divergence_policies(tmp_path: Path, policy: str, rounds_run: int, flag: bool) -> None:
    # Round 1: every member ranks the rollback answer first (W = 1). From round 2 on, one
    # member turns around: the consensus score falls by far more than 0.05.
    rts = three()
    rts[1] = member(scripted("NO", [UNDO, OFFLINE], turns=True), "codex", "openai")
    result = convene(
        request(
            f"div-{policy}",
            method="rank",
            rounds={"max_rounds": 3, "on_divergence": policy, "convergence_threshold": 1.0},
        ),
        CouncilOptions(
            runtimes=rts,
            rune_dir=tmp_path,
            orchestrator=FunctionRuntime(
                lambda p: 'Add a rollback step first.\nSYNTH open=["more?"]', name="chair"
            ),
        ),
    )
    d = result.deliberation
    assert d is not None and len(d.rounds) == rounds_run
    assert d.rounds[1].diverged and (d.rounds[1].delta or 0) < -0.05
    assert d.divergence_detected is flag and result.verdict.divergence_detected is flag  # type: ignore[union-attr]
    assert d.halted is (policy == "halt")
    # The lone SHOULD claim (a weekend offline) needs a person whatever the policy; a halt
    # says so on top.
    assert result.needs_decision is True and result.decision is not None
    assert result.decision.startswith("Deliberation halted") is (policy == "halt")
    on_disk(tmp_path, f"div-{policy}")


def test_a_member_added_in_round_one_keeps_its_seat(tmp_path: Path) -> None:
    calls = {"broken": 0}

    def broken(prompt: str) -> str:
        calls["broken"] += 1
        raise RuntimeError("CLI crashed")

    rts = [
        member(scripted("NO", [ROLLBACK]), "claude", "anthropic"),
        member(scripted("NO", [UNDO]), "codex", "openai"),
        member(broken, "gemini", "google"),
    ]
    subagent = FunctionRuntime(scripted("YES", [SHARDS]), name="helper")
    result = convene(
        request(
            "rounds-seat", method="rank", rounds={"max_rounds": 2, "convergence_threshold": 1.0}
        ),
        CouncilOptions(
            runtimes=rts,
            subagent=subagent,
            rune_dir=tmp_path,
            orchestrator=FunctionRuntime(
                lambda p: 'Rollback first.\nSYNTH open=["x"]', name="chair"
            ),
        ),
    )
    d = result.deliberation
    assert d is not None and len(d.rounds) == 2
    assert calls["broken"] == 1  # the crashed CLI is not asked again in round 2
    assert [v.runtime for v in d.rounds[1].voices] == ["claude", "codex", "helper"]
    assert result.voices[2].is_fallback and result.voices[2].status == "complete"


# --------------------------------------------------------------------------- red team


def test_red_team_attacks_and_produces_a_risk_register(tmp_path: Path) -> None:
    seen: list[str] = []
    rts = three()
    rts[0] = member(scripted("NO", [ROLLBACK], seen=seen), "claude", "anthropic")
    result = convene(
        request("red-1", council_type="red_team"),
        CouncilOptions(
            runtimes=rts,
            rune_dir=tmp_path,
            orchestrator=FunctionRuntime(lambda p: f"```json\n{REGISTER}\n```", name="chair"),
        ),
    )
    assert "You are an attacker" in seen[0] and "severity and the novelty" in seen[1]
    d = result.deliberation
    assert d is not None and d.method == "rank" and d.council_type == "red_team"
    register = d.risk_register
    assert register is not None and register.fallback is None and register.by == "chair"
    assert [r.severity for r in register.risks] == ["critical", "high"]
    assert register.risks[0].identified_by == ["v1", "v2"]  # labels mapped back to seats
    assert result.verdict is not None and result.verdict.council_type == "red_team"
    on_disk(tmp_path, "red-1")


def test_red_team_without_a_chairman_builds_the_register_from_claims(tmp_path: Path) -> None:
    result = convene(
        request("red-2", council_type="red_team"),
        CouncilOptions(runtimes=three(), rune_dir=tmp_path),
    )
    register = result.deliberation.risk_register  # type: ignore[union-attr]
    assert register is not None and register.fallback == "arithmetic"
    assert register.risks[0].severity == "critical" and register.risks[0].identified_by == [
        "v1",
        "v2",
    ]
    assert {r.description for r in register.risks} >= {"Eight shards leaves headroom"}
    on_disk(tmp_path, "red-2")


def test_a_chain_feeds_the_red_team_register_into_a_standard_council(tmp_path: Path) -> None:
    seen: list[str] = []
    rts = three()
    rts[2] = member(scripted("YES, with care", [SHARDS], seen=seen), "gemini", "google")

    def chair(prompt: str) -> str:
        if "red-team council" in prompt and "risk register" in prompt:
            return REGISTER
        return "Do not shard yet.\nSYNTH open=[]"

    result = convene_chain(
        request("chain-1", method="rank"),
        CouncilOptions(
            runtimes=rts,
            rune_dir=tmp_path,
            orchestrator=FunctionRuntime(chair, name="chair"),
        ),
    )
    red = on_disk(tmp_path, "chain-1.red-team")
    assert red["deliberation"]["council_type"] == "red_team"
    assert result.id == "chain-1" and result.deliberation is not None
    assert result.deliberation.chain is not None
    assert result.deliberation.chain.red_team_run == "chain-1.red-team"
    standard_prompts = [p for p in seen if "You are an attacker" not in p and "CONTEXT" in p]
    assert standard_prompts and "No rollback if the migration fails half way" in standard_prompts[0]
    on_disk(tmp_path, "chain-1")


# --------------------------------------------------------------------------- metadata, CLI


def test_every_result_carries_verdict_metadata(tmp_path: Path) -> None:
    result = convene(
        {"id": "plain", "question": Q},
        CouncilOptions(runtimes=three(), rune_dir=tmp_path),
    )
    m = result.verdict
    assert m is not None and result.deliberation is None
    assert m.consensus_score is None and m.confidence_label is None
    assert m.dissent_detected and m.dissent_basis == "positions" and m.dissenting_member == "v3"
    assert m.member_count == 3 and m.revision_count == 1 and m.council_type == "standard"
    assert m.closed_at == result.finished_at and (m.duration_seconds or 0) >= 0
    on_disk(tmp_path, "plain")


def _rune(*args: str, stdin: str | None = None) -> Any:
    import subprocess

    return subprocess.run(
        [sys.executable, "-m", "rune_council.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def test_tally_command_exit_codes_and_text(tmp_path: Path) -> None:
    good = tmp_path / "good.dsl"
    good.write_text(
        'PROPOSE p1 "a"\nPROPOSE p2 "b"\nPROPOSE p3 "c"\n'
        "m1 RANK p1>p2>p3 conf=0.9\nm2 RANK p1>p3>p2\nm3 RANK p3>p2>p1\nm4 RANK p1>p2>p3\n"
        "not a move\n",
        encoding="utf-8",
    )
    out = _rune("council", "tally", str(good))
    assert out.returncode == 0, out.stderr
    assert "final order: p1 > p3 > p2" in out.stdout
    assert "dissenting rankers: m3" in out.stdout
    assert "line 8: not a move" in out.stdout
    bad = tmp_path / "bad.dsl"
    bad.write_text('PROPOSE p1 "a"\nREQUIRE MUST "sign-off first"\n', encoding="utf-8")
    out = _rune("council", "tally", str(bad), "--json")
    assert out.returncode == 1 and json.loads(out.stdout)["errors"][0]["line"] == 2
    out = _rune("council", "tally", str(tmp_path / "missing.dsl"))
    assert out.returncode == 2 and "cannot read" in out.stderr


VOICE_SCRIPT = """
import json, re, sys
prompt = sys.stdin.read()
if "You are the orchestrator" in prompt:
    print("nothing useful")
elif "\\nRANK " in prompt:
    print("RANK " + ">".join(sorted(set(re.findall(r"^Answer ([A-Z]):", prompt, re.M)))))
elif prompt.startswith("You chair"):
    print("Shard later.\\nSYNTH open=[]")
else:
    print(json.dumps({"question_echo": "Should we shard the orders table?",
                      "stance": "NO, not yet", "claims": []}))
"""


def test_cli_runs_a_ranking_council_with_a_command_orchestrator(tmp_path: Path) -> None:
    script = tmp_path / "voice.py"
    script.write_text(VOICE_SCRIPT, encoding="utf-8")
    command = f"{sys.executable} {script}"
    out = _rune(
        "council",
        Q,
        "--subagent-cmd",
        command,
        "--deliberate",
        "rank",
        "--orchestrator-cmd",
        command,
        "--rounds",
        "2",
        "--id",
        "cli-rank",
        "--rune-dir",
        str(tmp_path / "rune"),
    )
    assert out.returncode == 0, out.stderr
    assert "### Deliberation (rank, standard)" in out.stdout
    assert "### Verdict (by orchestrator-cmd)" in out.stdout and "Shard later." in out.stdout
    assert "### Verdict metadata" in out.stdout
    data = json.loads((tmp_path / "rune" / "council" / "run-cli-rank.json").read_text())
    jsonschema.validate(data, SCHEMA)
    assert data["request"]["deliberation"]["rounds"]["max_rounds"] == 2


def test_cli_rejects_an_unknown_deliberation_method(tmp_path: Path) -> None:
    out = _rune("council", Q, "--deliberate", "shout", "--rune-dir", str(tmp_path))
    assert out.returncode == 2 and "--deliberate" in out.stderr and "'shout'" in out.stderr
    assert "rank" in out.stderr and "vote" in out.stderr  # the values it would take


def test_old_run_files_still_validate() -> None:
    for path in sorted((ROOT / ".rune-example" / "council").glob("*.json")):
        data = json.loads(path.read_text())
        jsonschema.validate(data, SCHEMA)
        CouncilResult.model_validate(data)
