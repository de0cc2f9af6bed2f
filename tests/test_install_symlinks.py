"""`rune council install` into dotfiles a dotfile manager keeps as symlinks (stow, chezmoi):
the link stays a link, the file it points to gets the entry, and --uninstall gives that
file back byte for byte. A link to nothing, or to something that is not a file, is refused
with one line before anything is written; a project install never reaches outside the
project through a link. Every install runs as a user runs it, in a fresh HOME.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

PY = sys.executable
LAUNCH = [PY, "-m", "rune_council.cli", "council", "mcp"]
USER_CONFIG = {
    "claude": ".claude.json",
    "gemini": ".gemini/settings.json",
    "codex": ".codex/config.toml",
}
# Each host's own file as the host writes it: Claude Code and Gemini CLI with
# JSON.stringify(doc, null, 2) (Gemini adds a final newline), codex as hand-kept TOML.
ORIGINAL = {
    "claude": json.dumps(
        {
            "numStartups": 12,
            "projects": {"/home/me/src": {"allowedTools": [], "mcpServers": {}}},
            "mcpServers": {"mine": {"type": "stdio", "command": "my-server", "args": []}},
            "userID": "0f3c…",
        },
        indent=2,
        ensure_ascii=False,
    ),
    "gemini": json.dumps({"general": {"vimMode": True}, "theme": "GitHub"}, indent=2) + "\n",
    "codex": '# my codex settings\nmodel = "gpt-5"\n\n[mcp_servers.mine]\ncommand = "my-server"\n',
}


def rune(
    home: Path, *args: str, cwd: Path | None = None, **extra: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "rune_council.cli", "council", *args],
        cwd=cwd or home,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), **extra},
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def council_entry(host: str, text: str) -> Any:
    if host == "codex":
        return tomllib.loads(text)["mcp_servers"]["council"]
    return json.loads(text)["mcpServers"]["council"]


def link(at: Path, target: Path) -> None:
    """A relative link, as stow makes them."""
    at.parent.mkdir(parents=True, exist_ok=True)
    at.symlink_to(os.path.relpath(target, at.parent))


def files_under(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.mark.parametrize("host", ["claude", "gemini", "codex"])
def test_a_symlinked_host_config_is_written_through_and_given_back_byte_for_byte(
    home: Path, tmp_path: Path, host: str
) -> None:
    dotfiles = tmp_path / "dotfiles"
    target = dotfiles / Path(USER_CONFIG[host]).name
    target.parent.mkdir()
    target.write_text(ORIGINAL[host], encoding="utf-8")
    target.chmod(0o600)
    config = home / USER_CONFIG[host]
    link(config, target)
    pointed = os.readlink(config)

    installed = rune(home, "install", host)
    assert installed.returncode == 0, installed.stderr
    assert config.is_symlink() and os.readlink(config) == pointed
    entry = council_entry(host, target.read_text("utf-8"))
    assert [entry["command"], *entry["args"]] == LAUNCH
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(p.name for p in dotfiles.iterdir()) == [target.name]  # no temporary left
    # The user's own entries are all still there.
    if host == "claude":
        assert json.loads(target.read_text("utf-8"))["mcpServers"]["mine"]["command"] == (
            "my-server"
        )

    removed = rune(home, "install", host, "--uninstall")
    assert removed.returncode == 0, removed.stderr
    assert config.is_symlink() and os.readlink(config) == pointed
    assert target.read_bytes() == ORIGINAL[host].encode("utf-8")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_a_link_to_nothing_or_to_a_directory_is_refused_before_anything_is_written(
    home: Path, tmp_path: Path
) -> None:
    config = home / ".claude.json"
    link(config, tmp_path / "dotfiles" / "not-there.json")
    out = rune(home, "install", "claude", "--force")
    assert out.returncode == 2
    [line] = out.stderr.strip().splitlines()
    assert str(config) in line and "symlink" in line and "does not exist" in line
    assert config.is_symlink() and not config.exists()
    assert not (home / ".claude").exists()  # not even the skill: nothing was written
    assert not (tmp_path / "dotfiles").exists()

    config.unlink()
    (tmp_path / "a-dir").mkdir()
    link(config, tmp_path / "a-dir")
    out = rune(home, "install", "claude", "--force")
    assert out.returncode == 2
    [line] = out.stderr.strip().splitlines()
    assert "symlink" in line and "not a regular file" in line
    assert not (home / ".claude").exists() and list((tmp_path / "a-dir").iterdir()) == []


def test_symlinked_skill_and_command_files_stay_links_through_install_and_uninstall(
    home: Path, tmp_path: Path
) -> None:
    mine = tmp_path / "dotfiles" / "rune.md"
    mine.parent.mkdir()
    mine.write_text("my own /rune command\n", encoding="utf-8")
    command = home / ".claude" / "commands" / "rune.md"
    link(command, mine)

    refused = rune(home, "install", "claude")
    assert refused.returncode == 2
    assert "a file rune did not write" in refused.stderr and str(mine) in refused.stderr
    assert mine.read_text("utf-8") == "my own /rune command\n"

    forced = rune(home, "install", "claude", "--force")
    assert forced.returncode == 0, forced.stderr
    assert command.is_symlink()
    assert "mcp__council__convene" in mine.read_text("utf-8")

    removed = rune(home, "install", "claude", "--uninstall")
    assert removed.returncode == 0, removed.stderr
    # Neither the user's link nor the file in their dotfiles is taken away; the rest is.
    assert command.is_symlink() and mine.is_file()
    assert "symlink" in removed.stdout and str(command) in removed.stdout
    assert not (home / ".claude" / "skills").exists()
    assert not (home / ".claude.json").exists()  # rune made it, and it held only the entry


def test_a_project_install_never_writes_outside_the_project_through_a_link(
    home: Path, tmp_path: Path
) -> None:
    """A cloned repository can ship its .claude/ or .mcp.json as links into the user's home."""
    project = tmp_path / "project"
    project.mkdir()
    users_claude = home / ".claude"
    users_claude.mkdir()
    (project / ".claude").symlink_to(users_claude)
    victim = home / "settings.json"
    victim.write_text('{"keep": true}\n', encoding="utf-8")
    (project / ".mcp.json").symlink_to(victim)
    before = files_under(home)

    out = rune(home, "install", "claude", "--project", cwd=project)
    assert out.returncode == 2
    [line] = out.stderr.strip().splitlines()
    assert "outside the project" in line
    assert files_under(home) == before
    assert list(users_claude.iterdir()) == []
    assert (project / ".mcp.json").is_symlink() and (project / ".claude").is_symlink()
