"""DETECT beyond a plain PATH lookup: ineligible CLIs, the login-shell PATH, the 1devtool-agent
bridge and user-defined runtimes. Every CLI here is a real subprocess (fakes under real
names), and so are the login shell and the bridge."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rune_council import CouncilOptions, RuntimeConfigError, convene
from rune_council.config import trust_file
from rune_council.core.contract import RuntimesFile
from tests.fakes.bin import install_fake, path_with
from tests.helpers import PLAN, answer, claim

Q = "Should we shard the orders table?"
ROLLBACK = claim(
    "The plan has no rollback step", ref="plan.md:6", quote="No rollback step is defined."
)
UNDO = {**ROLLBACK, "text": "Nothing says how to undo the migration if it fails"}
FAKE_BRIDGE = Path(__file__).parent / "fakes" / "fake_bridge.py"
BARE_PATH = "/usr/bin:/bin"


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


def request(run_id: str, **extra: Any) -> dict[str, Any]:
    return {"id": run_id, "question": Q, "artifact": {"name": "plan.md", "text": PLAN}, **extra}


# --------------------------------------------------------------------------- ineligible


def test_grok_is_detected_but_ineligible_and_never_dispatched(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    install_fake(bin_dir, "grok", version="0.0.34", argv_log=tmp_path / "grok-calls")
    install_fake(bin_dir, "claude", answer=answer(Q, "NO", [ROLLBACK]))
    env = {"PATH": path_with(bin_dir), "HOME": str(tmp_path), "RUNE_COUNCIL_ALLOW_EXTERNAL": "1"}

    shown = rune(tmp_path, "council", "detect", env=env)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    at = next(i for i, text in enumerate(lines) if text.split()[:2] == ["grok", "ineligible"])
    reason = lines[at + 1]
    assert "prompt only as a command-line argument" in reason and "no read-only mode" in reason

    cached = RuntimesFile.model_validate_json((tmp_path / ".rune" / "runtimes.json").read_bytes())
    grok = next(d for d in cached.detected if d.runtime == "grok")
    assert (grok.status, grok.version, grok.model_family) == ("ineligible", "0.0.34", "xai")
    assert "no read-only mode" in grok.detail

    out = rune(tmp_path, "council", Q, "--json", "--n", "3", "--id", "g1", env=env)
    doc = json.loads(out.stdout)
    assert {a["runtime"] for v in doc["voices"] for a in v["attempts"]} == {"claude"}
    assert not (tmp_path / "grok-calls").exists()  # grok never ran, not even once


# --------------------------------------------------------------------------- login shell


def _login_profile(home: Path, tool_dir: Path, counter: Path) -> None:
    """Start-up files for whichever login shell the test runs under, all adding tool_dir."""
    line = f'echo x >> {shlex.quote(str(counter))}; PATH="{tool_dir}:$PATH"; export PATH\n'
    for name in (".bash_profile", ".profile", ".zprofile"):
        (home / name).write_text(f"echo 'noise from {name}'\n{line}")
    fish = home / ".config" / "fish"
    fish.mkdir(parents=True)
    (fish / "config.fish").write_text(
        f"echo x >> {shlex.quote(str(counter))}\nset -gx PATH {tool_dir} $PATH\n"
    )


def test_a_cli_only_the_login_shell_can_find_is_found_and_runs(tmp_path: Path) -> None:
    # Like nvm: the CLI and the interpreter it needs sit in a directory only the user's
    # shell start-up files put on PATH; rune is started with a bare PATH.
    tool_dir = tmp_path / ".nvm" / "versions" / "node" / "v20" / "bin"
    install_fake(tmp_path / "real", "codex", answer=answer(Q, "NO", [UNDO]))
    tool_dir.mkdir(parents=True)
    (tool_dir / "fake-node").write_text(f'#!/bin/sh\nexec {tmp_path / "real" / "codex"} "$@"\n')
    (tool_dir / "fake-node").chmod(0o755)
    # The CLI itself only works when its interpreter is on PATH, as `#!/usr/bin/env node` does.
    (tool_dir / "codex").write_text(
        '#!/bin/sh\nif [ "$1" = "--version" ]; then echo "codex 0.171.0"; exit 0; fi\n'
        'exec fake-node "$@"\n'
    )
    (tool_dir / "codex").chmod(0o755)
    counter = tmp_path / "profile-sourced"
    _login_profile(tmp_path, tool_dir, counter)
    install_fake(tmp_path / "bin", "claude", answer=answer(Q, "NO", [ROLLBACK]))
    env = {
        "PATH": f"{tmp_path / 'bin'}:{BARE_PATH}",
        "HOME": str(tmp_path),
        "SHELL": "/bin/bash",
        "RUNE_COUNCIL_ALLOW_EXTERNAL": "1",
    }
    result = convene(request("lp", n=2), CouncilOptions(rune_dir=tmp_path / ".rune", env=env))
    report = result.runtime_report
    codex = next(d for d in report.detected if d.runtime == "codex")
    assert codex.status == "available" and codex.path == str(tool_dir / "codex")
    by_runtime = {v.runtime: v for v in result.voices}
    assert by_runtime["codex"].status == "complete", by_runtime["codex"].attempts
    assert result.decorrelation == "MULTI_FAMILY"

    cached = RuntimesFile.model_validate_json((tmp_path / ".rune" / "runtimes.json").read_bytes())
    assert cached.login_shell and str(tool_dir) in cached.login_path
    assert len(counter.read_text().splitlines()) == 1  # asked once
    convene(request("lp2", n=2), CouncilOptions(rune_dir=tmp_path / ".rune", env=env))
    assert len(counter.read_text().splitlines()) == 1  # and not again while the cache holds


def test_the_login_shell_is_not_asked_when_switched_off(tmp_path: Path) -> None:
    counter = tmp_path / "profile-sourced"
    _login_profile(tmp_path, tmp_path / "nowhere", counter)
    env = {"PATH": BARE_PATH, "HOME": str(tmp_path), "RUNE_COUNCIL_LOGIN_SHELL": "0"}
    out = rune(tmp_path, "council", "detect", "--json", env=env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["login_path"] == []
    assert not counter.exists()


# --------------------------------------------------------------------------- bridge


def _install_bridge(home: Path, agents: Any, **settings: str) -> Path:
    """The fake bridge in its per-user location, with its settings baked in."""
    where = home / ".1devtool" / "bin"
    where.mkdir(parents=True)
    exports = " ".join(
        f"{k}={shlex.quote(v)}"
        for k, v in {"FAKE_BRIDGE_AGENTS": json.dumps(agents), **settings}.items()
    )
    script = where / "1devtool-agent"
    script.write_text(
        f"#!/bin/sh\n{exports} exec {shlex.quote(sys.executable)} -S "
        f'{shlex.quote(str(FAKE_BRIDGE))} "$@"\n'
    )
    script.chmod(0o755)
    return script


def test_agents_only_the_bridge_reaches_run_through_it(tmp_path: Path) -> None:
    install_fake(tmp_path / "bin", "claude", answer=answer(Q, "NO", [ROLLBACK]))
    amp_answer = tmp_path / "amp.answer"
    amp_answer.write_text(answer(Q, "NO", [UNDO]))
    log = tmp_path / "bridge.jsonl"
    agents = [
        {"name": "claude", "available": True},
        {"name": "amp", "available": True, "version": "0.0.17"},
        {"name": "grok", "available": True},
        {"name": "cursor", "status": "not_installed"},
        "qwen",
    ]
    bridge = _install_bridge(
        tmp_path,
        agents,
        FAKE_BRIDGE_LOG=str(log),
        FAKE_BRIDGE_ANSWER_AMP=str(amp_answer),
        FAKE_BRIDGE_FAIL="qwen",
    )
    env = {
        "PATH": path_with(tmp_path / "bin"),
        "HOME": str(tmp_path),
        "RUNE_COUNCIL_LOGIN_SHELL": "0",
        "RUNE_COUNCIL_ALLOW_EXTERNAL": "1",
        "UNRELATED_SECRET_TOKEN": "planted-zzzz9999",
    }
    result = convene(request("br", n=3), CouncilOptions(rune_dir=tmp_path / ".rune", env=env))
    detected = {d.runtime: d for d in result.runtime_report.detected}
    assert detected["claude"].via is None  # installed directly: never through the bridge
    assert "1devtool:claude" not in detected
    amp = detected["1devtool:amp"]
    assert (amp.status, amp.via, amp.path, amp.version) == (
        "available", "1devtool-agent", str(bridge), "0.0.17",
    )  # fmt: skip
    assert amp.model_family == "unknown"  # a wrapper, through the bridge or not
    assert detected["1devtool:grok"].status == "ineligible"
    assert "1devtool:cursor" not in detected
    cached = RuntimesFile.model_validate_json((tmp_path / ".rune" / "runtimes.json").read_bytes())
    assert cached.bridge_path == str(bridge)

    voices = {v.attempts[0].runtime: v for v in result.voices}
    assert voices["1devtool:amp"].status == "complete"
    assert voices["1devtool:qwen"].status == "dropped"
    assert "qwen is not logged in" in (voices["1devtool:qwen"].drop_reason or "")
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted(c["argv"][1] for c in calls) == ["--to=amp", "--to=qwen"]
    for call in calls:
        assert call["argv"][0] == "run" and call["argv"][2:] == ["--prompt-stdin", "--json"]
        assert Q in call["stdin"] and not any(Q in a for a in call["argv"])
        assert "UNRELATED_SECRET_TOKEN" not in call["env"]


# --------------------------------------------------------------------------- user-defined


def _my_cli(bin_dir: Path, body: str) -> Path:
    """A CLI nobody has heard of: a small Python program, prompt on stdin or in a file."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "mistral-chat"
    script.write_text(f"#!{sys.executable}\n{body}")
    script.chmod(0o755)
    return script


def test_a_user_defined_cli_joins_the_council_without_code_changes(tmp_path: Path) -> None:
    reply = json.dumps({"reply": {"text": answer(Q, "NO", [UNDO], fenced=False)}})
    _my_cli(
        tmp_path / "bin",
        "import json, os, sys\n"
        "if sys.argv[1:] == ['--about']: print('mistral-chat v3.1'); sys.exit(0)\n"
        "prompt = open(sys.argv[sys.argv.index('--input') + 1]).read()\n"
        "assert 'orders table' in prompt\n"
        "json.dump({'env': sorted(os.environ)}, open(os.environ['HOME'] + '/seen.json', 'w'))\n"
        f"print({reply!r})\n",
    )
    install_fake(tmp_path / "bin", "claude", answer=answer(Q, "NO", [ROLLBACK]))
    (tmp_path / ".rune").mkdir()
    (tmp_path / ".rune" / "council.toml").write_text(
        "[runtimes.mistral]\n"
        'command = ["mistral-chat", "--json", "--input", "{prompt_file}"]\n'
        'prompt = "file"\n'
        'output = "json"\n'
        'answer_path = "reply.text"\n'
        'family = "mistral"\n'
        'confidence = "confirmed"\n'
        'version_args = ["--about"]\n'
        'env = ["MISTRAL_*"]\n'
    )
    trust_file(tmp_path / ".rune" / "council.toml", {"HOME": str(tmp_path)})
    env = {
        "PATH": path_with(tmp_path / "bin"),
        "HOME": str(tmp_path),
        "MISTRAL_API_KEY": "ms-planted-7777",
        "OTHER_API_KEY": "other-planted-8888",
        "RUNE_COUNCIL_LOGIN_SHELL": "0",
        "RUNE_COUNCIL_ALLOW_EXTERNAL": "1",
    }
    result = convene(request("ud", n=2), CouncilOptions(rune_dir=tmp_path / ".rune", env=env))
    detected = {d.runtime: d for d in result.runtime_report.detected}
    assert (detected["mistral"].status, detected["mistral"].version) == ("available", "3.1")
    mistral = next(v for v in result.voices if v.runtime == "mistral")
    assert mistral.status == "complete" and mistral.model_family == "mistral"
    assert result.decorrelation == "MULTI_FAMILY"
    assert result.distinct_families == ["anthropic", "mistral"]
    seen = json.loads((tmp_path / "seen.json").read_text())["env"]
    assert "MISTRAL_API_KEY" in seen and "OTHER_API_KEY" not in seen


def test_user_runtimes_come_from_the_user_config_dir_too_and_the_project_wins(
    tmp_path: Path,
) -> None:
    _my_cli(tmp_path / "bin", "import sys\nsys.stdin.read()\nprint('hello')\n")
    user_dir = tmp_path / "xdg" / "rune-council"
    user_dir.mkdir(parents=True)
    (user_dir / "council.toml").write_text(
        '[runtimes.mistral]\ncommand = "mistral-chat"\nfamily = "mistral"\nversion_args = []\n'
        '[runtimes.other]\ncommand = "mistral-chat --other"\nversion_args = []\n'
    )
    (tmp_path / ".rune").mkdir()
    (tmp_path / ".rune" / "council.toml").write_text(
        '[runtimes.mistral]\ncommand = "mistral-chat --project"\nfamily = "meta"\n'
        "version_args = []\n"
    )
    env = {
        "PATH": path_with(tmp_path / "bin"),
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
        "RUNE_COUNCIL_LOGIN_SHELL": "0",
    }
    assert rune(tmp_path, "council", "trust", env=env).returncode == 0
    out = rune(tmp_path, "council", "detect", "--json", env=env)
    assert out.returncode == 0, out.stderr
    by = {d["runtime"]: d for d in json.loads(out.stdout)["detected"]}
    assert by["mistral"]["model_family"] == "meta"  # the project's definition
    assert by["other"]["status"] == "available"


def test_changing_a_definition_invalidates_todays_cache(tmp_path: Path) -> None:
    _my_cli(tmp_path / "bin", "print('hi')\n")
    (tmp_path / ".rune").mkdir()
    toml = tmp_path / ".rune" / "council.toml"
    toml.write_text('[runtimes.mine]\ncommand = "mistral-chat"\nversion_args = []\n')
    env = {
        "PATH": path_with(tmp_path / "bin"),
        "HOME": str(tmp_path),
        "RUNE_COUNCIL_LOGIN_SHELL": "0",
    }
    assert rune(tmp_path, "council", "trust", env=env).returncode == 0
    assert "probed now" in rune(tmp_path, "council", "detect", env=env).stdout
    assert "cached today" in rune(tmp_path, "council", "detect", env=env).stdout
    toml.write_text(
        '[runtimes.mine]\ncommand = "mistral-chat"\nfamily = "meta"\nversion_args = []\n'
    )
    assert rune(tmp_path, "council", "trust", env=env).returncode == 0  # edited: trust again
    again = rune(tmp_path, "council", "detect", env=env).stdout
    assert "probed now" in again and "meta" in again


@pytest.mark.parametrize(
    ("table", "fragment"),
    [
        ('command = "x {prompt}"', "never goes on the command line"),
        ('command = "x"\nprompt = "arg"', "never goes on the command line"),
        ('command = "x"\nprompt = "file"', "needs {prompt_file} in command"),
        ('command = "x"\noutput = "json"', "needs answer_path"),
        ('command = "x"\noutput = "regex"\nanswer_regex = "(unclosed"', "not a valid regular"),
        ('command = "x"\ncolour = "blue"', "colour: Extra inputs are not permitted"),
        ('command = ""', "command is empty"),
        ('command = "x"\nenv = ["NOT OK"]', "not variable names"),
        ('command = "x"\nconfidence = "sure"', "confidence: Input should be"),
        ('command = "x \\"unclosed"', "command cannot be parsed"),
    ],
)
def test_bad_definitions_fail_with_one_clear_line(
    tmp_path: Path, table: str, fragment: str
) -> None:
    (tmp_path / ".rune").mkdir()
    (tmp_path / ".rune" / "council.toml").write_text(f"[runtimes.mine]\n{table}\n")
    env = {"PATH": BARE_PATH, "HOME": str(tmp_path), "RUNE_COUNCIL_LOGIN_SHELL": "0"}
    for args in (["council", "detect"], ["council", Q, "--id", "bad"]):
        out = rune(tmp_path, *args, env=env)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        [line] = out.stderr.strip().splitlines()
        assert fragment in line and "runtimes.mine" in line and "council.toml" in line
    assert not (tmp_path / ".rune" / "council").exists()  # nothing was run, nothing written


def test_a_user_runtime_may_not_shadow_a_built_in_adapter(tmp_path: Path) -> None:
    (tmp_path / ".rune").mkdir()
    (tmp_path / ".rune" / "council.toml").write_text('[runtimes.claude]\ncommand = "my-claude"\n')
    with pytest.raises(RuntimeConfigError, match="'claude' is a built-in adapter"):
        convene(request("sh"), CouncilOptions(rune_dir=tmp_path / ".rune", env={"PATH": BARE_PATH}))
