"""Summoned members: a member added in a later round sits in every round after it, is
recorded with the round it joined, and counts in the vote threshold only from then; verify
re-derives such a run and notices a member moved into a round before it joined."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema

from rune_council import CouncilOptions, convene
from rune_council.core.contract import CouncilResult
from rune_council.runs import load
from rune_council.testing import ScriptedRuntime
from rune_council.verify import verify
from tests.helpers import PLAN, QUESTION, ROLLBACK, SHARDS, UNDO, answer, council_result_schema

SCHEMA = council_result_schema()


def voter(
    stance: str,
    claims: list[dict[str, Any]],
    likes: str,
    *,
    flip_from: int | None = None,
    seen: list[str] | None = None,
) -> Callable[[str], str]:
    """Answers the question; on a ballot, approves the items that mention ``likes`` (from
    its ``flip_from``-th ballot on, the opposite: a member changing its mind)."""
    ballots: list[str] = []

    def fn(prompt: str) -> str:
        if seen is not None:
            seen.append(prompt)
        if "Items:" in prompt and "VOTE -> " in prompt:
            ballots.append(prompt)
            flip = flip_from is not None and len(ballots) >= flip_from
            items = re.findall(r"^(\d+)\. (.*)$", prompt.split("Items:")[1], re.M)
            return "\n".join(
                f"VOTE -> {n} {'yes' if (likes in text.lower()) != flip else 'no'}"
                for n, text in items
            )
        return answer(QUESTION, stance, claims)

    return fn


def council(*, codex_flips: bool = False, seen: list[str] | None = None) -> list[ScriptedRuntime]:
    """Three seated families and an idle fourth (mistral) that only a summons brings in."""
    return [
        ScriptedRuntime(
            voter("NO, no way back", [ROLLBACK], "rollback"), family="anthropic", name="claude"
        ),
        ScriptedRuntime(
            voter("NO", [UNDO], "rollback", flip_from=2 if codex_flips else None),
            family="openai",
            name="codex",
        ),
        ScriptedRuntime(voter("YES, with care", [SHARDS], "undo"), family="google", name="gemini"),
        ScriptedRuntime(
            voter("NO, as the others", [ROLLBACK], "rollback", seen=seen),
            family="mistral",
            name="mistral",
        ),
    ]


def request(run_id: str, **deliberation: Any) -> dict[str, Any]:
    return {
        "id": run_id,
        "question": QUESTION,
        "n": 3,
        "artifact": {"name": "plan.md", "text": PLAN},
        "deliberation": {
            "method": "vote",
            "rounds": {"max_rounds": 3, "convergence_threshold": 1.0, "on_divergence": "warn"},
            **deliberation,
        },
    }


def on_disk(rune: Path, run_id: str) -> dict[str, Any]:
    path = rune / "council" / f"run-{run_id}.json"
    data = json.loads(path.read_text())
    jsonschema.validate(data, SCHEMA)
    # As it lies on disk, its artifact read back from the sidecar (contract 2.8).
    outcome = verify(load(path))
    assert outcome.reproduced, outcome.differences
    assert "voices[*].joined_round against the round records" in outcome.checked
    return data


def test_a_summoned_member_sits_from_its_round_on_and_counts_only_from_then(
    tmp_path: Path,
) -> None:
    seen: list[str] = []
    result = convene(
        request("s1", summon=[{"who": "mistral", "round": 2}]),
        CouncilOptions(runtimes=council(seen=seen), rune_dir=tmp_path),
    )
    d = result.deliberation
    assert d is not None and len(d.rounds) == 3
    v4 = result.voices[3]
    assert (v4.id, v4.runtime, v4.model_family, v4.joined_round) == ("v4", "mistral", "mistral", 2)
    assert [[v.voice_id for v in r.voices] for r in d.rounds] == [
        ["v1", "v2", "v3"],
        ["v1", "v2", "v3", "v4"],
        ["v1", "v2", "v3", "v4"],
    ]
    # Threshold 2/3: ceil(2/3 x 3) = 2 yes votes before it joined, ceil(2/3 x 4) = 3 after.
    votes = [r.vote for r in d.rounds]
    assert all(v is not None for v in votes)
    assert [(v.denominator, v.items[0].required) for v in votes if v] == [(3, 2), (4, 3), (4, 3)]
    assert ["v4" in v.counted for v in votes if v] == [False, True, True]
    # It answered first in round 2, with the draft verdict like every other member.
    assert seen and "Draft verdict from the previous round" in seen[0]
    assert any("summoned v4 (mistral, mistral)" in n for n in d.notes)
    assert result.verdict is not None and result.verdict.member_count == 4
    on_disk(tmp_path, "s1")


def test_verify_notices_a_summoned_member_moved_into_a_round_before_it_joined(
    tmp_path: Path,
) -> None:
    result = convene(
        request("s2", summon=[{"who": "mistral"}]),
        CouncilOptions(runtimes=council(), rune_dir=tmp_path),
    )
    data = result.model_dump(mode="json")
    data["voices"][3]["joined_round"] = 3  # claims it sat out round 2, where it voted
    outcome = verify(CouncilResult.model_validate(data))
    assert not outcome.reproduced
    assert any(
        d.field == "deliberation.rounds[1]" and d.recomputed == "v4 joined in round 3"
        for d in outcome.differences
    )


TEMPLATE = """
[templates.split-review]
description = "Vote, and call a specialist in when the council drifts apart"
method = "vote"
rounds = 3
convergence_threshold = 1.0
on_divergence = "warn"

[[templates.split-review.summon]]
on = "divergence"
persona = "a specialist called in to settle a split"
framing = "Find the point the split turns on."
"""


def test_a_template_summons_a_specialist_when_the_council_diverges(tmp_path: Path) -> None:
    user = tmp_path / "user-config"
    user.mkdir()
    (user / "council.toml").write_text(TEMPLATE)
    seen: list[str] = []
    env = {"PATH": os.defpath, "HOME": str(tmp_path), "RUNE_COUNCIL_CONFIG_DIR": str(user)}
    result = convene(
        {"id": "s3", "question": QUESTION, "n": 3, "artifact": {"name": "plan.md", "text": PLAN}},
        CouncilOptions(
            runtimes=council(codex_flips=True, seen=seen),
            rune_dir=tmp_path / "rune",
            env=env,
            template="split-review",
        ),
    )
    d = result.deliberation
    assert d is not None
    # codex turned in round 2, so consensus fell; the specialist joins round 3, not before.
    assert [r.diverged for r in d.rounds] == [False, True, False]
    assert [len(r.voices) for r in d.rounds] == [3, 3, 4]
    specialist = result.voices[3]
    assert specialist.joined_round == 3 and specialist.runtime == "mistral"  # the family missing
    assert specialist.persona == "a specialist called in to settle a split"
    assert "Your persona: a specialist called in to settle a split" in seen[0]
    assert "Your focus: Find the point the split turns on." in seen[0]
    on_disk(tmp_path / "rune", "s3")


def test_a_summons_nobody_can_answer_is_noted_and_the_council_goes_on(tmp_path: Path) -> None:
    result = convene(
        request("s4", summon=[{"who": "cohere", "round": 2}]),
        CouncilOptions(runtimes=council(), rune_dir=tmp_path),
    )
    d = result.deliberation
    assert d is not None and result.status == "complete" and len(result.voices) == 3
    assert any("could not summon 'cohere'" in n for n in d.notes)


def test_the_cli_checks_a_summons_before_anything_runs(tmp_path: Path) -> None:
    env = {**os.environ, "RUNE_COUNCIL_CONFIG_DIR": str(tmp_path / "cfg"), "HOME": str(tmp_path)}

    def rune(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "rune_council.cli", "council", QUESTION, *args],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
            env=env,
        )

    no_rounds = rune("--summon", "mistral", "--id", "c1")
    assert no_rounds.returncode == 2 and "rounds.max_rounds is 1" in no_rounds.stderr
    bad = rune("--summon", "mistral@soon", "--rounds", "2", "--id", "c2")
    assert bad.returncode == 2 and "must be a number" in bad.stderr
    assert not (tmp_path / ".rune" / "council").exists() or not list(
        (tmp_path / ".rune" / "council").glob("run-c*")
    )
