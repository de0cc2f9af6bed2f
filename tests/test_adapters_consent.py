"""Consent before the first external dispatch, as a user meets it at the shell."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

from rune_council import CouncilOptions, convene
from tests.fakes.bin import install_fake, path_with
from tests.helpers import answer, claim, run_rune

Q = "Should we shard the orders table?"
GOOD = answer(Q, "NO", [claim("The plan has no rollback step")])


def world(tmp: Path) -> dict[str, str]:
    for name in ("claude", "codex"):
        install_fake(tmp / "bin", name, answer=GOOD, argv_log=tmp / f"{name}.calls")
    host = tmp / "host.py"
    host.write_text(f"import sys\nsys.stdin.read()\nprint({GOOD!r})\n")
    return {
        "PATH": path_with(tmp / "bin"),
        "HOME": str(tmp),
        "LANG": "C.UTF-8",
        "RUNE_COUNCIL_LOGIN_SHELL": "0",
    }


def dispatched(tmp: Path) -> list[str]:
    return sorted(n for n in ("claude", "codex") if (tmp / f"{n}.calls").exists())


def rune(tmp: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_rune(tmp, env, "council", *args)


def test_without_consent_a_non_interactive_run_is_subagent_only_and_says_so(
    tmp_path: Path,
) -> None:
    env = world(tmp_path)
    host = f"{sys.executable} {tmp_path / 'host.py'}"
    out = rune(tmp_path, env, Q, "--n", "2", "--id", "nc", "--subagent-cmd", host)
    assert out.returncode == 0, out.stderr
    assert dispatched(tmp_path) == []  # no external CLI ran, not even once
    assert "external CLIs found (claude, codex) but not dispatched" in out.stdout
    assert "--yes" in out.stdout and "RUNE_COUNCIL_ALLOW_EXTERNAL=1" in out.stdout
    doc = json.loads((tmp_path / ".rune" / "council" / "run-nc.json").read_text())
    assert {v["source"] for v in doc["voices"]} == {"subagent"}
    assert doc["runtime_report"]["consent"] == "not granted (nobody granted it)"
    # Detection still happened: the report lists what was found.
    found = {d["runtime"] for d in doc["runtime_report"]["detected"] if d["status"] == "available"}
    assert found == {"claude", "codex"}


def test_yes_grants_consent_for_this_run(tmp_path: Path) -> None:
    env = world(tmp_path)
    out = rune(tmp_path, env, Q, "--n", "2", "--id", "y1", "--yes", "--json")
    assert out.returncode == 0, out.stderr
    assert dispatched(tmp_path) == ["claude", "codex"]
    assert json.loads(out.stdout)["runtime_report"]["consent"].startswith("granted (the caller")
    assert not (tmp_path / ".rune" / "consent.json").exists()  # a flag is not remembered


def test_environment_and_config_grant_or_refuse_and_the_variable_wins(tmp_path: Path) -> None:
    env = world(tmp_path)
    (tmp_path / ".rune").mkdir()
    (tmp_path / ".rune" / "council.toml").write_text("[consent]\nallow_external = true\n")
    assert rune(tmp_path, env, "trust").returncode == 0  # a project may grant it once trusted
    out = rune(tmp_path, env, Q, "--n", "2", "--id", "c1", "--json")
    consent = json.loads(out.stdout)["runtime_report"]["consent"]
    assert consent.startswith("granted (allow_external = true in ") and "council.toml" in consent
    assert dispatched(tmp_path) == ["claude", "codex"]
    for name in ("claude", "codex"):
        (tmp_path / f"{name}.calls").unlink()
    out = rune(tmp_path, {**env, "RUNE_COUNCIL_ALLOW_EXTERNAL": "0"}, Q, "--n", "2", "--id", "c2")
    assert dispatched(tmp_path) == []
    assert "RUNE_COUNCIL_ALLOW_EXTERNAL=0" in out.stdout


def test_user_config_dir_can_grant_consent(tmp_path: Path) -> None:
    env = world(tmp_path)
    user = tmp_path / "cfg"
    user.mkdir()
    (user / "council.toml").write_text("[consent]\nallow_external = true\n")
    out = rune(tmp_path, {**env, "RUNE_COUNCIL_CONFIG_DIR": str(user)}, Q, "--n", "2", "--id", "u")
    assert out.returncode == 0, out.stderr
    assert dispatched(tmp_path) == ["claude", "codex"]


def test_a_library_caller_refusing_consent_wins_over_the_environment(tmp_path: Path) -> None:
    env = {**world(tmp_path), "RUNE_COUNCIL_ALLOW_EXTERNAL": "1"}
    result = convene(
        {"id": "lib", "question": Q, "n": 2},
        CouncilOptions(
            rune_dir=tmp_path / ".rune",
            env=env,
            allow_external=False,
            subagent=lambda prompt: GOOD,
        ),
    )
    assert dispatched(tmp_path) == []
    assert result.runtime_report.consent == "not granted (the caller (allow_external / --yes))"
    assert {v.runtime for v in result.voices} == {"internal"}


def _on_a_terminal(tmp: Path, env: dict[str, str], reply: bytes, run_id: str) -> tuple[int, str]:
    """Run `rune council` with stdin and stderr on a pseudo-terminal; answer the prompt."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "rune_council.cli", "council", Q, "--n", "2", "--id", run_id],
        cwd=tmp,
        env=env,
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=slave,
    )
    os.close(slave)
    seen = b""
    answered = False
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        if not answered and b"[y/N]" in seen:
            os.write(master, reply + b"\n")
            answered = True
        if proc.poll() is not None and not ready:
            break
    proc.wait(timeout=60)
    assert proc.stdout is not None
    proc.stdout.read()
    os.close(master)
    return proc.returncode, seen.decode("utf-8", "replace")


def test_on_a_terminal_the_user_is_asked_once_and_a_yes_is_remembered(tmp_path: Path) -> None:
    env = world(tmp_path)
    code, screen = _on_a_terminal(tmp_path, env, b"n", "t1")
    assert "this sends the question (and any artifact) to claude, codex" in screen
    assert code in (0, 1) and dispatched(tmp_path) == []
    assert not (tmp_path / ".rune" / "consent.json").exists()

    code, screen = _on_a_terminal(tmp_path, env, b"y", "t2")
    assert code == 0, screen
    assert dispatched(tmp_path) == ["claude", "codex"]
    assert json.loads((tmp_path / ".rune" / "consent.json").read_text())["allow_external"]

    # Remembered: a later run in this project, even without a terminal, needs no prompt.
    for name in ("claude", "codex"):
        (tmp_path / f"{name}.calls").unlink()
    out = rune(tmp_path, env, Q, "--n", "2", "--id", "t3", "--json")
    assert out.returncode == 0, out.stderr
    assert dispatched(tmp_path) == ["claude", "codex"]
    # The yes is the user's own for this project (at the prompt or by `rune council consent`).
    assert "the user's yes for this project" in json.loads(out.stdout)["runtime_report"]["consent"]
