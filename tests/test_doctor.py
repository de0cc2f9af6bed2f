"""``rune council doctor``: one screen, the next command for each problem, and an exit code
that says whether two confirmed families are ready. CLIs are fakes run as real subprocesses
whose status commands print what the real ones print; the real CLIs are in tests/e2e."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.fakes.bin import install_fake
from tests.helpers import run_rune, user_env


def rune(tmp: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return run_rune(tmp, {**user_env(tmp, consent=False), **extra}, *args)


def doctor(tmp: Path, **extra: str) -> tuple[int, dict[str, Any]]:
    ran = rune(tmp, "council", "doctor", "--json", **extra)
    assert ran.returncode in (0, 1), ran.stderr
    return ran.returncode, json.loads(ran.stdout)


def by_name(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in doc["runtimes"]}


def test_three_ready_families_make_a_healthy_machine(tmp_path: Path) -> None:
    for name in ("claude", "codex", "gemini"):
        install_fake(tmp_path / "bin", name, auth="ready")
    code, doc = doctor(tmp_path)
    assert code == 0
    assert doc["ok"] is True
    assert doc["ready_families"] == ["anthropic", "google", "openai"]
    rows = by_name(doc)
    assert rows["claude"]["found"] and rows["claude"]["version"] == "1.2.3"
    assert rows["aider"]["found"] is False
    assert rows["codex"]["family"] == "openai" and rows["codex"]["family_confidence"] == "confirmed"
    assert doc["fixes"] == []


def test_logged_out_clis_leave_one_family_and_each_gets_its_fix(tmp_path: Path) -> None:
    install_fake(tmp_path / "bin", "claude", auth="ready")
    install_fake(tmp_path / "bin", "codex", auth="logged-out")
    install_fake(tmp_path / "bin", "gemini", auth="logged-out")
    code, doc = doctor(tmp_path)
    assert code == 1
    assert doc["ready_families"] == ["anthropic"]
    rows = by_name(doc)
    assert rows["codex"]["auth"] == "logged-out" and rows["codex"]["fix"] == "codex login"
    assert rows["gemini"]["fix"] == "export GEMINI_API_KEY=<your key>"
    assert doc["fixes"] == ["codex login", "export GEMINI_API_KEY=<your key>"]
    screen = rune(tmp_path, "council", "doctor")
    assert screen.returncode == 1
    assert "fix: codex login" in screen.stdout
    assert "not ready: 1 confirmed family ready (anthropic)" in screen.stdout


def test_an_untrusted_project_config_and_a_keyless_endpoint_each_get_their_command(
    tmp_path: Path,
) -> None:
    for name in ("claude", "codex"):
        install_fake(tmp_path / "bin", name, auth="ready")
    project = tmp_path / ".rune" / "council.toml"
    project.parent.mkdir()
    project.write_text("[consent]\nallow_external = true\n", encoding="utf-8")
    user = tmp_path / ".config" / "rune-council" / "council.toml"
    user.parent.mkdir(parents=True)
    user.write_text(
        '[endpoints.lab]\nbase_url = "http://127.0.0.1:9/v1"\nkey_env = "LAB_API_KEY"\n',
        encoding="utf-8",
    )
    code, doc = doctor(tmp_path)
    assert code == 0  # claude and codex are two families; the rest are problems to fix
    files = {c["path"]: c for c in doc["config_files"]}
    assert files[str(project)]["trust"] == "unknown"
    assert files[str(project)]["fix"] == f"rune council trust {project}"
    assert files[str(user)]["trust"] == "own" and files[str(user)]["fix"] is None
    lab = by_name(doc)["lab"]
    assert lab["kind"] == "endpoint" and lab["auth"] == "logged-out"
    assert lab["fix"] == "export LAB_API_KEY=<your key>"
    # An untrusted file cannot grant consent: nobody has given it.
    assert doc["consent"].startswith("not given yet")

    trusted = rune(tmp_path, "council", "trust", str(project))
    assert trusted.returncode == 0, trusted.stderr
    _, after = doctor(tmp_path)
    assert {c["path"]: c["trust"] for c in after["config_files"]}[str(project)] == "trusted"
    assert after["consent"].startswith("granted")
