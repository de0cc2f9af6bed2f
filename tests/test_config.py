"""council.toml: one model, read once, merged once; a wrong name or a hostile file is one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rune_council import CouncilOptions, convene
from rune_council.config import load_config, trust_file
from rune_council.core.errors import RuntimeConfigError
from tests.fakes.bin import path_with
from tests.helpers import answer, claim

Q = "Should we shard the orders table?"
GOOD = answer(Q, "NO", [claim("The plan has no rollback step")])


def rune(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp / "bin").mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "rune_council.cli", "council", *args],
        cwd=tmp,
        env={"PATH": path_with(tmp / "bin"), "HOME": str(tmp), "LANG": "C.UTF-8"},
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def project(tmp: Path, text: str) -> Path:
    toml = tmp / ".rune" / "council.toml"
    toml.parent.mkdir(parents=True, exist_ok=True)
    toml.write_text(text, encoding="utf-8")
    return toml


COMMANDS = (["detect"], ["endpoints"], [Q, "--id", "bad"], ["trust"])


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("[consnet]\nallow_external = true\n", ["[consnet]", "unknown section", "[consent]"]),
        ('[subagent]\ncomand = "x"\n', ["[subagent] comand", "'command'"]),
        ('[endpoints.lab]\nbase_url = "http://h"\nprefers = []\n', ["[endpoints.lab]", "'prefer'"]),
        ("[env]\nallows = []\n", ["[env] allows", "'allow'"]),
        ("a = " + "[" * 100_000, ["nests deeper than"]),
        ("a = [" + "{x = [" * 60 + "]}" * 60 + "]", ["nests deeper than"]),
        ("[consent\n", ["line 1"]),
        ('[consent]\nallow_external = "yes"\n', ["[consent] allow_external", "boolean"]),
    ],
)
def test_a_wrong_or_hostile_file_is_one_line_and_exit_2_everywhere(
    tmp_path: Path, text: str, fragments: list[str]
) -> None:
    toml = project(tmp_path, text)
    for args in COMMANDS:
        out = rune(tmp_path, *args)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        [line] = out.stderr.strip().splitlines()
        assert str(toml) in line and all(f in line for f in fragments), (args, line)
    assert not (tmp_path / ".rune" / "council").exists()  # no run was started


def test_a_fifo_in_place_of_the_file_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / ".rune" / "council.toml"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    out = rune(tmp_path, "detect")
    assert out.returncode == 2 and "not a regular file" in out.stderr


def test_user_and_project_merge_once_and_say_where_each_part_came_from(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    user = tmp_path / ".config" / "rune-council" / "council.toml"
    user.parent.mkdir(parents=True)
    user.write_text(
        '[subagent]\ncommand = "host-agent"\nendpoint = "nim"\nmodel = "meta/a"\n'
        '[env]\nallow = ["HTTPS_PROXY"]\n[consent]\nallow_external = false\n'
        '[endpoints.lab]\nbase_url = "http://gpu:8000"\nkey_env = "LAB_KEY"\n'
    )
    toml = project(
        tmp_path,
        '[subagent]\nfamily = "anthropic"\nendpoint = "lab"\n'
        '[env]\nallow = ["NO_PROXY", "HTTPS_PROXY"]\n[consent]\nallow_external = true\n'
        '[runtimes.mine]\ncommand = "mine --ask"\n',
    )
    trust_file(toml, env)
    config = load_config(tmp_path / ".rune", env)
    assert (config.subagent.command, config.subagent.family) == ("host-agent", "anthropic")
    # endpoint and model are one choice: the project's endpoint does not keep the user's model
    assert (config.subagent.endpoint, config.subagent.model) == ("lab", None)
    assert config.env.allow == ("HTTPS_PROXY", "NO_PROXY")
    assert config.consent.allow_external is True
    assert set(config.runtimes) == {"mine"} and set(config.endpoints) == {"lab"}
    assert config.origin == {
        "subagent.command": str(user),
        "subagent.family": str(toml),
        "subagent.endpoint": str(toml),
        "env.allow": str(toml),
        "consent": str(toml),
        "runtimes.mine": str(toml),
        "endpoints.lab": str(user),
    }
    assert [(s.scope, s.trusted) for s in config.sources] == [("user", True), ("project", True)]
    assert config.notes == ()


def test_an_untrusted_project_keeps_its_harmless_settings(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    project(
        tmp_path,
        '[subagent]\nfamily = "anthropic"\n'
        '[endpoints.local]\nbase_url = "http://127.0.0.1:8000/v1"\n'  # no key, still a seat
        '[endpoints.nim]\nprefer = ["meta/*"]\n'  # a preset brings the NVIDIA key
        '[endpoints.fake]\npreset = "nim"\nbase_url = "http://127.0.0.1:9/v1"\n'
        "[consent]\nallow_external = false\n",  # refusing is not granting
    )
    config = load_config(tmp_path / ".rune", env)
    assert config.subagent.family == "anthropic"
    assert set(config.endpoints) == set()
    assert config.consent.allow_external is False
    [note] = config.notes
    assert "[endpoints.local], [endpoints.nim], [endpoints.fake]" in note
    assert "[consent]" not in note


def test_an_untrusted_file_is_still_checked_in_full(tmp_path: Path) -> None:
    project(tmp_path, '[runtimes.claude]\ncommand = "my-claude"\n')  # shadows a built-in
    with pytest.raises(RuntimeConfigError, match="'claude' is a built-in adapter"):
        convene(
            {"id": "x", "question": Q},
            CouncilOptions(rune_dir=tmp_path / ".rune", env={"HOME": "/nope"}),
        )


def test_the_model_is_passed_down_not_read_again(tmp_path: Path) -> None:
    """A council given a config uses it even when the files have gone since."""
    script = tmp_path / "mine.py"
    script.write_text(f"import sys\nsys.stdin.read()\nprint({GOOD!r})\n")
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "RUNE_COUNCIL_LOGIN_SHELL": "0"}
    toml = project(
        tmp_path,
        f'[runtimes.mine]\ncommand = ["{sys.executable}", "{script}"]\nversion_args = []\n'
        "[consent]\nallow_external = true\n",
    )
    trust_file(toml, env)
    config = load_config(tmp_path / ".rune", env)
    toml.unlink()
    result = convene(
        {"id": "passed", "question": Q, "n": 2},
        CouncilOptions(rune_dir=tmp_path / ".rune", env=env, config=config),
    )
    assert {(v.runtime, v.status) for v in result.voices} == {("mine", "complete")}
    assert result.runtime_report.consent is not None
    assert result.runtime_report.consent.startswith(f"granted (allow_external = true in {toml}")
