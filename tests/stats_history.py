"""A small run history for the stats tests, run through the real pipeline, then dated.

The four runs (families: claude anthropic, codex openai, gemini google, qwen alibaba):

    a  Mon 2026-11-02  claude NO + codex NO share the rollback claim (line 6): consensus
                       anthropic+openai; gemini YES with its own claim: single-voice dissent
                       (google) and a YES/NO split. MULTI_FAMILY, needs a decision.
    b  Wed 2026-11-04  claude YES + gemini YES share the rollback claim: consensus
                       anthropic+google. MULTI_FAMILY, no decision needed.
    c  Tue 2026-11-10  claude answers, codex times out, no runtime left: one voice,
                       NO_DECORRELATION, its lone claim is single-voice dissent (anthropic).
    d  Thu 2026-11-12  codex fails (exit 3) and qwen takes the slot; gemini's answer is not
                       JSON (GATE: malformed); claude + qwen share the rollback claim:
                       consensus alibaba+anthropic. MULTI_FAMILY.

Then what scripted voices cannot choose is edited in, as a person could write it by hand:
start dates, claude's latencies, recorded rounds; and a foreign and a broken JSON file are
added, as a real history also holds.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

from rune_council.testing import Failure, ScriptedCouncil, ScriptedRuntime, answer_for, claim_on
from tests.helpers import PLAN

Q = "Is the sharding plan in plan.md safe to execute as written?"
ROLLBACK_A = claim_on(PLAN, 6, "No rollback step exists", name="plan.md", severity="MUST")
ROLLBACK_B = claim_on(PLAN, 6, "There is no rollback step", name="plan.md", severity="MUST")
OFFLINE = claim_on(
    PLAN, 4, "The site is offline a whole weekend", name="plan.md", severity="SHOULD"
)
STARTS = {
    "a": "2026-11-02T10:00:00+00:00",
    "b": "2026-11-04T10:00:00+00:00",
    "c": "2026-11-10T10:00:00+00:00",
    "d": "2026-11-12T10:00:00+00:00",
}
# claude's answered calls, run by run: p50 = (200 + 300) / 2 = 250; p95: rank h = 3 x 0.95
# = 2.85, so 300 + 0.85 x (1000 - 300) = 895.
CLAUDE_MS = {"a": 100, "b": 200, "c": 300, "d": 1000}
HOUR_AGO = 3600


def _voice(family: str, name: str, *script: Any, delay_s: float = 0.0) -> ScriptedRuntime:
    return ScriptedRuntime(*script, family=family, name=name, delay_s=delay_s)


def _request(run_id: str, n: int, **extra: Any) -> dict[str, Any]:
    return {
        "id": run_id,
        "question": Q,
        "n": n,
        "artifact": {"name": "plan.md", "text": PLAN},
        **extra,
    }


def _rank_round(number: int, score: float, winner: str | None) -> dict[str, Any]:
    """A recorded round whose rank tally put ``winner``'s answer first."""
    proposals = [{"label": "p1", "voice_id": winner or "v1", "summary": "first"}]
    return {
        "round": number,
        "consensus_score": score,
        "closed": True,
        "rank": {
            "proposals": proposals,
            "transcript": "",
            "tally": {
                "valid": True,
                "proposals": ["p1"],
                "winner": "p1" if winner else None,
                "consensus": {"w": score, "method": "complete", "rankers": 2, "proposals": 2},
            },
        },
    }


def _with_rounds(doc: dict[str, Any], rounds: list[dict[str, Any]]) -> None:
    doc["request"]["deliberation"] = {
        "method": "rank",
        "rounds": {"max_rounds": 2, "convergence_threshold": 0.85},
    }
    doc["deliberation"] = {"method": "rank", "rounds": rounds}
    doc["verdict"]["consensus_score"] = rounds[-1]["consensus_score"]
    doc["verdict"]["revision_count"] = len(rounds)


def age(path: Path, seconds: float = HOUR_AGO) -> None:
    """Date a file as an earlier run's file would be (an index trusts only settled files)."""
    then = dt.datetime.now().timestamp() - seconds
    os.utime(path, (then, then))


def build_history(root: Path) -> Path:
    council = ScriptedCouncil(root)
    council.runtimes = [
        _voice("anthropic", "claude", answer_for(Q, "NO, no rollback", [ROLLBACK_A])),
        _voice("openai", "codex", answer_for(Q, "NO, it cannot be undone", [ROLLBACK_B])),
        _voice("google", "gemini", answer_for(Q, "YES, acceptable", [OFFLINE])),
    ]
    council.convene(_request("a", 3))
    council.runtimes = [
        _voice("anthropic", "claude", answer_for(Q, "YES, fine", [ROLLBACK_A])),
        _voice("google", "gemini", answer_for(Q, "YES, fine", [ROLLBACK_B])),
    ]
    council.convene(_request("b", 2))
    council.runtimes = [
        _voice("anthropic", "claude", answer_for(Q, "NO, no rollback", [ROLLBACK_A])),
        _voice("openai", "codex", answer_for(Q, "NO"), delay_s=3),
    ]
    council.convene(_request("c", 2, budget={"per_voice_timeout_s": 0.3}))
    council.runtimes = [
        _voice("anthropic", "claude", answer_for(Q, "NO, no rollback", [ROLLBACK_A])),
        _voice("openai", "codex", Failure("exit_nonzero", "quota", exit_code=3)),
        _voice("google", "gemini", "I would rather not say."),
        _voice("alibaba", "qwen", answer_for(Q, "NO, cannot be undone", [ROLLBACK_B])),
    ]
    council.convene(_request("d", 3))

    runs = root / "council"
    for run_id, start in STARTS.items():
        path = runs / f"run-{run_id}.json"
        doc = json.loads(path.read_text())
        doc["started_at"] = start
        for voice in doc["voices"]:
            for attempt in voice["attempts"]:
                if attempt["runtime"] == "claude":
                    attempt["latency_ms"] = CLAUDE_MS[run_id]
        # a: W 0.5 then 0.9 (>= 0.85: converged in round 2), winner v1 then v2 (changed).
        # b: W 0.6 then 0.7 (never converged), winner v1 both times. d: one round at 0.95
        # naming no winner (converged in round 1; one round: nothing to compare).
        if run_id == "a":
            _with_rounds(doc, [_rank_round(1, 0.5, "v1"), _rank_round(2, 0.9, "v2")])
        elif run_id == "b":
            _with_rounds(doc, [_rank_round(1, 0.6, "v1"), _rank_round(2, 0.7, "v1")])
        elif run_id == "d":
            _with_rounds(doc, [_rank_round(1, 0.95, None)])
        path.write_text(json.dumps(doc))
    (runs / "notes.json").write_text('{"hello": "not a run"}')
    (runs / "run-broken.json").write_text('{"id": "broken", ')
    for path in runs.iterdir():
        age(path)
    return root
