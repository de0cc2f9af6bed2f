"""`rune council demo`: the whole pipeline on simulated voices, on a machine with no AI CLI."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import jsonschema

from rune_council.runs import load

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "contracts" / "council-result.schema.json").read_text())
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def bare_env(tmp: Path) -> dict[str, str]:
    # Nothing but the system: no AI CLI, no consent variable, no key of any kind.
    return {"PATH": "/usr/bin:/bin", "HOME": str(tmp), "LANG": "C.UTF-8"}


def demo(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rune_council.cli", "council", "demo", *args],
        cwd=tmp,
        env=bare_env(tmp),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_demo_shows_consensus_dissent_and_a_drop(tmp_path: Path) -> None:
    out = demo(tmp_path, "--json", "--pace", "0", "--id", "d1")
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""  # --json: nothing but the JSON
    doc = json.loads(out.stdout)
    jsonschema.validate(doc, SCHEMA)
    assert doc["decorrelation"] == "MULTI_FAMILY"
    assert doc["distinct_families"] == ["anthropic", "google", "openai"]
    [consensus] = doc["agreement"]["consensus_claims"]
    assert consensus["families"] == ["anthropic", "openai"]
    assert consensus["matched_by"]["method"] == "anchor"
    labels = [d["label"] for d in doc["agreement"]["dissent"]]
    assert labels.count("disagreement") == 2 and "framing-sensitive" in labels
    [dropped] = doc["voices_dropped"]
    assert dropped["voice_id"] == "v4" and "simulated outage" in dropped["reason"]
    assert doc["needs_decision"] is True
    # The run file is the same result, its artifact kept beside it (contract 2.8) and put
    # back by the reader.
    on_disk = load(tmp_path / ".rune" / "council" / "run-d1.json").model_dump(mode="json")
    assert on_disk.pop("artifact_file") is not None and doc.pop("artifact_file") is None
    assert on_disk == doc


def test_demo_takes_a_few_seconds_and_streams_progress_as_plain_lines(tmp_path: Path) -> None:
    started = time.monotonic()
    out = demo(tmp_path, "--id", "d2")
    took = time.monotonic() - started
    assert out.returncode == 0, out.stderr
    assert 2.0 < took < 30, took  # the voices' delays are real; the margin is wide
    assert out.stdout.startswith("## Council Result: d2\n- **Decorrelation**: MULTI_FAMILY")
    progress = out.stderr.splitlines()
    assert "simulated voices (no AI CLI, no network)" in progress[0]
    # One line per transition, in the order the voices resolve (the failing one first).
    finished = [line.split()[0] for line in progress if re.search(r"\b(complete|dropped)\b", line)]
    assert finished[:4] == ["v4", "v1", "v2", "v3"]
    assert any(line.startswith("council d2: complete: MULTI_FAMILY") for line in progress)
    assert "\x1b[" not in out.stderr  # no terminal: no escape sequences


def test_demo_run_file_verifies(tmp_path: Path) -> None:
    assert demo(tmp_path, "--pace", "0", "--id", "d3").returncode == 0
    verified = subprocess.run(
        [sys.executable, "-m", "rune_council.cli", "council", "verify", "d3"],
        cwd=tmp_path,
        env=bare_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "reproduced" in verified.stdout


def test_demo_refuses_an_unsafe_id_in_one_line(tmp_path: Path) -> None:
    out = demo(tmp_path, "--id", "../x", "--pace", "0")
    assert out.returncode == 2
    [line] = out.stderr.strip().splitlines()
    assert "not a safe file name" in line


def read_pty(
    argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 60
) -> tuple[int, str]:
    pid, fd = pty.fork()
    if pid == 0:  # the child: a terminal on all three streams
        os.chdir(cwd)
        os.execve(argv[0], argv, env)
    chunks = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), b"".join(chunks).decode("utf-8", "replace")


def test_on_a_terminal_the_progress_is_a_live_table(tmp_path: Path) -> None:
    env = {**bare_env(tmp_path), "TERM": "xterm-256color", "COLUMNS": "150", "LINES": "40"}
    code, screen = read_pty(
        [sys.executable, "-m", "rune_council.cli", "council", "demo", "--id", "tty"],
        tmp_path,
        env,
    )
    assert code == 0, screen
    plain = ANSI.sub("", screen)
    # The table is redrawn in place (cursor up + erase line) rather than appended to.
    assert screen.count("\x1b[1A\x1b[2K") > 10
    header = re.search(r"voice +family +status +time +runtime", plain)
    assert header is not None, plain
    final_table = plain[plain.rindex(header.group()) :]
    for row in ("v1 ", "v2 ", "v3 ", "v4 "):
        assert row in final_table
    assert final_table.count("complete") >= 3 and "dropped" in final_table
    assert "running" in plain  # seen while the voices were working
    assert "## Council Result: tty" in final_table  # the result follows the final table
