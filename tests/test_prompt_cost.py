"""The run file says how much the council sent: every prompt, by stage and runtime."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import jsonschema

from rune_council import CouncilOptions, convene
from rune_council.testing import ScriptedRuntime, answer_for
from tests.helpers import PLAN, QUESTION, council_result_schema

Q = QUESTION


def member(family: str) -> ScriptedRuntime:
    def reply(prompt: str) -> str:
        if "\nRANK " in prompt and "Answer " in prompt:
            letters = sorted(set(re.findall(r"^Answer ([A-Z]):", prompt, re.M)))
            return "RANK " + ">".join(letters) + " conf=0.7"
        return answer_for(Q, "NO")

    return ScriptedRuntime(reply, family=family, name=f"m-{family}")


def test_every_prompt_is_counted_by_stage_and_runtime(tmp_path: Path) -> None:
    voices = [member(f) for f in ("anthropic", "openai", "google")]
    result = convene(
        {
            "id": "cost1",
            "question": Q,
            "n": 3,
            "artifact": {"name": "plan.md", "text": PLAN},
            "deliberation": {"method": "rank"},
        },
        CouncilOptions(runtimes=voices, rune_dir=tmp_path / ".rune"),
    )
    cost = result.prompt_cost
    assert cost is not None
    uses = {(u.stage, u.runtime): u for u in cost.by_use}
    for voice in voices:
        # What each voice was actually handed, measured on its side of the call.
        sizes = [len(p.encode("utf-8")) for p in voice.prompts]
        assert len(sizes) >= 2, "each member answers, then ranks"
        answer = uses[("answer", voice.name)]
        assert (answer.prompts, answer.bytes) == (1, sizes[0])
        # The artifact goes to every voice once, with the question.
        assert answer.bytes > len(PLAN.encode("utf-8"))
        later = uses[("deliberation", voice.name)]
        assert (later.prompts, later.bytes) == (len(sizes) - 1, sum(sizes[1:]))
        assert later.tokens_est == math.ceil(later.bytes / 4)
    assert cost.bytes == sum(u.bytes for u in cost.by_use)
    assert cost.tokens_est == math.ceil(cost.bytes / 4)

    on_disk = json.loads(Path(result.run_file or "").read_text())
    jsonschema.validate(on_disk, council_result_schema())
    assert on_disk["prompt_cost"]["bytes"] == cost.bytes


def test_a_failed_voice_and_its_replacement_are_both_counted(tmp_path: Path) -> None:
    from rune_council.testing import Failure

    broken = ScriptedRuntime(Failure("exit_nonzero", "boom"), family="anthropic", name="broken")
    spare = ScriptedRuntime(answer_for(Q, "NO"), family="mistral", name="spare")
    steady = ScriptedRuntime(answer_for(Q, "NO"), family="openai", name="steady")
    result = convene(
        {"id": "cost2", "question": Q, "n": 2},
        CouncilOptions(runtimes=[broken, steady, spare], rune_dir=tmp_path / ".rune"),
    )
    cost = result.prompt_cost
    assert cost is not None
    asked = {u.runtime: u.prompts for u in cost.by_use if u.stage == "answer"}
    assert asked == {"broken": 1, "steady": 1, "spare": 1}
