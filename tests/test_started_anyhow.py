"""The suite passes however it is started: from a background job, SIGINT arrives ignored."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_ctrl_c_tests_pass_when_the_suite_starts_with_sigint_ignored() -> None:
    # The Ctrl-C test of the council, run by a pytest that inherits SIGINT ignored as a
    # background job's does.
    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/test_cli.py::test_ctrl_c_kills_every_voice_and_records_a_cancelled_run",
        ],
        cwd=ROOT,
        preexec_fn=_ignore_sigint,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert ran.returncode == 0, ran.stdout[-2000:]
