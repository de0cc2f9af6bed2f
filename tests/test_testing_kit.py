"""The testing kit callers use: scripted voices, answer builders and the pytest fixture."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from rune_council.testing import (
    Failure,
    ScriptedCouncil,
    ScriptedRuntime,
    answer_for,
    claim_on,
)
from tests.helpers import PLAN

ROOT = Path(__file__).resolve().parents[1]
Q = "Is the sharding plan in plan.md safe to execute as written?"


def readme_example() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("### Testing your use of the council", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None
    return match.group(1)


def test_the_readme_example_runs_in_a_fresh_suite_through_the_registered_fixture(
    tmp_path: Path,
) -> None:
    example = readme_example()
    body = [line for line in example.splitlines() if line.startswith("    ")]
    assert len(body) == 3  # the promise: a skill tests its use of the council in three lines
    (tmp_path / "test_skill.py").write_text(example, encoding="utf-8")
    # No conftest: the fixture comes from the pytest11 entry point of the installed package.
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_skill.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 passed" in out.stdout


def request(run_id: str, n: int = 2) -> dict[str, object]:
    return {"id": run_id, "question": Q, "n": n, "artifact": {"name": "plan.md", "text": PLAN}}


def test_claims_on_the_artifact_become_verified_cross_family_consensus(
    scripted_council: ScriptedCouncil,
) -> None:
    rollback = claim_on(PLAN, 6, "No rollback step exists", name="plan.md", severity="MUST")
    assert rollback["evidence"] == [
        {"ref": "plan.md:6", "quote": "5. No rollback step is defined."}
    ]
    scripted_council.add("anthropic", "openai", answer=answer_for(request("k1"), "NO", [rollback]))
    result = scripted_council.convene(request("k1"))
    assert result.decorrelation == "MULTI_FAMILY"
    [consensus] = result.agreement.consensus_claims
    assert consensus.families == ["anthropic", "openai"]
    # Consensus is only ever reached on verified evidence: the quote was found at the line.
    assert consensus.severity == "MUST" and len(consensus.voice_ids) == 2


def test_scripted_failures_and_delays_drop_the_voice_with_the_reason(tmp_path: Path) -> None:
    council = ScriptedCouncil(tmp_path / ".rune")
    council.add("anthropic", answer=answer_for(Q, "NO"))
    council.runtimes.append(
        ScriptedRuntime(Failure("exit_nonzero", "quota exhausted", exit_code=3), family="openai")
    )
    council.runtimes.append(ScriptedRuntime(answer_for(Q, "YES"), family="google", delay_s=5))
    budget = {"per_voice_timeout_s": 0.3}
    result = council.convene({**request("k2", n=3), "budget": budget})
    by_family = {v.model_family: v for v in result.voices}
    assert by_family["anthropic"].status == "complete"
    failed = by_family["openai"]
    assert failed.status == "dropped" and "quota exhausted" in (failed.drop_reason or "")
    assert [(a.outcome, a.exit_code) for a in failed.attempts] == [("exit_nonzero", 3)]
    slow = by_family["google"]
    assert slow.status == "dropped" and [a.outcome for a in slow.attempts] == ["timeout"]
    assert result.decorrelation == "NO_DECORRELATION"


def test_a_script_replies_step_by_step_and_records_its_prompts() -> None:
    import asyncio

    voice = ScriptedRuntime("first", lambda p: p.upper(), Failure(), family="qwen")
    assert (voice.model_family, voice.family_confidence, voice.source) == (
        "qwen",
        "confirmed",
        "external-cli",
    )

    async def three_calls() -> list[tuple[str, str | None]]:
        out = []
        for prompt in ("a", "b", "c", "d"):
            reply = await voice.ask(prompt, timeout_s=1, max_output_bytes=100)
            out.append((reply.outcome, reply.text))
        return out

    assert asyncio.run(three_calls()) == [
        ("ok", "first"),
        ("ok", "B"),
        ("error_reported", None),
        ("error_reported", None),  # the last step repeats
    ]
    assert voice.prompts == ["a", "b", "c", "d"]
    assert ScriptedRuntime("x").family_confidence == "unknown"
    assert ScriptedRuntime("x", family="meta", confirmed=False).family_confidence == "unknown"


def test_builders_refuse_what_would_not_be_a_real_answer() -> None:
    with pytest.raises(ValueError, match="outside the artifact"):
        claim_on(PLAN, 99, "Nothing here")
    with pytest.raises(ValueError, match="at least one step"):
        ScriptedRuntime()
