"""The logged-out newcomer: every real pinned CLI installed, wrappers included, none set up.

An empty HOME, no credentials, nothing pointed at any server (offline: in CI the suite runs
in a network namespace with only loopback), and ``rune council "<q>" --yes``. Each CLI must
be found logged out before it is asked, so the council ends at once with one fix per CLI.
Shared by tests/e2e/test_first_run_real.py, which holds it to a wide bound, and
bench/first_run.py, which measures it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.e2e.clis import node_bin_dir
from tests.e2e.openai_clis import aider_bin_dir

REPO = Path(__file__).resolve().parents[2]
QUESTION = "Should we ship the plan as written?"
PLAN = "# Plan\n\n1. Migrate the orders table in place.\n2. Ship.\n"
# The one next step each CLI names when nothing is set up.
FIXES = {
    "claude": "export ANTHROPIC_API_KEY=<your key>",
    "codex": "codex login",
    "gemini": "export GEMINI_API_KEY=<your key>",
    "qwen": "qwen (then /auth to choose how it signs in)",
    "opencode": "opencode auth login",
    "aider": "export ANTHROPIC_API_KEY=<your key>",
    "cline": "cline auth",
}
INSTALL_HINT = "run tests/e2e/install.sh to install the pinned CLIs (npm) and aider (PyPI)"


def cli_path(name: str) -> Path:
    return (aider_bin_dir() if name == "aider" else node_bin_dir()) / name


def installed() -> bool:
    return all(cli_path(n).exists() for n in FIXES)


def every_cli(where: Path) -> Path:
    """A bin directory holding every pinned CLI and nothing else."""
    where.mkdir(parents=True, exist_ok=True)
    for name in FIXES:
        link = where / name
        if not link.exists():
            link.symlink_to(cli_path(name).resolve())
    return where


def environment(tmp: Path, bin_dir: Path) -> dict[str, str]:
    """A complete environment (not a patch of os.environ): a fresh HOME and none of the
    developer's keys, base URLs or proxies; node and the system tools on PATH."""
    home = tmp / "home"
    home.mkdir(mode=0o700, exist_ok=True)
    return {
        "PATH": os.pathsep.join([str(bin_dir), "/usr/local/bin", "/usr/bin", "/bin"]),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TMPDIR": str(tmp),
        "PYTHONPATH": str(REPO),
    }


def workdir(tmp: Path) -> Path:
    path = tmp / "work"
    path.mkdir(exist_ok=True)
    (path / "plan.md").write_text(PLAN, encoding="utf-8")
    return path


def convene(
    cwd: Path, env: dict[str, str], *args: str, timeout: float = 300
) -> tuple[subprocess.CompletedProcess[str], float]:
    """``rune council "<q>" --artifact plan.md --yes``, and the seconds to its exit."""
    started = time.monotonic()
    ran = subprocess.run(
        [sys.executable, "-m", "rune_council.cli", "council", QUESTION, "--artifact", "plan.md",
         "--yes", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return ran, time.monotonic() - started


def missing_fixes(stderr: str) -> list[str]:
    """The CLIs whose one fix the run did not print."""
    return [name for name, fix in FIXES.items() if f"  {name}: {fix}" not in stderr]
