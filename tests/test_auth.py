"""Whether each CLI can answer, found out before a council asks it: what DETECT records,
who is not seated, the one-line reasons and fixes, and a cached answer checked again when
what it looked at changes. Every CLI is a real subprocess (fakes under real names whose
status commands print what the real ones print); the real CLIs are in tests/e2e."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.fakes.bin import install_fake, path_with
from tests.helpers import answer, claim

Q = "Should we shard the orders table?"
ROLLBACK = claim("The plan has no rollback step", ref="plan.md:6")
FIXES = {
    "claude": "export ANTHROPIC_API_KEY=<your key>",
    "codex": "codex login",
    "gemini": "export GEMINI_API_KEY=<your key>",
}


def rune(
    tmp: Path, *args: str, env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rune_council.cli", *args],
        cwd=tmp,
        env={"LANG": "C.UTF-8", **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def env_for(tmp: Path, **extra: str) -> dict[str, str]:
    return {
        "PATH": path_with(tmp / "bin"),
        "HOME": str(tmp),
        "RUNE_COUNCIL_ALLOW_EXTERNAL": "1",
        **extra,
    }


def detected(tmp: Path, env: dict[str, str], *flags: str) -> dict[str, dict[str, Any]]:
    shown = rune(tmp, "council", "detect", "--json", *flags, env=env)
    assert shown.returncode == 0, shown.stderr
    return {d["runtime"]: d for d in json.loads(shown.stdout)["detected"]}


def install_three(tmp: Path, auth: str, log: Path | None = None) -> None:
    for name, position in (("claude", "NO"), ("codex", "NO"), ("gemini", "YES")):
        extra = {"argv_log": str(log)} if log is not None else {}
        install_fake(tmp / "bin", name, answer=answer(Q, position, [ROLLBACK]), auth=auth, **extra)


def test_detect_says_which_clis_are_logged_out_and_the_fix_for_each(tmp_path: Path) -> None:
    install_three(tmp_path, "logged-out")
    found = detected(tmp_path, env_for(tmp_path))
    for name, fix in FIXES.items():
        entry = found[name]
        assert entry["status"] == "available"
        assert entry["auth"] == "logged-out", entry
        assert entry["auth_fix"] == fix
        assert entry["auth_detail"]
    assert "claude auth status" in found["claude"]["auth_detail"]
    assert "codex login status" in found["codex"]["auth_detail"]
    assert "GEMINI_API_KEY" in found["gemini"]["auth_detail"]
    # The human view says the same, one line per CLI.
    shown = rune(tmp_path, "council", "detect", env=env_for(tmp_path))
    assert "auth logged-out" in shown.stdout and "fix: codex login" in shown.stdout


def test_a_ready_cli_is_recorded_with_its_evidence_and_never_a_credential(tmp_path: Path) -> None:
    secret = "sk-ant-api03-SECRETVALUE-should-never-be-recorded"
    install_three(tmp_path, "ready")
    env = env_for(tmp_path, ANTHROPIC_API_KEY=secret, GEMINI_API_KEY=secret + "2")
    found = detected(tmp_path, env)
    assert {n: found[n]["auth"] for n in FIXES} == dict.fromkeys(FIXES, "ready")
    assert "ANTHROPIC_API_KEY" in found["claude"]["auth_detail"]
    stored = (tmp_path / ".rune" / "runtimes.json").read_text(encoding="utf-8")
    assert "SECRETVALUE" not in stored
    gemini_vars = {v["name"]: v["set"] for v in found["gemini"]["auth_vars"]}
    assert all(isinstance(v, bool) for v in gemini_vars.values())


def test_a_council_of_logged_out_clis_ends_at_once_with_the_fixes(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    # Each would take a minute to fail if it were asked.
    for name in FIXES:
        install_fake(tmp_path / "bin", name, auth="logged-out", mode="sleep", argv_log=calls)
    started = time.monotonic()
    ran = rune(tmp_path, "council", Q, "--timeout", "60", "--id", "lo", env=env_for(tmp_path))
    elapsed = time.monotonic() - started
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert elapsed < 10, f"took {elapsed:.1f}s"
    for name, fix in FIXES.items():
        assert f"{name}: {fix}" in ran.stderr
    result = json.loads((tmp_path / ".rune" / "council" / "run-lo.json").read_text("utf-8"))
    notes = [n for n in result["notes"] if "not seated: logged out" in n]
    assert sorted(n.split()[0] for n in notes) == sorted(FIXES)
    assert all("\n" not in n and "to fix:" in n for n in notes)
    assert not calls.exists(), "a logged-out CLI was asked the question"


def test_a_logged_out_clis_slot_goes_to_the_next_candidate(tmp_path: Path) -> None:
    install_three(tmp_path, "ready")
    install_fake(tmp_path / "bin", "codex", answer=answer(Q, "NO", [ROLLBACK]), auth="logged-out")
    install_fake(tmp_path / "bin", "qwen", answer=answer(Q, "NO", [ROLLBACK]))
    ran = rune(tmp_path, "council", Q, "--json", "--id", "next", env=env_for(tmp_path))
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    seated = sorted(v["runtime"] for v in result["voices"])
    assert seated == ["claude", "gemini", "qwen"]
    assert any(n.startswith("codex not seated: logged out") for n in result["notes"])


def test_an_unknown_auth_state_is_tried_as_before(tmp_path: Path) -> None:
    install_three(tmp_path, "unknown")
    found = detected(tmp_path, env_for(tmp_path))
    assert {n: found[n]["auth"] for n in FIXES} == dict.fromkeys(FIXES, "unknown")
    ran = rune(tmp_path, "council", Q, "--json", "--id", "unk", env=env_for(tmp_path))
    assert ran.returncode == 0, ran.stderr
    assert sorted(v["runtime"] for v in json.loads(ran.stdout)["voices"]) == sorted(FIXES)


def test_a_cached_answer_is_checked_again_when_a_file_or_variable_it_read_changes(
    tmp_path: Path,
) -> None:
    install_fake(tmp_path / "bin", "gemini", auth="logged-out")
    codex_home = tmp_path / ".codex"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(
        'model_provider = "local"\n[model_providers.local]\nname = "local"\n'
        'base_url = "http://127.0.0.1:9/v1"\nenv_key = "LOCAL_LLM_KEY"\n',
        encoding="utf-8",
    )
    install_fake(tmp_path / "bin", "codex", auth="unknown")
    env = env_for(tmp_path)
    first = detected(tmp_path, env)
    assert first["gemini"]["auth"] == "logged-out"
    assert first["codex"]["auth"] == "logged-out"
    assert first["codex"]["auth_fix"] == "export LOCAL_LLM_KEY=<your key>"

    # The user follows the fixes: a Google login saved, the provider's key set.
    gemini = tmp_path / ".gemini"
    gemini.mkdir()
    (gemini / "settings.json").write_text(
        '{"security": {"auth": {"selectedType": "oauth-personal"}}}', encoding="utf-8"
    )
    (gemini / "oauth_creds.json").write_text("{}", encoding="utf-8")
    again = detected(tmp_path, {**env, "LOCAL_LLM_KEY": "k"})
    assert again["gemini"]["auth"] == "ready", again["gemini"]
    assert again["codex"]["auth"] == "ready", again["codex"]
    shown = rune(tmp_path, "council", "detect", env={**env, "LOCAL_LLM_KEY": "k"})
    assert "cached today" in shown.stdout
    # Unset again: the cache is stale again.
    assert detected(tmp_path, env)["codex"]["auth"] == "logged-out"


def test_files_looked_at_are_recorded_with_their_times(tmp_path: Path) -> None:
    install_fake(tmp_path / "bin", "gemini", auth="ready")
    entry = detected(tmp_path, env_for(tmp_path))["gemini"]
    files = {f["path"]: f["mtime"] for f in entry["auth_files"]}
    settings = str(tmp_path / ".gemini" / "settings.json")
    assert files[settings] == os.stat(settings).st_mtime


def test_qwen_with_no_auth_type_is_logged_out_and_with_one_is_tried(tmp_path: Path) -> None:
    install_fake(tmp_path / "bin", "qwen", auth="logged-out")
    entry = detected(tmp_path, env_for(tmp_path))["qwen"]
    assert entry["auth"] == "logged-out"
    assert "no auth type selected" in entry["auth_detail"]
    # The variables qwen infers an auth type from, all three set: it is tried.
    env = env_for(
        tmp_path, OPENAI_API_KEY="k", OPENAI_MODEL="m", OPENAI_BASE_URL="http://127.0.0.1:9/v1"
    )
    assert detected(tmp_path, env)["qwen"]["auth"] == "unknown"
