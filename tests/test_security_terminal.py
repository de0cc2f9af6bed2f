"""What voices write reaches a real terminal as text: ``rune council`` with its live view,
``show``, ``watch`` and ``list``, each run on a pseudo-terminal.

Before, ``[/bold]`` in a question or an error tail raised rich's MarkupError inside the live
view (exit 70, run ``failed``), and OSC 0 / OSC 52 / CSI 2J from a voice went straight to
the terminal. The run file still keeps the raw text.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fakes.bin import install_fake, path_with
from tests.helpers import PLAN, answer, claim

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs a pty"),
]

TITLE = "\x1b]0;owned\x07"
CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"
CLEAR = "\x1b[2J"
Q = "Should we shard the [/bold] orders table at [/usr/bin/x]?"
HOSTILE = f"{TITLE}{CLIPBOARD}{CLEAR}[/bold] [/usr/bin/x] [red]loud[/red]"
QUOTE = "No rollback step is defined."
FORBIDDEN = (b"\x1b]0;", b"\x1b]52;", b"\x1b[2J")


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def on_pty(tmp: Path, env: dict[str, str], *args: str) -> tuple[int, bytes]:
    """Run ``rune council ARGS`` with stdout and stderr on a terminal; (exit, all output)."""
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "rune_council.cli", "council", *args],
        cwd=tmp,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=secondary,
        stderr=secondary,
    )
    os.close(secondary)
    output = bytearray()
    end = time.monotonic() + 90
    while time.monotonic() < end:
        ready, _, _ = select.select([primary], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # the terminal closed: every writer is gone
                break
            if not chunk:
                break
            output += chunk
        elif proc.poll() is not None:
            break
    os.close(primary)
    return proc.wait(30), bytes(output)


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    bin_dir = tmp_path / "bin"
    hostile_claim = claim(
        f"Shards need a rollback {HOSTILE}", ref="plan.md:6", quote="No rollback step is defined."
    )
    install_fake(bin_dir, "claude", answer=answer(Q, f"NO {HOSTILE}", [hostile_claim]))
    install_fake(bin_dir, "codex", answer=f"fatal: {HOSTILE}", format="text", exit_code=1)
    install_fake(
        bin_dir,
        "gemini",
        answer=answer(
            Q, "NO", [claim("No rollback", ref="plan.md:6", quote="No rollback step is defined.")]
        ),
    )
    (tmp_path / "plan.md").write_text(PLAN)
    env = {
        "PATH": path_with(bin_dir),
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "TERM": "xterm-256color",
        "COLUMNS": "200",
        "RUNE_COUNCIL_LOGIN_SHELL": "0",
        "RUNE_COUNCIL_ALLOW_EXTERNAL": "1",
    }
    if "PYTHONPATH" in os.environ:  # a checkout run without installing it
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return tmp_path, env


def test_the_live_view_and_every_reader_show_hostile_text_as_text(
    world: tuple[Path, dict[str, str]],
) -> None:
    tmp, env = world
    code, shown = on_pty(tmp, env, Q, "--artifact", "plan.md", "--id", "hostile")
    assert code == 0, shown.decode(errors="replace")[-2000:]
    # The live table really ran (rich redraws with cursor movement) and showed the text.
    assert b"\x1b[" in shown
    assert b"[/bold]" in shown and b"[/usr/bin/x]" in shown
    assert b"MarkupError" not in shown and b"Traceback" not in shown
    for seq in FORBIDDEN:
        assert seq not in shown, seq
    run = json.loads((tmp / ".rune" / "council" / "run-hostile.json").read_text())
    assert run["status"] == "complete"
    assert any(HOSTILE in text for text in _strings(run))  # the run file keeps the raw text

    for args in (["show", "hostile"], ["watch", "hostile"], ["list"], ["detect"]):
        code, shown = on_pty(tmp, env, *args)
        assert code in (0, 1), (args, shown.decode(errors="replace")[-2000:])
        for seq in FORBIDDEN:
            assert seq not in shown, (args, seq)
    code, shown = on_pty(tmp, env, "show", "hostile")
    assert b"[/bold]" in shown and b"fatal:" in shown


def test_hostile_model_ids_and_http_error_bodies_on_the_live_view(
    world: tuple[Path, dict[str, str]],
) -> None:
    from tests.http_server import Behaviour, OpenAIServer, answering

    tmp, env = world
    hostile_model = f"lab/{TITLE}[/bold]{CLEAR}[/usr/bin/x]"
    good_model = "meta/llama-3.3-70b-instruct"
    plain_claim = claim("No rollback", ref="plan.md:6", quote=QUOTE)
    server = OpenAIServer(
        models=[hostile_model, good_model],
        behaviours={
            # Its error body quotes the model id back, escapes and markup included.
            hostile_model: Behaviour("status", status=500),
            good_model: answering(answer(Q, "NO", [plain_claim])),
        },
    )
    only_http = {**env, "PATH": "/usr/bin:/bin"}  # no CLI: the endpoint's models sit
    with server:
        code, shown = on_pty(
            tmp,
            only_http,
            Q,
            "--artifact",
            "plan.md",
            "--endpoint",
            server.base_url,
            "--n",
            "2",
            "--id",
            "http",
        )
    assert code == 0, shown.decode(errors="replace")[-2000:]
    assert b"MarkupError" not in shown and b"Traceback" not in shown
    for seq in FORBIDDEN:
        assert seq not in shown, seq
    run = json.loads((tmp / ".rune" / "council" / "run-http.json").read_text())
    details = [a["detail"] for v in run["voices"] for a in v["attempts"]]
    assert any("[/bold]" in d and "500" in d for d in details), details  # it was exercised
