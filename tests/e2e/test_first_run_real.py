"""The first run on a fresh machine, with the real pinned claude, codex and gemini.

With an empty HOME and no credentials, none of them can answer: the council must not wait
on them. It ends at once with a logged-out reason and the fix for each, and ``doctor`` says
the same. With credentials configured the way the rest of tests/e2e configures them, all
three are ready and the council answers through all three. Only these three CLIs are on
PATH, so what is measured is theirs; nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.clis import CLI_NAMES, INSTALL_HINT, cli_environment, node_bin_dir
from tests.e2e.clis import real_clis_installed as installed
from tests.e2e.model_server import ANTHROPIC, GEMINI, OPENAI_RESPONSES, ModelServer
from tests.helpers import PLAN, QUESTION, ROLLBACK, answer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
FIXES = {
    "claude": "export ANTHROPIC_API_KEY=<your key>",
    "codex": "codex login",
    "gemini": "export GEMINI_API_KEY=<your key>",
}
CLI_FAMILY = {"claude": "anthropic", "codex": "openai", "gemini": "google"}


@pytest.fixture
def three(tmp_path: Path) -> Path:
    """A bin directory holding the three pinned CLIs and nothing else."""
    if not installed():
        pytest.fail(f"real CLIs not found in {node_bin_dir()}: {INSTALL_HINT}", pytrace=False)
    bin_dir = tmp_path / "three"
    bin_dir.mkdir()
    for name in CLI_NAMES:
        (bin_dir / name).symlink_to((node_bin_dir() / name).resolve())
    return bin_dir


def search_path(three: Path) -> str:
    # node for the CLIs, the system tools; none of the other CLIs tests/e2e installs.
    return os.pathsep.join([str(three), "/usr/local/bin", "/usr/bin", "/bin"])


@pytest.fixture
def empty_home(tmp_path: Path, three: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    return {
        "PATH": search_path(three),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TMPDIR": str(tmp_path),
        "PYTHONPATH": str(REPO),
        "RUNE_COUNCIL_ALLOW_EXTERNAL": "1",
    }


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as running:
        yield running


def rune(
    cwd: Path, env: dict[str, str], *args: str
) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    ran = subprocess.run(
        [sys.executable, "-m", "rune_council.cli", "council", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    return ran, time.monotonic() - started


def work(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir(exist_ok=True)
    (path / "plan.md").write_text(PLAN, encoding="utf-8")
    return path


def test_with_an_empty_home_the_council_ends_at_once_with_a_fix_for_each(
    tmp_path: Path, empty_home: dict[str, str]
) -> None:
    cwd = work(tmp_path)
    ran, elapsed = rune(cwd, empty_home, QUESTION, "--artifact", "plan.md", "--timeout", "60",
                        "--id", "first-run")  # fmt: skip
    assert ran.returncode == 1, f"{ran.stdout}\n{ran.stderr}"
    assert elapsed < 10, f"took {elapsed:.1f}s\n{ran.stderr}"
    for name, fix in FIXES.items():
        assert f"{name}: {fix}" in ran.stderr, ran.stderr
    result: dict[str, Any] = json.loads(
        (cwd / ".rune" / "council" / "run-first-run.json").read_text(encoding="utf-8")
    )
    reasons = {n.split()[0]: n for n in result["notes"] if "not seated: logged out" in n}
    assert sorted(reasons) == sorted(FIXES), result["notes"]
    for name, fix in FIXES.items():
        assert reasons[name].endswith(f"to fix: {fix}")
        assert "\n" not in reasons[name]
    detected = {d["runtime"]: d for d in result["runtime_report"]["detected"]}
    assert {n: detected[n]["auth"] for n in FIXES} == dict.fromkeys(FIXES, "logged-out")
    assert result["runtime_report"]["used"] == []


def test_doctor_says_the_same_on_an_empty_home(tmp_path: Path, empty_home: dict[str, str]) -> None:
    ran, _ = rune(work(tmp_path), empty_home, "doctor", "--json")
    assert ran.returncode == 1, ran.stderr
    doc = json.loads(ran.stdout)
    rows = {r["name"]: r for r in doc["runtimes"]}
    for name, fix in FIXES.items():
        assert rows[name]["found"] is True and rows[name]["version"], rows[name]
        assert rows[name]["auth"] == "logged-out"
        assert rows[name]["fix"] == fix
    assert doc["ready_families"] == []
    assert doc["fixes"] == list(FIXES.values())


def test_with_credentials_all_three_are_ready_and_the_council_runs(
    tmp_path: Path, three: Path, server: ModelServer
) -> None:
    env = cli_environment(tmp_path, server)
    env["PATH"] = search_path(three)
    env["PYTHONPATH"] = str(REPO)
    env["RUNE_COUNCIL_ALLOW_EXTERNAL"] = "1"
    cwd = work(tmp_path)

    ran, _ = rune(cwd, env, "doctor", "--json")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    doc = json.loads(ran.stdout)
    rows = {r["name"]: r for r in doc["runtimes"]}
    assert {n: rows[n]["auth"] for n in FIXES} == dict.fromkeys(FIXES, "ready")
    assert doc["ready_families"] == sorted(CLI_FAMILY.values())

    for protocol, position in ((ANTHROPIC, "NO"), (OPENAI_RESPONSES, "NO"), (GEMINI, "NO")):
        server.answers[protocol] = answer(QUESTION, position, [ROLLBACK])
    ran, _ = rune(cwd, env, QUESTION, "--artifact", "plan.md", "--timeout", "60", "--json")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    result = json.loads(ran.stdout)
    assert sorted(result["runtime_report"]["used"]) == sorted(FIXES)
    assert result["decorrelation"] == "MULTI_FAMILY"
    assert not any("not seated" in n for n in result["notes"])
