"""Every directory a voice process is given can be told for this program's own, and none of
them lies where another local user can plant files.

The CLIs run as real subprocesses (fakes from tests/fakes, or a small shell script): what
they record about where they ran is what the assertions read.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rune_council import shapes
from rune_council.runtimes import lineage
from rune_council.runtimes.auth import AuthContext, run_status
from tests.fakes.bin import install_fake, path_with
from tests.helpers import PLAN, answer, claim

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX permissions"),
]

Q = "Should we shard the orders table?"
GOOD = answer(
    Q, "NO", [claim("No rollback", ref="plan.md:6", quote="No rollback step is defined.")]
)


def _council(work: Path, env: dict[str, str], run_id: str) -> dict[str, object]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "rune_council.cli",
            "council",
            Q,
            "--artifact",
            "plan.md",
            "--id",
            run_id,
            "--json",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads((work / ".rune" / "council" / f"run-{run_id}.json").read_text())
    assert isinstance(doc, dict)
    return doc


def _env(home: Path, bin_dir: Path, temp_root: Path, **extra: str) -> dict[str, str]:
    env = {
        "PATH": path_with(bin_dir),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TMPDIR": str(temp_root),
        "RUNE_COUNCIL_LOGIN_SHELL": "0",
        "RUNE_COUNCIL_ALLOW_EXTERNAL": "1",
        **extra,
    }
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def _calls(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines() if line]


# ------------------------------------------------ directories named after the voice marker


def test_the_schema_file_lies_in_a_directory_named_after_the_voice(tmp_path: Path) -> None:
    """A voice's prompt and schema files are in a directory the next reader of an abandoned
    run can tell for that run's own, and which is gone once the voice is."""
    (tmp_path / "plan.md").write_text(PLAN)
    temp_root = tmp_path / "tmp"
    temp_root.mkdir()
    log = tmp_path / "codex-calls"
    install_fake(
        tmp_path / "bin",
        "codex",
        answer=GOOD,
        argv_log=str(log),
        copy_file_arg="--output-schema",
    )
    install_fake(tmp_path / "bin", "claude", answer=GOOD)
    result = _council(tmp_path, _env(tmp_path, tmp_path / "bin", temp_root), "named")
    marker = result["orchestrator"]["voice_marker"]  # type: ignore[index]
    [call] = _calls(log)
    argv = call["argv"]
    assert isinstance(argv, list)
    schema = Path(argv[argv.index("--output-schema") + 1])
    assert json.loads(str(call["file"]))["type"] == "object"  # the file was there to read
    assert shapes.is_scratch_dir_name(schema.parent.name, marker), schema
    assert not schema.parent.exists()


def test_a_status_command_runs_in_a_directory_named_after_its_marker(tmp_path: Path) -> None:
    """Asking a CLI whether it is logged in starts a process too: its directory has the
    same shape, so a council killed mid-probe leaves nothing the sweep cannot tell."""
    seen = tmp_path / "cwd"
    status = tmp_path / "status"
    status.write_text(f'#!/bin/sh\npwd > "{seen}"\necho logged in\n')
    status.chmod(0o755)
    run = lineage.new_run_marker()
    ctx = AuthContext(path=str(status), env={"PATH": "/usr/bin:/bin"}, timeout_s=20)
    with lineage.run_marker(run):
        got = asyncio.run(run_status(ctx, ("login", "status")))
    assert got.exit_code == 0, got
    where = Path(seen.read_text().strip())
    assert shapes.is_scratch_dir_name(where.name, run), where
    assert not where.exists()
