"""Consent for endpoints, as a user meets it at a terminal: a council that would send the
question only to HTTP endpoints asks first, like one that would send it to CLIs, and a no
sends nothing at all (the loopback server sees no request, not even the model listing)."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import answer, bare_machine_env, claim
from tests.http_server import OpenAIServer, answering

Q = "Should we shard the orders table?"
LLAMA = "meta/llama-3.1-70b-instruct"
QWEN = "qwen/qwen2.5-72b-instruct"


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    srv = OpenAIServer(
        models=[LLAMA, QWEN],
        behaviours={
            LLAMA: answering(answer(Q, "NO", [claim("No rollback step is defined")])),
            QWEN: answering(answer(Q, "NO", [claim("The reporting jobs go stale")])),
        },
    )
    with srv:
        yield srv


def env_of(tmp: Path) -> dict[str, str]:
    # No AI CLI on PATH and nothing standing for consent: the endpoint is all there is.
    return bare_machine_env(tmp)


def on_a_terminal(tmp: Path, args: list[str], reply: bytes | None) -> tuple[int, str]:
    """``rune council ARGS`` with stdin and stderr on a pseudo-terminal; ``reply`` answers
    the consent question when it is asked."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "rune_council.cli", "council", *args],
        cwd=tmp,
        env=env_of(tmp),
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=slave,
    )
    os.close(slave)
    seen = b""
    answered = False
    deadline = time.monotonic() + 90
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # the child closed its side
                    break
                if not chunk:
                    break
                seen += chunk
            if reply is not None and not answered and b"[y/N]" in seen:
                os.write(master, reply + b"\n")
                answered = True
            if proc.poll() is not None and not ready:
                break
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        assert proc.stdout is not None
        proc.stdout.read()
        proc.stdout.close()
        os.close(master)
    return proc.returncode, seen.decode("utf-8", "replace")


def test_an_endpoint_council_asks_and_a_no_sends_nothing(
    tmp_path: Path, server: OpenAIServer
) -> None:
    args = [Q, "--endpoint", server.base_url, "--n", "2", "--id", "no"]
    code, screen = on_a_terminal(tmp_path, args, b"n")
    assert "[y/N]" in screen, screen
    # The question names where the prompt would go.
    assert f"({server.base_url})" in screen, screen
    assert server.requests() == []  # not a chat call, not even GET /v1/models
    assert code == 1, screen
    doc = json.loads((tmp_path / ".rune" / "council" / "run-no.json").read_text())
    assert doc["status"] == "no_verdict"
    assert any("but not used: consent" in note for note in doc["notes"]), doc["notes"]
    assert not (tmp_path / ".rune" / "consent.json").exists()


def test_an_endpoint_council_asks_and_a_yes_sends_and_is_remembered(
    tmp_path: Path, server: OpenAIServer
) -> None:
    args = [Q, "--endpoint", server.base_url, "--n", "2", "--id", "yes"]
    code, screen = on_a_terminal(tmp_path, args, b"y")
    assert "[y/N]" in screen, screen
    assert code == 0, screen
    assert sorted(m for m in server.chat_models() if m) == [LLAMA, QWEN]
    assert json.loads((tmp_path / ".rune" / "consent.json").read_text())["allow_external"]


def test_a_batch_on_endpoints_asks_once_and_a_no_sends_nothing(
    tmp_path: Path, server: OpenAIServer
) -> None:
    items = tmp_path / "items.jsonl"
    items.write_text(
        "".join(json.dumps({"id": f"b{i}", "question": Q, "n": 2}) + "\n" for i in (1, 2))
    )
    args = ["batch", str(items), "--endpoint", server.base_url]
    code, screen = on_a_terminal(tmp_path, args, b"n")
    assert screen.count("[y/N]") == 1, screen
    assert f"({server.base_url})" in screen, screen
    assert server.requests() == []
    assert code == 1, screen
