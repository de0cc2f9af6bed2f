"""The live table on a real terminal of a given size: what a person watching must always see.

``rune council demo`` runs on a pty whose window size is set with TIOCSWINSZ (no COLUMNS
variable: rich asks the terminal, as it does for a user). Every frame the live view drew is
read back and each voice's row checked for its id, family, status and time.
"""

from __future__ import annotations

import fcntl
import io
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console

from rune_council.cli.live import Board
from rune_council.core.contract import RunEvent
from rune_council.council import CouncilOptions, convene
from rune_council.demo import demo_request, demo_runtimes

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs a pty")

FAMILIES = {"v1": "anthropic", "v2": "openai", "v3": "google", "v4": "xai"}
STATUS = r"(?:[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] )?(queued|running|complete|dropped)"
TIME = r"(-|\d+\.\ds)"
ROW = re.compile(rf"^(v\d+)\s+(\S+)\s+{STATUS}\s+{TIME}(?:\s|$)")
# rich redraws the live table in place: back to the line start, then up and erase per line.
REDRAW = re.compile(r"\r\x1b\[2K(?:\x1b\[1A\x1b\[2K)*")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def on_pty(tmp: Path, columns: int, *args: str, rows: int = 40) -> tuple[int, str]:
    primary, secondary = os.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp), "LANG": "C.UTF-8", "TERM": "xterm"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "rune_council.cli", "council", "demo", *args],
        cwd=tmp,
        env=env,
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        start_new_session=True,
    )
    os.close(secondary)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([primary], [], [], 0.5)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        code = proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(primary)
    return code, b"".join(chunks).decode("utf-8", "replace")


def frames(screen: str) -> list[list[str]]:
    """Each drawing of the live table that shows voices, as the lines a person saw (colours
    removed), up to its caption: what follows the last one is the printed report."""
    drawn = []
    for frame in REDRAW.split(screen):
        lines = ANSI.sub("", frame).split("\r\n")
        last = max((i for i, line in enumerate(lines) if ROW.match(line)), default=None)
        if last is not None:
            drawn.append(lines[: last + 2])
    return drawn


@pytest.mark.parametrize("columns", [80, 120])
def test_every_voice_shows_id_family_status_and_time_at_this_width(
    tmp_path: Path, columns: int
) -> None:
    code, screen = on_pty(tmp_path, columns, "--id", f"w{columns}", "--pace", "0.6")
    assert code == 0, screen
    drawn = frames(screen)
    assert len(drawn) > 3, screen  # redrawn while the voices worked, not printed once
    seen_running = False
    for frame in drawn:
        for line in frame:
            assert cell_len(line.rstrip()) <= columns, (columns, line)
        rows = {m.group(1): m for m in map(ROW.match, frame) if m}
        assert set(rows) == set(FAMILIES), frame
        for voice_id, match in rows.items():
            assert match.group(2) == FAMILIES[voice_id], frame
            if match.group(3) in ("running", "complete", "dropped"):
                assert match.group(4) != "-", frame  # a started voice has a time
            seen_running = seen_running or match.group(3) == "running"
    assert seen_running, "a running voice was shown with its spinner and ticking time"
    final = {m.group(1): m for m in map(ROW.match, drawn[-1]) if m}
    assert {v: m.group(3) for v, m in final.items()} == {
        "v1": "complete",
        "v2": "complete",
        "v3": "complete",
        "v4": "dropped",
    }
    assert all(re.fullmatch(r"\d+\.\ds", m.group(4)) for m in final.values())
    # The columns that give way still show where there is room for them.
    table = "\n".join(drawn[-1])
    assert "sim-anthropic" in table
    if columns >= 120:
        assert "devils_advocate" in table and "error_reported" in table


def test_the_table_fits_any_width_and_drops_the_minor_columns_first(tmp_path: Path) -> None:
    result = convene(
        demo_request("fit"), CouncilOptions(runtimes=demo_runtimes(0), rune_dir=tmp_path)
    )
    reason = "sim-xai: error_reported: " + "ConnectionError: the endpoint went away " * 4
    event = RunEvent(seq=9, at="2026-11-30T00:00:00Z", kind="voice.status", voice_id="v4",
                     status="dropped", detail=reason)  # fmt: skip
    board = Board()
    board.update(result, event)
    headers_at = {}
    for width in range(40, 201, 7):
        console = Console(file=io.StringIO(), width=width, color_system=None)
        console.print(board)
        lines = console.file.getvalue().splitlines()  # type: ignore[attr-defined]
        assert all(cell_len(line.rstrip()) <= width for line in lines), width
        rows = [m for m in map(ROW.match, lines) if m]
        assert [(m.group(1), m.group(2)) for m in rows] == list(FAMILIES.items()), (width, lines)
        header = next(line for line in lines if line.startswith("voice"))
        headers_at[width] = header.split()
    # Narrow: only the four that matter; wide: everything, the reason last to be cut.
    assert headers_at[40] == ["voice", "family", "status", "time"]
    assert headers_at[82] == ["voice", "family", "status", "time", "runtime", "detail"]
    assert headers_at[124] == ["voice", "family", "status", "time", "runtime", "role", "detail"]
