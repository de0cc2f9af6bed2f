"""``--timeout`` is a slot's whole budget, however many models it fails over to; a user's
answer regex cannot stall the council."""

from __future__ import annotations

import asyncio
import time

from rune_council.core.contract import PerspectiveRequest
from rune_council.core.prompts import compose_prompt
from rune_council.runtimes.http import CandidatePool, EndpointClient, HttpRuntime, ModelChoice
from tests.helpers import answer, claim
from tests.http_server import Behaviour, OpenAIServer, answering

Q = "Should we shard the orders table?"
GOOD = answer(Q, "NO, not yet", [claim("There is no rollback step")])
PROMPT = compose_prompt(PerspectiveRequest(id="t", question=Q), "standard", None, None)
SLOW = ["lab/slow-a", "lab/slow-b", "lab/slow-c"]


def test_three_slow_models_share_one_timeout() -> None:
    behaviours = {m: Behaviour("slow", GOOD, delay_s=3) for m in SLOW}
    with OpenAIServer(models=SLOW, behaviours=behaviours) as server:
        choices = [ModelChoice(m, "meta", "confirmed") for m in SLOW]
        pool = CandidatePool(choices)
        runtime = HttpRuntime(EndpointClient("lab", server.base_url), choices[0], pool)

        async def go() -> tuple[float, object]:
            started = time.monotonic()
            try:
                reply = await runtime.ask(PROMPT, timeout_s=1.0, max_output_bytes=1_000_000)
            finally:
                await runtime.client.aclose()
            return time.monotonic() - started, reply

        elapsed, reply = asyncio.run(go())
    # Before, each attempt had the full second: three models took three seconds.
    assert elapsed < 1.6, elapsed
    assert reply.outcome == "timeout"  # type: ignore[attr-defined]
    assert [a.model for a in reply.attempts] == [SLOW[0]]  # type: ignore[attr-defined]


def test_a_fast_failure_still_leaves_the_rest_of_the_budget_to_the_next_model() -> None:
    behaviours = {SLOW[0]: Behaviour("status", status=503), SLOW[1]: answering(GOOD)}
    with OpenAIServer(models=SLOW[:2], behaviours=behaviours) as server:
        choices = [ModelChoice(m, "meta", "confirmed") for m in SLOW[:2]]
        runtime = HttpRuntime(
            EndpointClient("lab", server.base_url), choices[0], CandidatePool(choices)
        )

        async def go() -> object:
            try:
                return await runtime.ask(PROMPT, timeout_s=5.0, max_output_bytes=1_000_000)
            finally:
                await runtime.client.aclose()

        reply = asyncio.run(go())
    assert reply.outcome == "ok"  # type: ignore[attr-defined]
    assert [a.outcome for a in reply.attempts] == ["http_status", "ok"]  # type: ignore[attr-defined]


def test_a_catastrophic_answer_regex_gives_up_instead_of_stalling_the_council() -> None:
    from rune_council.runtimes.user_defined import RuntimeSpec, _parser

    spec = RuntimeSpec(command="mycli", output="regex", answer_regex=r"(a|aa)+$")
    parse = _parser("mycli", spec)
    started = time.monotonic()
    parsed = parse("a" * 80 + "b", "")
    elapsed = time.monotonic() - started
    # Python's re needs longer than the age of the universe on this input; the bound is
    # 0.25 s of processor time, a few seconds of wall time on a loaded machine at most.
    assert elapsed < 15, elapsed
    assert parsed.text is None and parsed.error is not None
    assert "gave up" in parsed.error
    # An ordinary pattern still reads the answer.
    good = _parser(
        "mycli", RuntimeSpec(command="mycli", output="regex", answer_regex=r"(?s)ANSWER:(.*)")
    )
    assert good("noise\nANSWER: the answer\n", "").text == "the answer"
