"""A vote council over the real claude, codex and gemini CLIs.

The first pass asks each CLI for a voice answer; the vote stage then asks each of them again
for a ballot in the typed-move format. The loopback server answers by reading the prompt it
was sent, the way a model would, so what is tested is the whole round trip: ballot prompt on
stdin, ballot text back out of each CLI's own output format, and the absence-aware count.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.e2e.model_server import ANTHROPIC, GEMINI, OPENAI_RESPONSES, ModelServer
from tests.e2e.test_council_real import (  # the fixtures are shared with the first suite
    claude_answer,
    codex_answer,
    env,
    gemini_answer,
    load_result,
    make_question,
    marker,
    run_council,
    server,
    workdir,
)

pytestmark = pytest.mark.e2e
__all__ = ["env", "marker", "server", "workdir"]  # pytest finds the fixtures through these

BALLOT_REQUEST = "now every member votes on every item"
ITEM = re.compile(r"^(\d+)\. ", re.MULTILINE)


def ballot_or(answer: object, reject_first: bool = False) -> object:
    """Answer a ballot request with VOTE moves, anything else with the voice answer."""

    def respond(prompt: str) -> str:
        if BALLOT_REQUEST not in prompt:
            return answer(prompt)  # type: ignore[operator]
        numbers = ITEM.findall(prompt.split("Items:", 1)[1])
        lines = [
            f'VOTE -> {n} no "not convinced"' if reject_first and i == 0 else f"VOTE -> {n} yes"
            for i, n in enumerate(numbers)
        ]
        return "\n".join(lines)

    return respond


def test_real_clis_vote_on_consolidated_items(
    server: ModelServer, env: dict[str, str], workdir: Path, marker: str
) -> None:
    server.answers[ANTHROPIC] = ballot_or(claude_answer)
    server.answers[OPENAI_RESPONSES] = ballot_or(codex_answer)
    server.answers[GEMINI] = ballot_or(gemini_answer, reject_first=True)

    ran = run_council(workdir, env, make_question(marker), "vote3", "--deliberate", "vote")
    result = load_result(ran, workdir, "vote3")

    deliberation = result["deliberation"]
    assert deliberation["method"] == "vote"
    assert deliberation["consolidation"]["fallback"] == "deterministic"
    vote = deliberation["vote"]
    # Every CLI answered and sent a usable ballot, so all three count.
    assert vote["denominator"] == 3 and sorted(vote["counted"]) == ["v1", "v2", "v3"]
    assert vote["absent"] == []
    gemini = next(v["id"] for v in result["voices"] if v["runtime"] == "gemini")
    first, *rest = vote["items"]
    assert first["no"] == [gemini] and len(first["yes"]) == 2
    assert all(item["required"] == 2 for item in vote["items"])  # ceil(2/3 x 3)
    assert first["outcome"] == "passed"
    assert all(len(item["yes"]) == 3 and item["outcome"] == "passed" for item in rest)
    # One answer and one ballot went through each CLI's own wire protocol.
    for protocol in (ANTHROPIC, OPENAI_RESPONSES, GEMINI):
        prompts = [r.prompt for r in server.requests.for_protocol(protocol)]
        assert len(prompts) == 2, (protocol, prompts)
        assert BALLOT_REQUEST in prompts[1]
    assert result["verdict"]["member_count"] == 3


def test_a_real_cli_failing_its_ballot_leaves_the_denominator(
    server: ModelServer, env: dict[str, str], workdir: Path, marker: str
) -> None:
    server.answers[ANTHROPIC] = ballot_or(claude_answer)
    server.answers[GEMINI] = ballot_or(gemini_answer)

    def codex_then_garbage(prompt: str) -> str:
        return "I'd rather not vote." if BALLOT_REQUEST in prompt else codex_answer(prompt)

    server.answers[OPENAI_RESPONSES] = codex_then_garbage
    ran = run_council(workdir, env, make_question(marker), "vote-absent", "--deliberate", "vote")
    result = load_result(ran, workdir, "vote-absent")

    vote = result["deliberation"]["vote"]
    codex = next(v["id"] for v in result["voices"] if v["runtime"] == "codex")
    assert vote["denominator"] == 2 and codex not in vote["counted"]
    [absent] = vote["absent"]
    assert absent["voice_id"] == codex and absent["stage"] == "ballot"
    assert all(item["required"] == 2 for item in vote["items"])  # ceil(2/3 x 2)
