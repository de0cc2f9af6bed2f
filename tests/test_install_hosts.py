"""`rune council install <host>`: what lands where, twice is once, uninstall takes back exactly
that, nothing of the user's is overwritten without --force, and --dry-run changes nothing.

The installs run as a user runs them (``python -m rune_council.cli`` in a fresh HOME); the
real hosts loading what is installed are in tests/e2e/test_install_host_real.py.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.fakes.bin import install_fake, path_with
from tests.helpers import answer, claim, council_result_schema

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
LAUNCH = [PY, "-m", "rune_council.cli", "council", "mcp"]

# What each host gets, user-wide, relative to HOME.
USER_FILES = {
    "claude": [".claude/skills/rune-council/SKILL.md", ".claude/commands/rune.md"],
    "gemini": [".gemini/skills/rune-council/SKILL.md", ".gemini/commands/rune.toml"],
    "codex": [".codex/skills/rune-council/SKILL.md", ".codex/skills/rune/SKILL.md"],
}
USER_CONFIG = {
    "claude": ".claude.json",
    "gemini": ".gemini/settings.json",
    "codex": ".codex/config.toml",
}
PROJECT_FILES = {
    "claude": [".claude/skills/rune-council/SKILL.md", ".claude/commands/rune.md"],
    "gemini": [".gemini/skills/rune-council/SKILL.md", ".gemini/commands/rune.toml"],
    "codex": [".agents/skills/rune-council/SKILL.md", ".agents/skills/rune/SKILL.md"],
}
PROJECT_CONFIG = {
    "claude": ".mcp.json",
    "gemini": ".gemini/settings.json",
    "codex": ".codex/config.toml",
}


def _env(home: Path, **extra: str) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        **extra,
    }


def rune(
    home: Path, *args: str, cwd: Path | None = None, **extra: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "rune_council.cli", "council", *args],
        cwd=cwd or home,
        env=_env(home, **extra),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def tree(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under root with its bytes and modification time."""
    return {
        str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def mcp_entry(host: str, config: Path) -> Any:
    if host == "codex":
        return tomllib.loads(config.read_text())["mcp_servers"]["council"]
    return json.loads(config.read_text())["mcpServers"]["council"]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


# --------------------------------------------------------------------------- what goes where


@pytest.mark.parametrize("host", ["claude", "gemini", "codex"])
def test_install_puts_skill_command_and_mcp_server_where_the_host_reads_them(
    home: Path, host: str
) -> None:
    out = rune(home, "install", host)
    assert out.returncode == 0, out.stderr
    skill = (ROOT / "skill" / "SKILL.md").read_text()
    skill_file, command_file = (home / p for p in USER_FILES[host])
    assert skill_file.read_text() == skill
    assert command_file.is_file()
    entry = mcp_entry(host, home / USER_CONFIG[host])
    assert [entry["command"], *entry["args"]] == LAUNCH
    assert (
        out.stdout.strip().splitlines()[-1].startswith(f"installed rune-council into {host} (user)")
    )
    # The launch command really is the MCP server.
    shown = subprocess.run([*LAUNCH, "--help"], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "Model Context Protocol" in shown.stdout


@pytest.mark.parametrize("host", ["claude", "gemini", "codex"])
def test_project_install_stays_inside_the_project(home: Path, tmp_path: Path, host: str) -> None:
    project = tmp_path / "project"
    project.mkdir()
    out = rune(home, "install", host, "--project", cwd=project)
    assert out.returncode == 0, out.stderr
    for rel in [*PROJECT_FILES[host], PROJECT_CONFIG[host], f".rune/installed/{host}.json"]:
        assert (project / rel).is_file(), rel
    assert [entry := mcp_entry(host, project / PROJECT_CONFIG[host])] and entry["args"] == LAUNCH[
        1:
    ]
    assert tree(home) == {}, "a project install wrote into HOME"


def test_each_host_home_variable_is_followed(home: Path, tmp_path: Path) -> None:
    claude_dir, gemini_home, codex_home = (tmp_path / n for n in ("cc", "gh", "cx"))
    extra = {
        "CLAUDE_CONFIG_DIR": str(claude_dir),
        "GEMINI_CLI_HOME": str(gemini_home),
        "CODEX_HOME": str(codex_home),
    }
    for host in ("claude", "gemini", "codex"):
        assert rune(home, "install", host, **extra).returncode == 0
    assert (claude_dir / "commands" / "rune.md").is_file()
    assert mcp_entry("claude", claude_dir / ".claude.json")["args"] == LAUNCH[1:]
    assert (gemini_home / ".gemini" / "commands" / "rune.toml").is_file()
    assert (codex_home / "skills" / "rune" / "SKILL.md").is_file()
    assert mcp_entry("codex", codex_home / "config.toml")["tool_timeout_sec"] >= 600
    assert not (home / ".claude").exists() and not (home / ".gemini").exists()


def test_the_packaged_skill_is_skill_md_itself() -> None:
    packaged = ROOT / "rune_council" / "hosts" / "assets" / "SKILL.md"
    assert packaged.read_bytes() == (ROOT / "skill" / "SKILL.md").read_bytes(), (
        "copy skill/SKILL.md to rune_council/hosts/assets/SKILL.md"
    )


# --------------------------------------------------------------------------- idempotence


@pytest.mark.parametrize("host", ["claude", "gemini", "codex"])
def test_installing_twice_changes_nothing(home: Path, host: str) -> None:
    assert rune(home, "install", host).returncode == 0
    before = tree(home)
    again = rune(home, "install", host)
    assert again.returncode == 0, again.stderr
    assert tree(home) == before  # same bytes, not even rewritten
    *changes, checked, summary = again.stdout.strip().splitlines()
    assert summary == f"nothing to change for {host} (user)"
    assert checked == f"the MCP server starts ({shlex.join(LAUNCH)})"
    assert all(line.startswith("unchanged") for line in changes)


# --------------------------------------------------------------------------- uninstall


def _users_own_config(host: str, home: Path) -> Path:
    config = home / USER_CONFIG[host]
    config.parent.mkdir(parents=True, exist_ok=True)
    if host == "codex":
        config.write_text('model = "o3"\n\n[mcp_servers.docs]\ncommand = "docs-server"\n')
    else:
        config.write_text(
            json.dumps({"theme": "dark", "mcpServers": {"docs": {"command": "docs-server"}}})
        )
    return config


@pytest.mark.parametrize("host", ["claude", "gemini", "codex"])
def test_uninstall_removes_exactly_what_was_installed(home: Path, host: str) -> None:
    config = _users_own_config(host, home)
    original = config.read_text()
    (home / "notes.txt").write_text("mine")
    before = {k: v[0] for k, v in tree(home).items()}

    assert rune(home, "install", host).returncode == 0
    merged = config.read_text()
    assert "docs-server" in merged and "council" in merged

    out = rune(home, "install", host, "--uninstall")
    assert out.returncode == 0, out.stderr
    after = {k: v[0] for k, v in tree(home).items()}
    assert set(after) == set(before)
    if host == "codex":
        assert config.read_text() == original  # the user's own lines, byte for byte
    else:
        assert json.loads(config.read_text()) == json.loads(original)
    # Directories the install created are gone; the user's own are kept.
    assert not (home / USER_FILES[host][1]).parent.exists()
    assert (home / USER_CONFIG[host]).parent.exists()
    assert "removed rune-council from" in out.stdout


def test_uninstall_removes_a_config_file_it_created_and_empty_containers_it_made(
    home: Path,
) -> None:
    settings = home / ".gemini" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"general": {"vimMode": true}}')
    assert rune(home, "install", "gemini").returncode == 0
    assert rune(home, "install", "claude").returncode == 0
    assert rune(home, "install", "gemini", "--uninstall").returncode == 0
    assert rune(home, "install", "claude", "--uninstall").returncode == 0
    # mcpServers was made by the install, so it goes; the user's key stays.
    assert json.loads(settings.read_text()) == {"general": {"vimMode": True}}
    assert not (home / ".claude.json").exists()
    assert not (home / ".claude").exists()


def test_uninstall_keeps_what_the_user_changed_since_until_forced(home: Path) -> None:
    assert rune(home, "install", "claude").returncode == 0
    command = home / ".claude" / "commands" / "rune.md"
    command.write_text(command.read_text() + "\nMy own addition.\n")
    config = home / ".claude.json"
    doc = json.loads(config.read_text())
    doc["mcpServers"]["council"]["env"] = {"RUNE_COUNCIL_ALLOW_EXTERNAL": "1"}
    config.write_text(json.dumps(doc))

    out = rune(home, "install", "claude", "--uninstall")
    assert out.returncode == 0, out.stderr
    assert command.is_file() and "My own addition." in command.read_text()
    assert "council" in json.loads(config.read_text())["mcpServers"]
    assert not (home / ".claude" / "skills" / "rune-council").exists()
    kept = [line for line in out.stdout.splitlines() if line.startswith("kept")]
    assert len(kept) == 2 and all("changed since it was installed" in k for k in kept)

    forced = rune(home, "install", "claude", "--uninstall", "--force")
    assert forced.returncode == 0, forced.stderr
    assert not command.exists() and not config.exists()
    assert rune(home, "install", "claude", "--uninstall").stdout.startswith("nothing is recorded")


def test_uninstall_with_nothing_installed_says_so(home: Path) -> None:
    out = rune(home, "install", "gemini", "--uninstall")
    assert out.returncode == 0
    assert out.stdout.splitlines()[0].startswith("nothing is recorded as installed for gemini")
    assert tree(home) == {}


# --------------------------------------------------------------------------- dry run


@pytest.mark.parametrize("host", ["claude", "gemini", "codex"])
def test_dry_run_says_what_would_change_and_changes_nothing(home: Path, host: str) -> None:
    _users_own_config(host, home)
    before = tree(home)
    out = rune(home, "install", host, "--dry-run")
    assert out.returncode == 0, out.stderr
    assert tree(home) == before
    lines = out.stdout.splitlines()
    for rel in USER_FILES[host]:
        assert any(line.startswith("would create") and str(home / rel) in line for line in lines)
    assert any(
        line.startswith("would update") and str(home / USER_CONFIG[host]) in line for line in lines
    )
    assert lines[-1] == f"dry run: nothing was changed for {host} (user)"
    assert lines[-2] == f"the MCP server starts ({shlex.join(LAUNCH)})"

    assert rune(home, "install", host).returncode == 0
    installed = tree(home)
    out = rune(home, "install", host, "--uninstall", "--dry-run")
    assert out.returncode == 0 and tree(home) == installed
    assert sum(line.startswith("would remove") for line in out.stdout.splitlines()) == 3


def test_json_output_lists_every_change(home: Path) -> None:
    out = rune(home, "install", "gemini", "--dry-run", "--json")
    doc = json.loads(out.stdout)
    assert doc["dry_run"] is True and doc["changed"] is True and doc["scope"] == "user"
    assert {c["action"] for c in doc["changes"]} == {"create"}
    assert {Path(c["path"]).name for c in doc["changes"]} == {
        "SKILL.md",
        "rune.toml",
        "settings.json",
        "gemini.json",
    }


# --------------------------------------------------------------------------- refusing to overwrite


def test_a_file_the_user_wrote_is_not_overwritten_and_nothing_else_is_written(home: Path) -> None:
    mine = home / ".claude" / "commands" / "rune.md"
    mine.parent.mkdir(parents=True)
    mine.write_text("my own /rune command\n")
    before = tree(home)
    out = rune(home, "install", "claude")
    assert out.returncode == 2
    [line] = out.stderr.strip().splitlines()
    assert str(mine) in line and "a file rune did not write" in line and "--force" in line
    assert tree(home) == before  # not the skill, not ~/.claude.json, not a manifest

    forced = rune(home, "install", "claude", "--force")
    assert forced.returncode == 0, forced.stderr
    assert "$ARGUMENTS" in mine.read_text()
    assert any(
        line.startswith("replaced") and str(mine) in line for line in forced.stdout.splitlines()
    )


def test_an_mcp_entry_the_user_wrote_is_not_overwritten_without_force(home: Path) -> None:
    config = home / ".gemini" / "settings.json"
    config.parent.mkdir()
    config.write_text(json.dumps({"mcpServers": {"council": {"command": "my-council"}}}))
    out = rune(home, "install", "gemini")
    assert out.returncode == 2 and "an entry rune did not write" in out.stderr
    assert json.loads(config.read_text())["mcpServers"]["council"] == {"command": "my-council"}
    assert not (home / ".gemini" / "commands").exists()
    assert rune(home, "install", "gemini", "--force").returncode == 0
    assert mcp_entry("gemini", config)["args"] == LAUNCH[1:]


def test_a_symlink_in_the_way_is_written_through_only_with_force_and_stays_a_link(
    home: Path, tmp_path: Path
) -> None:
    target = tmp_path / "elsewhere.md"
    target.write_text("keep me")
    link = home / ".gemini" / "commands" / "rune.toml"
    link.parent.mkdir(parents=True)
    link.symlink_to(target)
    out = rune(home, "install", "gemini")
    assert out.returncode == 2 and f"the symlink's target {target}" in out.stderr
    assert target.read_text() == "keep me"
    assert rune(home, "install", "gemini", "--force").returncode == 0
    assert link.is_symlink() and target.read_text() != "keep me"


def test_codex_table_the_user_wrote_is_never_rewritten(home: Path) -> None:
    config = home / ".codex" / "config.toml"
    config.parent.mkdir()
    original = '[mcp_servers.council]\ncommand = "mine"\n'
    config.write_text(original)
    for extra in ((), ("--force",)):
        out = rune(home, "install", "codex", *extra)
        assert out.returncode == 2, out.stdout
        assert "remove it by hand" in out.stderr
        assert config.read_text() == original


def test_a_config_file_that_cannot_be_parsed_is_left_alone(home: Path) -> None:
    settings = home / ".gemini" / "settings.json"
    settings.parent.mkdir()
    text = '{\n  // my comment\n  "theme": "dark"\n}\n'
    settings.write_text(text)
    out = rune(home, "install", "gemini", "--force")
    assert out.returncode == 2
    [line] = out.stderr.strip().splitlines()
    assert "is not JSON" in line and "by hand" in line
    assert settings.read_text() == text and not (home / ".gemini" / "skills").exists()


def test_an_unknown_host_is_one_clear_line(home: Path) -> None:
    out = rune(home, "install", "emacs")
    assert out.returncode == 2
    assert out.stderr.strip() == (
        "rune council: unknown host 'emacs'; choose one of claude, codex, gemini"
    )


# --------------------------------------------------------------------------- the command text


def test_claude_command_passes_the_arguments_to_the_model_only(home: Path) -> None:
    assert rune(home, "install", "claude").returncode == 0
    text = (home / ".claude" / "commands" / "rune.md").read_text()
    front, _body = text.split("---\n")[1:3]
    # The council's own tools and nothing else: no pre-allowed shell.
    assert "allowed-tools: mcp__council__convene, mcp__council__submit_answers\n" in front
    assert text.count("$ARGUMENTS") == 1
    # `!` followed by a backtick runs a shell command when Claude Code expands a command.
    assert "!`" not in text


def test_gemini_command_is_valid_toml_with_no_shell_or_file_injection(home: Path) -> None:
    assert rune(home, "install", "gemini").returncode == 0
    doc = tomllib.loads((home / ".gemini" / "commands" / "rune.toml").read_text())
    assert set(doc) == {"description", "prompt"}
    prompt = doc["prompt"]
    assert prompt.count("{{args}}") == 1
    assert "!{" not in prompt and "@{" not in prompt
    assert "mcp_council_convene" in prompt


@pytest.mark.parametrize("host", ["claude", "gemini", "codex"])
def test_the_command_tells_the_model_how_to_report(home: Path, host: str) -> None:
    assert rune(home, "install", host).returncode == 0
    text = (home / USER_FILES[host][1]).read_text()
    for needed in (
        "decorrelation",
        "NO_DECORRELATION",
        "consensus",
        "needs_decision",
        "voices_dropped",
        "Supplying subagents",
        "--yes",
    ):
        assert needed in text, needed
    assert "Never call their agreement consensus" in text.replace("\n", " ")


HOSTILE = "Is it safe to run \"$(touch PWNED)\" and `touch PWNED2` on the orders table? It's 'fine'"


def _shell_recipe(command_text: str) -> str:
    """The here-document the command tells the model to run when there is no MCP tool."""
    lines = command_text.splitlines()
    start = next(i for i, line in enumerate(lines) if "rune council - --json" in line)
    return "\n".join(line.strip() for line in lines[start : start + 3])


def test_the_shell_recipe_in_the_command_delivers_a_hostile_question_as_text(
    home: Path, tmp_path: Path
) -> None:
    assert rune(home, "install", "claude").returncode == 0
    recipe = _shell_recipe((home / ".claude" / "commands" / "rune.md").read_text())
    script = recipe.replace("[options]", "--id hostile --yes").replace(
        "<the question, exactly as typed>", HOSTILE
    )
    assert script.count("\n") == 2, script
    work = tmp_path / "work"
    bin_dir = tmp_path / "bin"
    for name, stance in (("claude", "NO"), ("codex", "NO"), ("gemini", "YES")):
        install_fake(bin_dir, name, answer=answer(HOSTILE, stance, [claim("Orders table risk")]))
    work.mkdir()
    rune_bin = Path(PY).parent
    out = subprocess.run(
        ["bash", "-c", script],
        cwd=work,
        env={**_env(home), "PATH": f"{rune_bin}:{path_with(bin_dir)}"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shutil.which("rune", path=str(rune_bin)), "rune is not installed beside the interpreter"
    assert out.returncode in (0, 1), out.stderr
    assert not (work / "PWNED").exists() and not (work / "PWNED2").exists()
    printed = json.loads(out.stdout)
    run_file = work / ".rune" / "council" / "run-hostile.json"
    doc = json.loads(run_file.read_text())
    jsonschema.validate(doc, council_result_schema())
    assert doc["request"]["question"] == HOSTILE == printed["request"]["question"]
