"""One exit-code table keyed by error class: a failing disk is not bad input."""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rune_council.core.errors import (
    CouncilError,
    EndpointCallError,
    ExitCode,
    NotImplementedModeError,
    RequestError,
    RunFileError,
    RunIdError,
    RuntimeConfigError,
    StorageError,
    exit_code_for,
    file_error,
)


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (RequestError("bad"), 2),
        (RunIdError("../x"), 2),
        (NotImplementedModeError("generate"), 2),
        (RuntimeConfigError("council.toml"), 2),
        (RunFileError("no run file"), 2),
        (StorageError("disk full"), 74),
        (EndpointCallError("503", kind="http_status", http_status=503), 69),
        (OSError(28, "No space left on device"), 74),
        (KeyboardInterrupt(), 130),
        (ZeroDivisionError(), 70),
    ],
)
def test_each_error_class_has_its_exit_code(error: BaseException, code: int) -> None:
    assert exit_code_for(error) == code


def test_every_library_error_class_is_in_the_table() -> None:
    def subclasses(cls: type) -> set[type]:
        found = set(cls.__subclasses__())
        for sub in list(found):
            found |= subclasses(sub)
        return found

    for cls in subclasses(CouncilError):
        if cls.__module__ != "rune_council.core.errors":
            continue  # defined elsewhere; it inherits its parent's code
        assert exit_code_for(cls.__new__(cls)) != ExitCode.INTERNAL, cls


def test_a_wrong_path_is_bad_input_and_a_failing_disk_is_an_io_error() -> None:
    missing = file_error("cannot read x", FileNotFoundError(2, "No such file or directory"))
    full = file_error("cannot write x", OSError(28, "No space left on device"))
    assert (type(missing), exit_code_for(missing)) == (RunFileError, 2)
    assert (type(full), exit_code_for(full)) == (StorageError, 74)
    assert str(full) == "cannot write x: No space left on device"


def _small_files_only() -> None:
    # Any file this process writes beyond 1 KiB fails with EFBIG, as on a full disk; the
    # signal that would kill it instead is ignored so the write returns the error.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))


def test_a_run_file_the_disk_refuses_exits_74_with_one_line(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "rune_council.cli", "council", "demo", "--pace", "0", "--json"],
        cwd=tmp_path,
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "RUNE_COUNCIL_DIR": str(tmp_path / ".rune"),
            "PYTHONDONTWRITEBYTECODE": "1",
        },
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_small_files_only,
    )
    assert out.returncode == 74, out.stderr
    [line] = out.stderr.strip().splitlines()
    assert line.startswith("rune council: cannot write ") and "File too large" in line
    assert "Traceback" not in out.stderr and out.stdout == ""


def test_the_mcp_door_reports_the_code_of_the_same_table() -> None:
    pytest.importorskip("mcp", reason="the mcp extra is part of the test install")
    from rune_council.mcp_server.server import error_result

    def said(exc: BaseException) -> str:
        [content] = error_result(exc).content
        assert content.type == "text"
        return content.text

    assert said(RequestError("no question")).endswith("[RequestError, CLI exit code 2]")
    assert said(StorageError("disk full")).endswith("[StorageError, CLI exit code 74]")
    assert "I/O error" in said(OSError(5, "Input/output error"))
    assert said(ZeroDivisionError("x")).endswith("[ZeroDivisionError, CLI exit code 70]")


def test_serve_refuses_a_bad_council_toml_with_the_bad_input_code(tmp_path: Path) -> None:
    rune = tmp_path / ".rune"
    rune.mkdir()
    (rune / "council.toml").write_text("[consnet]\nrounds = 2\n")
    out = subprocess.run(
        [sys.executable, "-m", "rune_council.serve", "--rune-dir", str(rune), "--port", "0"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2, out.stderr
    assert "consnet" in out.stderr and "Traceback" not in out.stderr
