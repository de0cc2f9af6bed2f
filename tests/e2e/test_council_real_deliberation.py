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


RANK_REQUEST = "answers are shown under letters"
SHOWN = re.compile(
    r"^Answer ([A-Z]+):\n(.*?)(?=\n\nAnswer [A-Z]+:|\n\nRank the answers)", re.S | re.M
)


def ranking_or(answer: object) -> object:
    """Rank what this member was shown: answers that name the missing way back come first."""

    def respond(prompt: str) -> str:
        if RANK_REQUEST not in prompt:
            return answer(prompt)  # type: ignore[operator]
        shown = SHOWN.findall(prompt)
        good = [label for label, text in shown if re.search(r"rollback|revert", text, re.I)]
        rest = [label for label, _ in shown if label not in good]
        levels = ["=".join(good)] if good else []
        levels += ["=".join(rest)] if rest else []
        return f"RANK {'>'.join(levels)} conf=0.8"

    return respond


def test_real_clis_rank_each_others_answers_blind(
    server: ModelServer, env: dict[str, str], workdir: Path, marker: str
) -> None:
    for protocol, reply in (
        (ANTHROPIC, claude_answer),
        (OPENAI_RESPONSES, codex_answer),
        (GEMINI, gemini_answer),
    ):
        server.answers[protocol] = ranking_or(reply)

    ran = run_council(workdir, env, make_question(marker), "rank3", "--deliberate", "rank")
    result = load_result(ran, workdir, "rank3")

    rank = result["deliberation"]["rank"]
    by_runtime = {v["runtime"]: v["id"] for v in result["voices"]}
    label_of = {p["voice_id"]: p["label"] for p in rank["proposals"]}
    # Nobody was shown their own answer.
    for shuffle in rank["shuffles"]:
        assert label_of[shuffle["voice_id"]] not in shuffle["shown"].values()
        assert len(shuffle["shown"]) == 2
    tally = rank["tally"]
    assert tally["valid"] and len(tally["rankers"]) == 3
    # claude and codex both named the missing rollback; gemini wrote about reporting. With
    # three proposals a first place earns 2 x 0.8, a second 1 x 0.8, and a tie for first
    # splits 1.5 x 0.8 each: claude 1.6 + 1.2 = 2.8, codex the same, gemini 0.8 + 0.8 = 1.6.
    scores = {s["label"]: s["score"] for s in tally["scores"]}
    assert scores[label_of[by_runtime["claude"]]] == pytest.approx(2.8)
    assert scores[label_of[by_runtime["codex"]]] == pytest.approx(2.8)
    assert scores[label_of[by_runtime["gemini"]]] == pytest.approx(1.6)
    assert tally["final_order"][-1] == [label_of[by_runtime["gemini"]]]
    # No chairman was configured, so the verdict is the arithmetic's, and says so.
    assert result["deliberation"]["synthesis"]["fallback"] == "arithmetic"
