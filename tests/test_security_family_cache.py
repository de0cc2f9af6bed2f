"""Today's runtime cache never speaks for a CLI that has changed since it was written.

A wrapper CLI's family comes from its own config, so the cached label is only as good as
that config: a user who points opencode or aider at another model, by editing a file, by
adding one where the wrapper also looks, or by setting a variable, gets the new family in
the very next council, without ``--refresh``, and a stamp that counts what the wrapper will
really call. A cached CLI that PATH no longer finds is not seated, and a program replaced
under the same name is probed again. A cache that this user's detection did not write is
rebuilt, with a note saying so. Every CLI here is a real subprocess (fakes under real
names), and every council is a real ``rune council`` process.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.bin import install_fake, path_with
from tests.helpers import answer, claim

Q = "Should we shard the orders table?"
ROLLBACK = claim("The plan has no rollback step", ref="plan.md:6")
OPENAI = "openai/gpt-4.1-2025-04-14"
ANTHROPIC = "anthropic/claude-sonnet-4-5"


def rune(tmp: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rune_council.cli", "council", *args],
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
        "RUNE_COUNCIL_LOGIN_SHELL": "0",
        **extra,
    }


def detected(tmp: Path, env: dict[str, str], *flags: str) -> dict[str, dict[str, Any]]:
    shown = rune(tmp, "detect", "--json", *flags, env=env)
    assert shown.returncode == 0, shown.stderr
    return {d["runtime"]: d for d in json.loads(shown.stdout)["detected"]}


def council(tmp: Path, env: dict[str, str], run_id: str) -> dict[str, Any]:
    ran = rune(tmp, Q, "--json", "--id", run_id, env=env)
    assert ran.returncode == 0, ran.stderr
    stdout: dict[str, Any] = json.loads(ran.stdout)
    on_disk = json.loads((tmp / ".rune" / "council" / f"run-{run_id}.json").read_text("utf-8"))
    assert on_disk["decorrelation"] == stdout["decorrelation"]
    return stdout


def families(result: dict[str, Any]) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for voice in result["voices"]:
        found.setdefault(voice["runtime"], set()).add(voice["model_family"])
    return found


def opencode_config(home: Path) -> Path:
    return home / ".config" / "opencode" / "opencode.json"


def write_json(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc), encoding="utf-8")


# --------------------------------------------------------------------------- stale labels


def _edit_in_place(tmp: Path, env: dict[str, str]) -> dict[str, str]:
    config = opencode_config(tmp)
    before = config.stat()
    # Same length and the same modification time: only the content tells.
    config.write_text(config.read_text("utf-8").replace(OPENAI, "anthropic/claude-haiku-45"))
    assert config.stat().st_size == before.st_size
    os.utime(config, ns=(before.st_atime_ns, before.st_mtime_ns))
    return env


def _user_dir_file(tmp: Path, env: dict[str, str]) -> dict[str, str]:
    # opencode reads ~/.opencode/ after ~/.config/opencode/: a file that was not there when
    # the cache was written now decides the model.
    write_json(tmp / ".opencode" / "opencode.json", {"model": ANTHROPIC})
    return env


def _inline_variable(tmp: Path, env: dict[str, str]) -> dict[str, str]:
    return {**env, "OPENCODE_CONFIG_CONTENT": json.dumps({"model": ANTHROPIC})}


def _config_variable(tmp: Path, env: dict[str, str]) -> dict[str, str]:
    other = tmp / "elsewhere" / "team.json"
    write_json(other, {"model": ANTHROPIC})
    return {**env, "OPENCODE_CONFIG": str(other)}


def _referenced_variable(tmp: Path, env: dict[str, str]) -> dict[str, str]:
    # The config names the model through {env:...}; only the variable changes.
    return {**env, "TEAM_MODEL": ANTHROPIC}


@pytest.mark.parametrize(
    "change",
    [_edit_in_place, _user_dir_file, _inline_variable, _config_variable, _referenced_variable],
    ids=["same-size-edit", "new-file-later-in-order", "inline-var", "config-path-var", "env-ref"],
)
def test_an_opencode_pointed_at_another_model_is_never_counted_in_its_old_family(
    tmp_path: Path, change: Callable[[Path, dict[str, str]], dict[str, str]]
) -> None:
    install_fake(tmp_path / "bin", "claude", answer=answer(Q, "NO", [ROLLBACK]))
    install_fake(tmp_path / "bin", "opencode", answer=answer(Q, "NO", [ROLLBACK]))
    secret = "sk-ant-api03-" + "k" * 40
    env = env_for(tmp_path, TEAM_MODEL=OPENAI, ANTHROPIC_API_KEY=secret)
    model = "{env:TEAM_MODEL}" if change is _referenced_variable else OPENAI
    key = {"anthropic": {"options": {"apiKey": "{env:ANTHROPIC_API_KEY}"}}}
    write_json(opencode_config(tmp_path), {"model": model, "provider": key})
    first = detected(tmp_path, env)
    assert first["opencode"]["model_family"] == "openai"

    env = change(tmp_path, env)
    result = council(tmp_path, env, "switched")
    # Both voices now call an Anthropic model: one family, whatever the cache said.
    assert families(result) == {"claude": {"anthropic"}, "opencode": {"anthropic"}}
    assert result["decorrelation"] != "MULTI_FAMILY"
    [note] = [n for n in result["notes"] if n.startswith("opencode detected again")]
    assert "family now anthropic" in note and "was openai" in note
    reported = {d["runtime"]: d for d in result["runtime_report"]["detected"]}
    assert reported["opencode"]["model_family"] == "anthropic"
    # The next council reads the entry as cached again: the new label holds.
    assert detected(tmp_path, env)["opencode"]["model_family"] == "anthropic"
    # What the label was read from is watched without keeping any trace of the key.
    cache = (tmp_path / ".rune" / "runtimes.json").read_text("utf-8")
    if change is _referenced_variable:
        assert '"TEAM_MODEL"' in cache  # the variable the model names is watched
    assert hashlib.sha256(secret.encode()).hexdigest() not in cache
    assert secret not in cache


def test_an_aider_model_set_in_its_env_file_or_variable_is_read_again(tmp_path: Path) -> None:
    install_fake(tmp_path / "bin", "claude", answer=answer(Q, "NO", [ROLLBACK]))
    install_fake(tmp_path / "bin", "aider", answer=answer(Q, "NO", [ROLLBACK]))
    env = env_for(tmp_path, AIDER_MODEL=OPENAI)
    assert detected(tmp_path, env)["aider"]["model_family"] == "openai"

    result = council(tmp_path, {**env, "AIDER_MODEL": ANTHROPIC}, "var")
    assert families(result)["aider"] == {"anthropic"}
    assert result["decorrelation"] != "MULTI_FAMILY"

    # aider loads ~/.env over its environment, so a model set there wins over the variable.
    (tmp_path / ".env").write_text(f"AIDER_MODEL={OPENAI}\n", encoding="utf-8")
    again = council(tmp_path, {**env, "AIDER_MODEL": ANTHROPIC}, "dotenv")
    assert families(again)["aider"] == {"openai"}
    assert any(str(tmp_path / ".env") in n for n in again["notes"])


def test_nothing_in_the_shared_temporary_root_steers_an_opencode_voice(tmp_path: Path) -> None:
    """Voices run in a fresh directory under the temporary root; opencode reads an
    opencode.json in every directory above where it runs, and any local user can leave one
    in /tmp. The council tells opencode not to, and does not read one for its label."""
    temp_root = tmp_path / "tmp"
    temp_root.mkdir()
    write_json(temp_root / "opencode.json", {"model": ANTHROPIC})
    env_copy = tmp_path / "opencode-env.json"
    install_fake(tmp_path / "bin", "claude", answer=answer(Q, "NO", [ROLLBACK]))
    install_fake(
        tmp_path / "bin", "opencode", answer=answer(Q, "NO", [ROLLBACK]), env_copy=str(env_copy)
    )
    write_json(opencode_config(tmp_path), {"model": OPENAI})
    env = env_for(tmp_path, TMPDIR=str(temp_root))
    result = council(tmp_path, env, "tmp")
    assert families(result)["opencode"] == {"openai"}
    given = json.loads(env_copy.read_text("utf-8"))
    assert given.get("OPENCODE_DISABLE_PROJECT_CONFIG") == "1"


# --------------------------------------------------------------------------- the program


def test_a_cached_cli_no_longer_on_path_is_not_seated_and_the_note_says_why(
    tmp_path: Path,
) -> None:
    calls = tmp_path / "codex-calls"
    for name in ("claude", "gemini"):
        install_fake(tmp_path / "bin", name, answer=answer(Q, "NO", [ROLLBACK]))
    # codex lives in its own directory, which the user later drops from PATH; the file
    # itself stays on disk, where the cache still names it.
    codex = install_fake(
        tmp_path / "extra", "codex", answer=answer(Q, "NO", [ROLLBACK]), argv_log=str(calls)
    )
    with_codex = env_for(tmp_path, PATH=f"{tmp_path / 'extra'}:{path_with(tmp_path / 'bin')}")
    assert detected(tmp_path, with_codex)["codex"]["status"] == "available"

    result = council(tmp_path, env_for(tmp_path), "gone")
    assert "codex" not in families(result)
    assert not calls.exists(), "a CLI PATH no longer finds was asked the question"
    [note] = [n for n in result["notes"] if n.startswith("codex not seated")]
    assert f"{codex} is no longer on the PATH" in note


def test_a_program_replaced_under_the_same_name_is_probed_again(tmp_path: Path) -> None:
    claude = install_fake(tmp_path / "bin", "claude", version="1.2.3")
    env = env_for(tmp_path)
    assert detected(tmp_path, env)["claude"]["version"] == "1.2.3"
    before = claude.stat()
    # An upgrade that lands as a new file, keeping the old modification time.
    staged = install_fake(tmp_path / "staging", "claude", version="9.9.9-upgraded")
    os.replace(staged, claude)
    os.utime(claude, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert claude.stat().st_mtime_ns == before.st_mtime_ns
    assert detected(tmp_path, env)["claude"]["version"] == "9.9.9-upgraded"


# --------------------------------------------------------------------------- the cache itself


def test_a_cache_this_user_did_not_write_is_rebuilt_with_a_note(tmp_path: Path) -> None:
    install_fake(tmp_path / "bin", "claude", answer=answer(Q, "NO", [ROLLBACK]))
    install_fake(tmp_path / "bin", "gemini", answer=answer(Q, "NO", [ROLLBACK]))
    env = env_for(tmp_path)
    cache = tmp_path / ".rune" / "runtimes.json"
    assert detected(tmp_path, env)["claude"]["status"] == "available"
    planted = json.loads(cache.read_text("utf-8"))
    planted["detected"] = [d for d in planted["detected"] if d["runtime"] != "gemini"]
    cache.write_text(json.dumps(planted), encoding="utf-8")

    result = council(tmp_path, env, "planted")
    assert sorted(families(result)) == ["claude", "gemini"]
    assert any(
        str(cache) in n and "not written by your own detection" in n for n in result["notes"]
    ), result["notes"]

    cache.write_text("{ not json", encoding="utf-8")
    broken = council(tmp_path, env, "broken")
    assert sorted(families(broken)) == ["claude", "gemini"]
    assert any(str(cache) in n and "not a report" in n for n in broken["notes"])
    # Rebuilt: the next council reads it as today's cache, with nothing to say about it.
    quiet = council(tmp_path, env, "quiet")
    assert not [n for n in quiet["notes"] if str(cache) in n]
