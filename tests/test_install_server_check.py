"""`rune council install` starts the MCP server it registers, the way the host will, and
refuses (naming the extra) when it cannot; `--dry-run` says the same and fails the same.

A Python without the ``mcp`` extra is stood in for by a directory on PYTHONPATH whose
``mcp`` package fails to import exactly as a missing one does: the installer and the
server check are real subprocesses of the real interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(180)

LAUNCH = f"{sys.executable} -m rune_council.cli council mcp"
EXTRA = "pip install 'rune-council[mcp]'"


def without_mcp(tmp: Path) -> str:
    shadow = tmp / "no-mcp"
    (shadow / "mcp").mkdir(parents=True)
    (shadow / "mcp" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'mcp'\", name='mcp')\n", encoding="utf-8"
    )
    return str(shadow)


def rune(home: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), **extra}
    return subprocess.run(
        [sys.executable, "-m", "rune_council.cli", "council", *args],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


@pytest.mark.parametrize("host", ["claude", "gemini", "codex"])
def test_without_the_mcp_extra_install_refuses_and_says_which_extra(
    tmp_path: Path, host: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    shadow = without_mcp(tmp_path)
    out = rune(home, "install", host, PYTHONPATH=shadow)
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert out.stdout == ""
    line = out.stderr.strip()
    assert line.startswith(f"rune council: not installing into {host}: the MCP server ")
    assert f"({LAUNCH}) does not start" in line and "mcp is missing" in line
    assert EXTRA in line and f"{sys.executable} -m {EXTRA}" in line
    assert line.endswith("Nothing was changed")
    assert files(home) == []  # no skill, no command, no server entry, no record


def test_a_dry_run_says_so_too_and_fails_as_the_install_would(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    shadow = without_mcp(tmp_path)
    out = rune(home, "install", "claude", "--dry-run", PYTHONPATH=shadow)
    assert out.returncode == 2, (out.stdout, out.stderr)
    lines = out.stdout.splitlines()
    assert any(line.startswith("would create") for line in lines)
    (said,) = [line for line in lines if line.startswith("would fail: ")]
    assert f"the MCP server ({LAUNCH}) does not start" in said and EXTRA in said
    assert lines[-1] == "dry run: nothing was changed for claude (user)"
    assert files(home) == []

    shown = rune(home, "install", "claude", "--dry-run", "--json", PYTHONPATH=shadow)
    assert shown.returncode == 2
    doc = json.loads(shown.stdout)
    assert doc["server"]["starts"] is False and EXTRA in doc["server"]["detail"]


def test_with_the_extra_install_and_dry_run_say_the_server_starts(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    dry = rune(home, "install", "gemini", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["server"] == {
        "starts": True,
        "detail": f"the MCP server starts ({LAUNCH})",
    }
    out = rune(home, "install", "gemini")
    assert out.returncode == 0, out.stderr
    assert f"the MCP server starts ({LAUNCH})" in out.stdout.splitlines()
    # And the server it registered does answer --check the way the install ran it.
    entry = json.loads((home / ".gemini" / "settings.json").read_text())["mcpServers"]["council"]
    checked = subprocess.run(
        [entry["command"], *entry["args"], "--check"], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0 and checked.stdout.startswith("rune council mcp: ready")
