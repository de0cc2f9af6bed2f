"""Bounds every council of a batch shares: per-runtime caps and the endpoints' 429 backoff."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rune_council.batch import Batch, read_rows
from rune_council.config import load_config
from rune_council.core.errors import RuntimeConfigError
from rune_council.core.runtime import RuntimeReply
from rune_council.runtimes.http import EndpointClient
from rune_council.runtimes.limits import Backoff, Limits
from rune_council.runtimes.user_defined import load_user_runtimes
from rune_council.testing import AnswerEcho, ScriptedRuntime, answer_for
from tests.fakes.bin import install_fake, path_with
from tests.http_server import Behaviour, OpenAIServer
from tests.test_batch import PLAN, RISK, options, questions, write_items

# --------------------------------------------------------------------------- caps


class Counting(ScriptedRuntime):
    """Counts its own calls in flight, independently of the limiter under test."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.now = 0
        self.peak = 0

    async def ask(self, prompt: str, **kw: Any) -> RuntimeReply:
        self.now += 1
        self.peak = max(self.peak, self.now)
        try:
            return await super().ask(prompt, **kw)
        finally:
            self.now -= 1


def test_a_capped_runtime_never_has_more_calls_in_flight_across_councils(tmp_path: Path) -> None:
    capped, free, other = (
        Counting(AnswerEcho("NO", (RISK,)), family=f, name=f"{f}-cli", delay_s=0.1)
        for f in ("anthropic", "openai", "google")
    )
    items = write_items(tmp_path / "items.jsonl", questions(6))
    base = options(tmp_path, [capped, free, other], concurrency=6)
    batch = Batch(items, dataclasses.replace(base, limits=Limits({"anthropic-cli": 2})))
    asyncio.run(batch.run())
    assert batch.tally.all_complete
    assert capped.peak == 2  # held to its cap, and the cap was reached
    assert free.peak > 2  # the others were not held back


def test_council_toml_bounds_a_runtime_without_defining_one(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "council.toml").write_text(
        '[runtimes.claude]\nmax_concurrent = 2\n\n[runtimes.mine]\ncommand = "mine --ask"\n'
        "max_concurrent = 1\n"
    )
    config = load_config(tmp_path / ".rune", {"RUNE_COUNCIL_CONFIG_DIR": str(conf)})
    assert config.runtimes["claude"].max_concurrent == 2
    assert [a.name for a in load_user_runtimes(config)] == ["mine"]
    for bad, why in (
        ("max_concurrent = 0", "greater than or equal to 1"),
        ('max_concurrent = "4"', "valid integer"),
        ('family = "anthropic"', "without a command"),
    ):
        (conf / "council.toml").write_text(f"[runtimes.claude]\n{bad}\n")
        with pytest.raises(RuntimeConfigError, match=why):
            load_user_runtimes(
                load_config(tmp_path / ".rune", {"RUNE_COUNCIL_CONFIG_DIR": str(conf)})
            )


def spans_overlap(log: Path) -> dict[str, int]:
    """The most processes of each fake CLI that were alive at one moment."""
    events: dict[str, list[tuple[float, int]]] = {}
    for line in log.read_text().splitlines():
        name, what, at = line.split()
        events.setdefault(name, []).append((float(at), 1 if what == "start" else -1))
    peaks = {}
    for name, marks in events.items():
        now = peak = 0
        for _, step in sorted(marks, key=lambda m: (m[0], m[1])):
            now += step
            peak = max(peak, now)
        peaks[name] = peak
    return peaks


def run_cli_batch(tmp: Path, *args: str, config: str | None = None) -> dict[str, int]:
    log = tmp / "spans"
    for name in ("claude", "codex", "gemini"):
        install_fake(
            tmp / "bin",
            name,
            answer=answer_for("__QUESTION__", "NO", [RISK]),
            mode="answer_question",
            sleep_s=0.4,
            span_log=log,
            span_name=name,
        )
    (tmp / "plan.md").write_text(PLAN)
    items = tmp / "items.jsonl"
    items.write_text(
        "\n".join(
            json.dumps({"id": f"x{i}", "question": f"Is {i} safe?", "artifact": "plan.md"})
            for i in range(8)
        )
    )
    if config is not None:
        (tmp / "conf").mkdir(exist_ok=True)
        (tmp / "conf" / "council.toml").write_text(config)
    env = {
        "PATH": path_with(tmp / "bin"),
        "HOME": str(tmp),
        "RUNE_COUNCIL_CONFIG_DIR": str(tmp / "conf"),
        "RUNE_COUNCIL_ALLOW_EXTERNAL": "1",
    }
    out = subprocess.run(
        [sys.executable, "-m", "rune_council.cli", "council", "batch", str(items), *args],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 0, out.stderr
    rows = read_rows(tmp / ".rune" / "batch" / "items.results.jsonl")
    assert {r.status for r in rows} == {"complete"}
    return spans_overlap(log)


def test_cli_batch_holds_each_cli_to_its_default_and_configured_caps(tmp_path: Path) -> None:
    peaks = run_cli_batch(tmp_path / "a", "-c", "8")
    assert peaks["claude"] == 4 and peaks["codex"] == 4  # the default per AI CLI
    peaks = run_cli_batch(
        tmp_path / "b", "-c", "8", config="[runtimes.claude]\nmax_concurrent = 1\n"
    )
    assert peaks["claude"] == 1 and peaks["codex"] > 1
    peaks = run_cli_batch(tmp_path / "c", "-c", "8", "--max-concurrent", "codex=2")
    assert peaks["codex"] == 2 and peaks["claude"] > 2


# --------------------------------------------------------------------------- 429


GOOD = answer_for("Is it safe?", "NO", [])


@pytest.fixture
def server() -> Any:
    srv = OpenAIServer(models=["m1"])
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def chat(client: EndpointClient, timeout_s: float = 10.0) -> Any:
    return client.chat("m1", "Is it safe?", timeout_s=timeout_s, max_output_bytes=100_000)


def test_retry_after_is_honoured_and_the_same_model_asked_again(server: OpenAIServer) -> None:
    server.behaviours["m1"] = Behaviour("rate_limited", GOOD, retry_after="1", times=1)

    async def go() -> Any:
        client = EndpointClient("lab", server.base_url)
        try:
            return await chat(client)
        finally:
            await client.aclose()

    started = time.monotonic()
    result = asyncio.run(go())
    assert result.outcome == "ok" and time.monotonic() - started >= 1.0
    hits = [s for s in server.seen if s.method == "POST"]
    assert len(hits) == 2 and hits[1].at - hits[0].at >= 0.95


def test_a_429_pauses_every_council_sharing_the_backoff(server: OpenAIServer) -> None:
    server.behaviours["m1"] = Behaviour("rate_limited", GOOD, retry_after="1", times=1)
    shared = Backoff()

    async def go() -> list[Any]:
        first = EndpointClient("lab", server.base_url, backoff=shared)
        second = EndpointClient("lab", server.base_url, backoff=shared)
        try:
            a = asyncio.ensure_future(chat(first))
            await asyncio.sleep(0.3)  # the first has met the 429 by now
            b = asyncio.ensure_future(chat(second))
            return list(await asyncio.gather(a, b))
        finally:
            await first.aclose()
            await second.aclose()

    results = asyncio.run(go())
    assert [r.outcome for r in results] == ["ok", "ok"]
    hits = [s for s in server.seen if s.method == "POST"]
    # One refusal only: the second council waited out the pause instead of being refused.
    assert len(hits) == 3
    assert all(h.at - hits[0].at >= 0.95 for h in hits[1:])


def test_a_429_without_retry_after_fails_over_and_pauses_that_model(
    server: OpenAIServer,
) -> None:
    server.behaviours["m1"] = Behaviour("rate_limited", GOOD, times=5)

    async def go() -> list[Any]:
        client = EndpointClient("lab", server.base_url)
        try:
            first = await chat(client)
            second = await chat(client, timeout_s=0.5)  # the pause outlasts this deadline
            return [first, second]
        finally:
            await client.aclose()

    started = time.monotonic()
    first, second = asyncio.run(go())
    assert first.http_status == 429 and second.http_status == 429
    assert "past this call's deadline" in second.detail
    assert time.monotonic() - started < 1.0  # no wait: the slot may fail over at once
    assert len([s for s in server.seen if s.method == "POST"]) == 1


def test_limits_refuse_a_cap_below_one() -> None:
    with pytest.raises(ValueError, match=">= 1"):
        Limits({"claude": 0})
