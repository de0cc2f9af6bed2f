"""What the host-flow tests share: a user answering ``rune council consent`` on a real
terminal, and a stand-in subagent answering a council prompt the MCP server handed out."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers import ROLLBACK, answer

_QUESTION = re.compile(
    r"^Question:\n(?P<question>.*?)\n\nEvidence rules:", re.DOTALL | re.MULTILINE
)


_LABELS = re.compile(r"^Answer (?P<label>[A-Z]):$", re.MULTILINE)


def subagent_reply(prompt: str, claims: list[dict[str, object]] | None = None) -> str:
    """What a subagent given ``prompt`` and nothing else writes. To a voice prompt: the
    question it read, a stance, and (by default) the plan's missing rollback as its one
    claim; to a ballot (a later stage ranking the others' answers): one RANK line."""
    labels = _LABELS.findall(prompt)
    if "Reply with one RANK line" in prompt and labels:
        return f"RANK {'>'.join(labels)} conf=0.8"
    found = _QUESTION.search(prompt)
    assert found is not None, prompt[:500]
    return answer(found["question"].strip(), "NO", [ROLLBACK] if claims is None else claims)


def consent_on_a_terminal(
    cwd: Path, env: dict[str, str], reply: str, *args: str, timeout: float = 60
) -> tuple[int, str]:
    """Run ``rune council consent`` on a pseudo-terminal and type ``reply`` at its question,
    as the user does in their own terminal. (exit code, everything it printed)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "rune_council.cli", "council", "consent", *args],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        cwd=cwd,
        env=env,
        close_fds=True,
    )
    os.close(follower)
    seen = b""
    typed = False
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(leader, 4096)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                seen += chunk
            if not typed and b"[y/N]" in seen:
                os.write(leader, reply.encode() + b"\r")
                typed = True
            if proc.poll() is not None and not ready:
                break
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(leader)
    return code, seen.decode("utf-8", "replace")
