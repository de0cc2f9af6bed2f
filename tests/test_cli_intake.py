"""`rune council "<q>"` reads its flags through the one intake: a mistake is told at the flag
that made it, and every rounds option the other doors take is a flag too.

Each case runs the real command in a process of its own, with fake AI CLIs answering.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.bin import install_fake, path_with
from tests.helpers import QUESTION, ROLLBACK, UNDO, answer, claim


def project(tmp: Path) -> Path:
    work = tmp / "work"
    work.mkdir()
    install_fake(work / "bin", "claude", answer=answer(QUESTION, "NO", [ROLLBACK]))
    install_fake(work / "bin", "codex", answer=answer(QUESTION, "NO", [UNDO]))
    install_fake(work / "bin", "gemini", answer=answer(QUESTION, "YES", [claim("Fine as is")]))
    return work


def rune(work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": path_with(work / "bin"),
        "HOME": str(work),
        "LANG": "C.UTF-8",
        "RUNE_COUNCIL_CONFIG_DIR": str(work / "user-config"),
    }
    return subprocess.run(
        [sys.executable, "-m", "rune_council.cli", "council", *args],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--rounds", "11"], "--rounds: Input should be less than or equal to 10"),
        (["--vote-threshold", "2"], "--vote-threshold: Input should be less than or equal to 1"),
        (["--n", "0"], "--n: Input should be greater than or equal to 2"),
        (["--timeout", "0"], "--timeout: Input should be greater than 0"),
        (["--artifact", os.devnull], f"--artifact: cannot read artifact '{os.devnull}'"),
        (["--template", "securty-review"], "--template: no template named 'securty-review'"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_flag_and_nothing_runs(
    tmp_path: Path, flags: list[str], said: str
) -> None:
    work = project(tmp_path)
    out = rune(work, QUESTION, *flags, "--id", "bad", "--yes")
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith(f"rune council: {said}"), out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert not (work / ".rune" / "council" / "run-bad.json").exists()


def test_rounds_stop_at_the_convergence_threshold_given_on_the_command_line(
    tmp_path: Path,
) -> None:
    work = project(tmp_path)
    out = rune(
        work,
        QUESTION,
        "--rounds",
        "3",
        "--convergence-threshold",
        "0.4",
        "--on-divergence",
        "continue",
        "--id",
        "conv",
        "--yes",
        "--json",
    )
    assert out.returncode in (0, 1), out.stderr
    doc = json.loads((work / ".rune" / "council" / "run-conv.json").read_text(encoding="utf-8"))
    rounds = doc["request"]["deliberation"]["rounds"]
    assert rounds == {
        **rounds,
        "max_rounds": 3,
        "convergence_threshold": 0.4,
        "on_divergence": "continue",
    }
    # The contract's timeout holds when none is given, as in every other door.
    assert doc["request"]["budget"]["per_voice_timeout_s"] == 180.0
