"""A first run with the wrapper CLIs (opencode, aider, cline, amp) installed but not set up:
each is found logged out before it is asked, from its own config and credential files and
the key its chosen provider needs, so the council ends at once with one fix per CLI instead
of waiting on retries or a browser sign-in. A user who follows a fix, or points the wrapper
at another provider, is read afresh on the next run. Every CLI is a real subprocess (fakes
under the real names; the real pinned CLIs are in tests/e2e/test_first_run_real.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.bin import install_fake, path_with
from tests.helpers import answer, claim

Q = "Should we shard the orders table?"
ROLLBACK = claim("The plan has no rollback step", ref="plan.md:6")
ANTHROPIC_FIX = "export ANTHROPIC_API_KEY=<your key>"
WRAPPER_FIXES = {
    "opencode": "opencode auth login",
    "aider": ANTHROPIC_FIX,
    "cline": "cline auth",
    "amp": "amp login",
}


def rune(tmp: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rune_council.cli", *args],
        cwd=tmp,
        env={"LANG": "C.UTF-8", **env},
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def env_for(tmp: Path, **extra: str) -> dict[str, str]:
    return {
        "PATH": path_with(tmp / "bin"),
        "HOME": str(tmp),
        "RUNE_COUNCIL_ALLOW_EXTERNAL": "1",
        **extra,
    }


def detected(tmp: Path, env: dict[str, str]) -> dict[str, dict[str, Any]]:
    shown = rune(tmp, "council", "detect", "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    return {d["runtime"]: d for d in json.loads(shown.stdout)["detected"]}


def write_json(path: Path, doc: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc), encoding="utf-8")


def opencode_config(home: Path, doc: object) -> None:
    write_json(home / ".config" / "opencode" / "opencode.json", doc)


def cline_providers(home: Path, provider: str, settings: dict[str, object]) -> None:
    write_json(
        home / ".cline" / "data" / "settings" / "providers.json",
        {
            "version": 1,
            "lastUsedProvider": provider,
            "providers": {provider: {"settings": {"provider": provider, **settings}}},
        },
    )


def test_wrappers_on_an_empty_home_end_the_council_at_once_with_a_fix_each(
    tmp_path: Path,
) -> None:
    calls = tmp_path / "calls"
    # Each would hang for a minute if it were asked (as the real ones retry, or wait at a
    # browser sign-in, until the voice's timeout).
    for name in WRAPPER_FIXES:
        install_fake(tmp_path / "bin", name, auth="logged-out", mode="sleep", argv_log=calls)
    started = time.monotonic()
    ran = rune(tmp_path, "council", Q, "--timeout", "60", "--id", "w0", env=env_for(tmp_path))
    elapsed = time.monotonic() - started
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert elapsed < 10, f"took {elapsed:.1f}s"
    for name, fix in WRAPPER_FIXES.items():
        assert f"  {name}: {fix}" in ran.stderr, ran.stderr
    result = json.loads((tmp_path / ".rune" / "council" / "run-w0.json").read_text("utf-8"))
    notes = {n.split()[0]: n for n in result["notes"] if "not seated: logged out" in n}
    assert sorted(notes) == sorted(WRAPPER_FIXES)
    assert all(
        "\n" not in n and n.endswith(f"to fix: {WRAPPER_FIXES[k]}") for k, n in notes.items()
    )
    assert "anonymous free models" in notes["opencode"]
    assert "OpenRouter's browser sign-in" in notes["aider"]
    # Neither the question nor a status command was ever given to any of them.
    assert not calls.exists(), calls.read_text()


def test_doctor_names_each_wrapper_fix_once(tmp_path: Path) -> None:
    install_fake(tmp_path / "bin", "claude", auth="logged-out")
    for name in WRAPPER_FIXES:
        install_fake(tmp_path / "bin", name, auth="logged-out")
    ran = rune(tmp_path, "council", "doctor", "--json", env=env_for(tmp_path))
    assert ran.returncode == 1, ran.stderr
    doc = json.loads(ran.stdout)
    rows = {r["name"]: r for r in doc["runtimes"]}
    for name, fix in WRAPPER_FIXES.items():
        assert (rows[name]["auth"], rows[name]["fix"]) == ("logged-out", fix)
        assert rows[name]["problem"] == "logged out: a council does not seat it"
    # claude and aider are both fixed by the one key: the next steps name it once.
    assert doc["fixes"].count("export ANTHROPIC_API_KEY=<your key>") == 1
    assert set(WRAPPER_FIXES.values()) <= set(doc["fixes"])


def test_opencode_needs_a_key_for_the_provider_its_config_names(tmp_path: Path) -> None:
    install_fake(tmp_path / "bin", "opencode", auth="logged-out")
    env = env_for(tmp_path)
    opencode_config(tmp_path, {"model": "anthropic/claude-sonnet-4-5"})
    entry = detected(tmp_path, env)["opencode"]
    assert (entry["auth"], entry["auth_fix"]) == (
        "logged-out",
        "export ANTHROPIC_API_KEY=<your key>",
    )
    assert entry["model_family"] == "anthropic"
    assert detected(tmp_path, {**env, "ANTHROPIC_API_KEY": "k"})["opencode"]["auth"] == "ready"

    # A provider of the user's own whose key the config reads from a variable.
    own = {"options": {"baseURL": "https://llm.example/v1", "apiKey": "{env:MY_LLM_KEY}"}}
    opencode_config(tmp_path, {"model": "mine/big-model", "provider": {"mine": own}})
    entry = detected(tmp_path, env)["opencode"]
    assert (entry["auth"], entry["auth_fix"]) == ("logged-out", "export MY_LLM_KEY=<your key>")
    assert detected(tmp_path, {**env, "MY_LLM_KEY": "k"})["opencode"]["auth"] == "ready"

    # A local server and opencode's own free models need no key: tried, not judged.
    opencode_config(tmp_path, {"model": "ollama/llama3"})
    assert detected(tmp_path, env)["opencode"]["auth"] == "unknown"
    opencode_config(tmp_path, {"model": "opencode/big-pickle"})
    assert detected(tmp_path, env)["opencode"]["auth"] == "unknown"


def test_an_opencode_login_saved_after_the_fix_is_read_on_the_next_run(tmp_path: Path) -> None:
    log = tmp_path / "calls"
    install_fake(tmp_path / "bin", "opencode", auth="logged-out", argv_log=log)
    opencode_config(tmp_path, {"model": "anthropic/claude-sonnet-4-5"})
    env = env_for(tmp_path)
    assert detected(tmp_path, env)["opencode"]["auth"] == "logged-out"
    # What `opencode auth login` saves: a credential per provider, read for its names only.
    secret = "sk-ant-SECRETVALUE-never-recorded"
    store = tmp_path / ".local" / "share" / "opencode" / "auth.json"
    write_json(store, {"anthropic": {"type": "api", "key": secret}})
    entry = detected(tmp_path, env)["opencode"]
    assert entry["auth"] == "ready", entry
    assert str(store) in entry["auth_detail"]
    assert secret not in (tmp_path / ".rune" / "runtimes.json").read_text(encoding="utf-8")
    # The check reads files: opencode itself was never started for it.
    assert not log.exists()


def test_aider_needs_the_key_of_the_model_it_is_set_to(tmp_path: Path) -> None:
    install_fake(tmp_path / "bin", "aider", auth="logged-out")
    env = env_for(tmp_path)
    # A key in ~/.env, which aider loads: it picks its model by that key.
    (tmp_path / ".env").write_text("ANTHROPIC_API_KEY=k\n", encoding="utf-8")
    assert detected(tmp_path, env)["aider"]["auth"] == "ready"

    (tmp_path / ".aider.conf.yml").write_text("model: gemini/gemini-2.5-pro\n", encoding="utf-8")
    entry = detected(tmp_path, env)["aider"]
    assert (entry["auth"], entry["auth_fix"]) == ("logged-out", "export GEMINI_API_KEY=<your key>")
    assert entry["model_family"] == "google"
    assert detected(tmp_path, {**env, "GEMINI_API_KEY": "k"})["aider"]["auth"] == "ready"

    # Its own key setting in the conf file counts; a local model needs none.
    (tmp_path / ".aider.conf.yml").write_text(
        "model: gpt-4o\nopenai-api-key: sk-x\n", encoding="utf-8"
    )
    assert detected(tmp_path, env)["aider"]["auth"] == "ready"
    (tmp_path / ".aider.conf.yml").write_text("model: ollama_chat/llama3\n", encoding="utf-8")
    assert detected(tmp_path, env)["aider"]["auth"] == "unknown"


def test_cline_needs_its_account_or_the_key_of_the_provider_it_last_used(tmp_path: Path) -> None:
    install_fake(tmp_path / "bin", "cline", auth="logged-out")
    env = env_for(tmp_path)
    # What `cline config` leaves behind on a fresh machine: its own provider, no sign-in.
    cline_providers(tmp_path, "cline", {"model": "aion-labs/aion-3.5"})
    entry = detected(tmp_path, env)["cline"]
    assert (entry["auth"], entry["auth_fix"]) == ("logged-out", "cline auth")
    cline_providers(tmp_path, "cline", {"model": "m", "auth": {"accessToken": "t"}})
    assert detected(tmp_path, env)["cline"]["auth"] == "ready"

    cline_providers(tmp_path, "anthropic", {"model": "claude-opus-4-1"})
    entry = detected(tmp_path, env)["cline"]
    assert (entry["auth"], entry["auth_fix"]) == (
        "logged-out",
        "export ANTHROPIC_API_KEY=<your key>",
    )
    assert detected(tmp_path, {**env, "ANTHROPIC_API_KEY": "k"})["cline"]["auth"] == "ready"
    cline_providers(tmp_path, "anthropic", {"model": "claude-opus-4-1", "apiKey": "k"})
    assert detected(tmp_path, env)["cline"]["auth"] == "ready"

    local = {"model": "m", "baseUrl": "http://127.0.0.1:11434/v1"}
    cline_providers(tmp_path, "openai-compatible", local)
    assert detected(tmp_path, env)["cline"]["auth"] == "unknown"


@pytest.mark.parametrize("name", sorted(WRAPPER_FIXES))
def test_a_wrapper_set_up_by_the_user_is_seated(tmp_path: Path, name: str) -> None:
    install_fake(tmp_path / "bin", "claude", answer=answer(Q, "NO", [ROLLBACK]))
    install_fake(tmp_path / "bin", name, answer=answer(Q, "NO", [ROLLBACK]))  # a saved login
    ran = rune(tmp_path, "council", Q, "--json", "--n", "2", env=env_for(tmp_path))
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    assert sorted(v["runtime"] for v in result["voices"]) == sorted(["claude", name])
    assert not [n for n in result["notes"] if "not seated" in n]
    # Seated as known to be able to answer, and why, not as a guess.
    entry = next(d for d in result["runtime_report"]["detected"] if d["runtime"] == name)
    assert entry["auth"] == "ready", entry
    assert entry["auth_detail"]


def test_a_wrapper_pointed_at_another_provider_is_checked_again_from_the_cache(
    tmp_path: Path,
) -> None:
    install_fake(tmp_path / "bin", "aider", auth="logged-out")
    env = env_for(tmp_path, OPENAI_API_KEY="k")
    (tmp_path / ".aider.conf.yml").write_text("model: gpt-4o\n", encoding="utf-8")
    assert detected(tmp_path, env)["aider"]["auth"] == "ready"
    shown = rune(tmp_path, "council", "detect", env=env)
    assert "cached today" in shown.stdout
    # The same conf file now names a model of a provider with no key: not the cached answer.
    (tmp_path / ".aider.conf.yml").write_text("model: sonnet\n", encoding="utf-8")
    entry = detected(tmp_path, env)["aider"]
    assert (entry["auth"], entry["auth_fix"]) == (
        "logged-out",
        "export ANTHROPIC_API_KEY=<your key>",
    )
    # And the key set afterwards is seen too, without --refresh.
    assert detected(tmp_path, {**env, "ANTHROPIC_API_KEY": "k"})["aider"]["auth"] == "ready"
