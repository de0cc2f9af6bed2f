"""A ``.rune`` that came with a cloned repository as a symlink sends nothing anywhere.

git keeps symlinks, so a repository can ship ``.rune`` (or ``.rune/council``,
``.rune/batch``) pointing at a directory of the user's choosing... of the attacker's
choosing. Every command run in that project refuses with one line and writes nothing
through the link; a directory the user names with ``--rune-dir`` is theirs, link or not.
The commands run as real subprocesses.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.bin import install_fake, path_with
from tests.helpers import PLAN, answer, claim

pytestmark = [pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[1]
Q = "Should we shard the orders table?"
GOOD = answer(
    Q, "NO", [claim("No rollback", ref="plan.md:6", quote="No rollback step is defined.")]
)


def _project(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A cloned project (a real repository with a plan and a batch of items), the directory
    its links point at, and an environment with a fake CLI that answers."""
    proj = tmp_path / "proj"
    proj.mkdir()
    subprocess.run(["git", "init", "-q", str(proj)], check=True)
    (proj / "plan.md").write_text(PLAN)
    (proj / "items.jsonl").write_text(json.dumps({"id": "b1", "question": Q}) + "\n")
    sink = tmp_path / "sink"
    sink.mkdir()
    home = tmp_path / "home"
    for name in ("claude", "codex"):
        install_fake(home / "bin", name, answer=GOOD)
    env = {
        "PATH": path_with(home / "bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TMPDIR": str(tmp_path),
        "PYTHONPATH": str(ROOT),
        "RUNE_COUNCIL_LOGIN_SHELL": "0",
        "RUNE_COUNCIL_ALLOW_EXTERNAL": "1",
    }
    return proj, sink, env


def _rune(proj: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rune_council.cli", "council", *args],
        cwd=proj,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def _everything(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


COMMANDS = {
    "ask": (Q, "--artifact", "plan.md", "--id", "r1"),
    "stats": ("stats",),
    "batch": ("batch", "items.jsonl"),
    "list": ("list",),
    "serve": ("serve", "--port", "0"),
    "mcp": ("mcp",),
}


def _refused(out: subprocess.CompletedProcess[str], link: Path) -> None:
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr and "internal error" not in out.stderr
    # One line says why (a batch has printed its empty progress line before it).
    lines = [ln for ln in out.stderr.strip().splitlines() if not ln.startswith("batch: 0/")]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"rune council: {link} is a symbolic link"), lines


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_rune_dir_that_is_a_symlink_is_refused(tmp_path: Path, command: str) -> None:
    proj, sink, env = _project(tmp_path)
    (sink / "council").mkdir()
    (proj / ".rune").symlink_to(sink)
    _refused(_rune(proj, env, *COMMANDS[command]), proj / ".rune")
    assert _everything(sink) == ["council"]


@pytest.mark.parametrize(
    ("inner", "command"),
    [
        ("council", "ask"),
        ("council", "stats"),
        ("council", "batch"),
        ("council", "serve"),
        ("batch", "batch"),
    ],
)
def test_a_run_or_batch_dir_that_is_a_symlink_is_refused(
    tmp_path: Path, inner: str, command: str
) -> None:
    proj, sink, env = _project(tmp_path)
    (proj / ".rune").mkdir()
    (proj / ".rune" / inner).symlink_to(sink)
    _refused(_rune(proj, env, *COMMANDS[command]), proj / ".rune" / inner)
    assert _everything(sink) == []


def test_a_rune_dir_the_user_names_may_be_a_symlink(tmp_path: Path) -> None:
    """The user's own choice is followed: their runs land where their link points."""
    proj, sink, env = _project(tmp_path)
    named = tmp_path / "my-runs"
    named.symlink_to(sink)
    out = _rune(proj, env, *COMMANDS["ask"], "--rune-dir", str(named))
    assert out.returncode == 0, out.stderr
    assert (sink / "council" / "run-r1.json").is_file()
    out = _rune(proj, {**env, "RUNE_COUNCIL_DIR": str(named)}, "stats")
    assert out.returncode == 0, out.stderr
    assert os.path.isfile(sink / "stats-index.json")


def test_a_ray_task_sends_back_no_file_through_a_link_in_its_run_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task hands its node's run files back to the driver; a link where a run file should
    be is refused by the one run-file reader, never read through to the file it names."""
    import tempfile

    from rune_council import CouncilOptions
    from rune_council.batch.ray_runner import _node_rune_dir, council_task
    from tests import voice_dirs

    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", voice_dirs.pinned_env(temp)["XDG_CACHE_HOME"])
    secret = tmp_path / "private-notes.txt"
    secret.write_text("the user's private notes\n")
    council = _node_rune_dir() / "council"
    council.mkdir(parents=True)
    (council / "run-t1.json").symlink_to(secret)
    # A request the council refuses at once, so the task goes straight to sending back.
    files, error = council_task({"id": "t1", "question": ""}, CouncilOptions(runtimes=[]), {})
    assert files == {}
    assert error is not None and "symlink" in error, error
    assert secret.read_text() == "the user's private notes\n"
