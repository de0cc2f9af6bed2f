"""The plain progress view, fed by real councils of the demo's simulated voices."""

from __future__ import annotations

import io
import re
from pathlib import Path

from rune_council.cli.live import PlainProgress, interactive
from rune_council.council import CouncilOptions, convene
from rune_council.demo import demo_request, demo_runtimes


def test_each_transition_is_one_line_with_elapsed_time(tmp_path: Path) -> None:
    out = io.StringIO()
    convene(
        demo_request("p1"),
        CouncilOptions(runtimes=demo_runtimes(0.5), rune_dir=tmp_path, on_event=PlainProgress(out)),
    )
    lines = out.getvalue().splitlines()
    assert lines[0] == "council p1: dispatching 4 voice(s)"
    assert len([line for line in lines if " running " in line]) == 4
    v2_done = next(line for line in lines if line.startswith("  v2 ") and " complete " in line)
    # sim-openai answers after 0.9 s at this pace; the line carries its measured latency.
    elapsed = float(re.search(r"(\d+\.\d)s", v2_done).group(1))  # type: ignore[union-attr]
    assert 0.8 <= elapsed < 5
    assert lines[-1].startswith("council p1: complete: MULTI_FAMILY, 3/4 valid, 1 dropped in ")


def test_a_second_council_on_the_same_view_starts_its_clocks_afresh(tmp_path: Path) -> None:
    out = io.StringIO()
    progress = PlainProgress(out)
    convene(
        demo_request("first"),
        CouncilOptions(runtimes=demo_runtimes(0.5), rune_dir=tmp_path, on_event=progress),
    )
    out.truncate(0)
    out.seek(0)
    convene(
        demo_request("second"),
        CouncilOptions(runtimes=demo_runtimes(0.5), rune_dir=tmp_path, on_event=progress),
    )
    running = [line for line in out.getvalue().splitlines() if " running " in line]
    assert len(running) == 4
    assert all(" 0.0s " in line for line in running), running


def test_a_pipe_is_not_a_terminal() -> None:
    assert not interactive(io.StringIO())


def test_a_multi_line_reason_stays_on_its_row_in_the_live_table_and_the_plain_lines(
    tmp_path: Path,
) -> None:
    from rich.console import Console

    from rune_council.cli.live import Board
    from rune_council.core.contract import RunEvent

    result = convene(
        demo_request("ml"), CouncilOptions(runtimes=demo_runtimes(0.1), rune_dir=tmp_path)
    )
    # A reason as an older run file or a plug-in may hold it: a JSON dump over many lines.
    dump = 'gemini reported an error: {\n  "error": {\n    "code": 41\n  }\n}'
    event = RunEvent(seq=99, at="2026-11-30T00:00:00Z", kind="voice.status", voice_id="v1",
                     status="dropped", detail=dump)  # fmt: skip
    board = Board()
    board.update(result, event)
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(board.table())
    printed = console.file.getvalue()  # type: ignore[attr-defined]
    rows = [line for line in printed.splitlines() if re.match(r"^\W*v\d ", line)]
    assert len(rows) == len(result.voices), printed
    assert not any(
        '"code"' in line and not re.match(r"^\W*v\d ", line) for line in printed.splitlines()
    )

    out = io.StringIO()
    PlainProgress(out)(result, event)
    assert len(out.getvalue().splitlines()) == 1, out.getvalue()
