"""``rune council stats``: the run history's numbers, checked against values worked out by hand.

The history (``tests/stats_history.py``) is four councils run through the real pipeline with
scripted voices, so the run files are exactly what a council writes, then dated and given
latencies and rounds by hand, plus a foreign and a broken JSON file. Its docstring lists
what each run holds; the expected values below are counted from that list.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rune_council.analytics import charts
from rune_council.analytics.history import stats
from rune_council.analytics.index import INDEX_NAME
from rune_council.analytics.page import page
from rune_council.analytics.since import parse_since
from rune_council.cli import app
from rune_council.core.paths import RuneDir
from tests.stats_history import CLAUDE_MS, HOUR_AGO, age, build_history


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_history(tmp_path_factory.mktemp("history") / ".rune")


@pytest.fixture
def rune(history: Path, tmp_path: Path) -> Path:
    """A private copy of the history, so each test may change it."""
    copy = tmp_path / ".rune"
    shutil.copytree(history / "council", copy / "council")
    for path in (copy / "council").iterdir():
        age(path)
    return copy


def test_rates_stamps_and_weeks_match_the_hand_count(rune: Path) -> None:
    s = stats([RuneDir(rune)])
    # Four runs, all complete. Consensus in a, b, d: 3/4. Needs a decision: a and c: 2/4.
    assert s.totals.runs == 4 and s.totals.complete == 4
    assert (s.totals.consensus, s.totals.consensus_rate) == (3, 0.75)
    assert (s.totals.needs_decision, s.totals.needs_decision_rate) == (2, 0.5)
    assert s.totals.stamps == {"MULTI_FAMILY": 3, "NO_DECORRELATION": 1}
    # 2026-11-02 and -04 are in ISO week 45, -10 and -12 in week 46.
    w45, w46 = s.weeks
    assert (w45.week, w45.runs, w45.consensus_rate, w45.needs_decision_rate) == (
        "2026-W45",
        2,
        1.0,
        0.5,
    )
    assert w45.stamps == {"MULTI_FAMILY": 2}
    assert (w46.week, w46.runs, w46.consensus_rate, w46.needs_decision_rate) == (
        "2026-W46",
        2,
        0.5,
        0.5,
    )
    assert w46.stamps == {"MULTI_FAMILY": 1, "NO_DECORRELATION": 1}


def test_a_foreign_and_a_broken_json_file_are_skipped_and_counted(rune: Path) -> None:
    s = stats([RuneDir(rune)])
    assert s.files.runs == 4 and s.files.skipped == 2
    reasons = {Path(f.file).name: f.reason for f in s.files.skipped_files}
    assert set(reasons) == {"notes.json", "run-broken.json"}
    assert "not a council run file" in reasons["notes.json"]
    assert "not JSON" in reasons["run-broken.json"]


def test_family_agreement_and_dissent_matrices_match_the_hand_count(rune: Path) -> None:
    s = stats([RuneDir(rune)])
    assert s.families == ["alibaba", "anthropic", "google", "openai"]
    agreed = {(p.a, p.b): (p.runs_both, p.runs, p.rate, p.claims) for p in s.agreement}
    # Both answered: alibaba+anthropic in d; anthropic+google in a, b; anthropic+openai and
    # google+openai in a. Pairs that never met (alibaba with google or openai) are absent.
    assert agreed == {
        ("alibaba", "anthropic"): (1, 1, 1.0, 1),  # d's consensus
        ("anthropic", "google"): (2, 1, 0.5, 1),  # b's consensus, not a's
        ("anthropic", "openai"): (1, 1, 1.0, 1),  # a's consensus
        ("google", "openai"): (1, 0, 0.0, 0),
    }
    dissent = {(p.a, p.b): (p.runs_both, p.runs, p.rate) for p in s.dissent}
    # Only a had opposite sides: gemini YES against claude NO and codex NO.
    assert dissent == {
        ("alibaba", "anthropic"): (1, 0, 0.0),
        ("anthropic", "google"): (2, 1, 0.5),
        ("anthropic", "openai"): (1, 0, 0.0),
        ("google", "openai"): (1, 1, 1.0),
    }


def test_dissent_per_family_and_the_heatmap_match_the_hand_count(rune: Path) -> None:
    s = stats([RuneDir(rune)])
    rows = {f.family: (f.runs_answered, f.dissent_entries, f.alone) for f in s.family_dissent}
    # a: google's lone claim (single-voice) and the YES/NO split naming all three; c:
    # claude's lone claim. b and d: none.
    assert rows == {
        "alibaba": (1, 0, 0),
        "anthropic": (4, 2, 1),
        "google": (2, 2, 1),
        "openai": (1, 1, 0),
    }
    assert s.heatmap.runs == ["a", "b", "c", "d"]
    assert s.heatmap.families == ["alibaba", "anthropic", "google", "openai"]
    assert s.heatmap.values == [
        [None, None, None, 0],
        [1, 0, 1, 0],
        [2, 0, None, None],
        [1, None, None, None],
    ]


def test_runtime_reliability_and_latency_match_the_hand_count(rune: Path) -> None:
    s = stats([RuneDir(rune)])
    rows = {
        r.runtime: (r.calls, r.answered, r.dropped, r.timed_out, r.fell_back) for r in s.runtimes
    }
    assert rows == {
        "claude": (4, 4, {}, 0, 0),
        # a answered; c timed out (nothing to fall back to); d failed and qwen took over.
        "codex": (3, 1, {"exit_nonzero": 1}, 1, 1),
        # a and b answered; d's answer was thrown out by GATE as malformed.
        "gemini": (3, 2, {"malformed": 1}, 0, 0),
        "qwen": (1, 1, {}, 0, 0),
    }
    claude = next(r for r in s.runtimes if r.runtime == "claude")
    assert (claude.p50_ms, claude.p95_ms) == (250.0, 895.0)
    # And numpy, an independent implementation of the same (linear) percentile, agrees.
    numpy = pytest.importorskip("numpy")
    values = list(CLAUDE_MS.values())
    assert claude.p95_ms == pytest.approx(float(numpy.percentile(values, 95)))
    assert claude.p50_ms == pytest.approx(float(numpy.percentile(values, 50)))


def test_deliberation_figures_match_the_hand_count(rune: Path) -> None:
    d = stats([RuneDir(rune)]).deliberation
    assert d.runs == 3
    assert d.rounds_to_converge == {"1": 1, "2": 1} and d.not_converged == 1
    assert d.revision_counts == {"1": 1, "2": 2}
    # Final W: a 0.9, b 0.7, d 0.95 -> median 0.9; bins of 0.1: 0.7 in bin 7, 0.9 and 0.95
    # in bin 9; labels: two high (>= 0.8), one medium.
    assert (d.w_values, d.w_median) == (3, 0.9)
    assert d.w_histogram == [0, 0, 0, 0, 0, 0, 0, 1, 0, 2]
    assert d.w_labels == {"high": 2, "medium": 1, "low": 0}
    assert (d.winner_compared, d.winner_changed, d.winner_changed_rate) == (2, 1, 0.5)


def test_since_keeps_only_runs_started_in_the_window(rune: Path) -> None:
    now = dt.datetime(2026, 11, 13, tzinfo=dt.UTC)
    s = stats([RuneDir(rune)], since=parse_since("4d", now=now))
    # 4 days before 2026-11-13: from 2026-11-09, so c and d.
    assert s.totals.runs == 2 and s.totals.stamps == {"MULTI_FAMILY": 1, "NO_DECORRELATION": 1}
    assert parse_since("2026-11-04").date() == dt.date(2026, 11, 4)
    with pytest.raises(ValueError, match="neither a span"):
        parse_since("last tuesday")


# --------------------------------------------------------------------------- the index


def test_the_index_reads_only_new_or_changed_files_and_forgets_deleted_ones(rune: Path) -> None:
    first = stats([RuneDir(rune)])
    assert (first.files.read, first.files.reused) == (6, 0)
    assert (rune / INDEX_NAME).is_file()
    warm = stats([RuneDir(rune)])
    assert (warm.files.read, warm.files.reused) == (0, 6)
    assert warm.totals == first.totals and warm.runtimes == first.runtimes

    # c is rewritten (a person settles its decision): only c is read again.
    path = rune / "council" / "run-c.json"
    doc = json.loads(path.read_text())
    doc["needs_decision"] = False
    path.write_text(json.dumps(doc))
    age(path, HOUR_AGO / 2)
    changed = stats([RuneDir(rune)])
    assert (changed.files.read, changed.files.reused) == (1, 5)
    assert changed.totals.needs_decision == 1

    # d is deleted and a new run e (a copy of b) appears.
    (rune / "council" / "run-d.json").unlink()
    new = json.loads((rune / "council" / "run-b.json").read_text())
    new["id"] = "e"
    (rune / "council" / "run-e.json").write_text(json.dumps(new))
    age(rune / "council" / "run-e.json")
    after = stats([RuneDir(rune)])
    assert (after.files.read, after.files.forgotten) == (1, 1)
    assert sorted(after.heatmap.runs) == ["a", "b", "c", "e"]
    assert "qwen" not in {r.runtime for r in after.runtimes}


def test_a_file_changed_moments_ago_is_read_again_even_with_the_same_size(rune: Path) -> None:
    # A live run rewrites its file within one tick of the file system's clock: same size,
    # same modification time. Such a file is read again until it has settled.
    path = rune / "council" / "run-c.json"
    text = path.read_text()
    assert '"needs_decision": true' in text
    tick = dt.datetime.now().timestamp() - 0.5
    os.utime(path, (tick, tick))
    assert stats([RuneDir(rune)]).totals.needs_decision == 2
    path.write_text(text.replace('"needs_decision": true', '"needs_decision":false'))
    os.utime(path, (tick, tick))
    assert len(path.read_text()) == len(text)
    assert stats([RuneDir(rune)]).totals.needs_decision == 1


def test_an_index_that_is_not_ours_is_rebuilt_not_trusted(rune: Path) -> None:
    good = stats([RuneDir(rune)])
    (rune / INDEX_NAME).write_text('{"version": 1, "entries": {"run-a.json": {"size": "x"}}}')
    s = stats([RuneDir(rune)])
    assert s.files.read == 6 and any("rebuilt" in n for n in s.files.notes)
    assert s.totals == good.totals


# --------------------------------------------------------------------------- pictures


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def distinct_colours(data: bytes) -> int:
    """Decode the PNG (8-bit RGBA, as Agg writes it) and count its distinct pixels."""
    width, height = png_size(data)
    pos, idat = 8, b""
    while pos < len(data):
        length = struct.unpack(">I", data[pos : pos + 4])[0]
        kind = data[pos + 4 : pos + 8]
        if kind == b"IDAT":
            idat += data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * 4 + 1
    assert len(raw) == stride * height
    # Filtered rows still differ wherever the picture does; the set of raw rows is a floor
    # on how varied the picture is, and a blank image has at most a handful.
    rows = {raw[i * stride : (i + 1) * stride] for i in range(height)}
    return len(rows)


PICTURE_SIZES = {
    # figsize x 100 dpi; the matrices grow with the number of families (4 here).
    "weekly.png": (900, 450),
    "families.png": (2 * (320 + 200) + 100, 320 + 200),
    "dissent-heatmap.png": (600, 220 + 4 * 40),
    "runtimes.png": (900, 160 + 4 * 45),
    "deliberation.png": (900, 380),
}


def test_every_picture_renders_with_its_size_and_real_content(rune: Path) -> None:
    pytest.importorskip("matplotlib")
    s = stats([RuneDir(rune)])
    pictures = charts.render(s)
    assert set(pictures) == set(PICTURE_SIZES)
    for name, data in pictures.items():
        assert png_size(data) == PICTURE_SIZES[name], name
        assert distinct_colours(data) > 20, name
        assert len(data) > 5_000, name


def test_pictures_of_an_empty_history_say_so_instead_of_failing(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    s = stats([RuneDir(tmp_path / ".rune")])
    assert s.totals.runs == 0
    for name, data in charts.render(s).items():
        assert png_size(data)[0] >= 600, name
        assert distinct_colours(data) > 5, name


def test_names_from_run_files_are_text_in_pictures_never_mathtext(rune: Path) -> None:
    pytest.importorskip("matplotlib")
    path = rune / "council" / "run-b.json"
    doc = json.loads(path.read_text())
    hostile = "$\\frac{1}{$ \x1b[31m"
    for voice in doc["voices"]:
        if voice["runtime"] == "gemini":
            voice["attempts"][0]["runtime"] = hostile
    path.write_text(json.dumps(doc))
    s = stats([RuneDir(rune)])
    assert hostile[:10] in {r.runtime[:10] for r in s.runtimes}
    assert png_size(charts.runtimes(s))[0] == 900  # an unbalanced $ would raise here


# --------------------------------------------------------------------------- the page


def test_the_html_page_is_self_contained_and_escapes_every_name(rune: Path) -> None:
    pytest.importorskip("matplotlib")
    path = rune / "council" / "run-a.json"
    doc = json.loads(path.read_text())
    doc["distinct_families"] = [*doc["distinct_families"], "<script>alert(1)</script>"]
    path.write_text(json.dumps(doc))
    s = stats([RuneDir(rune)])
    pictures = {n: (charts.PICTURES[n][0], d) for n, d in charts.render(s).items()}
    text = page(s, pictures)
    assert "<script" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert text.count('src="data:image/png;base64,') == 5
    assert "http://" not in text and "https://" not in text
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', text)
    assert csp is not None and html.unescape(csp.group(1)).startswith("default-src 'none';")
    assert "3 run file(s)" not in text and "4 run file(s)" in text


# --------------------------------------------------------------------------- the command


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["council", "stats", *args])


def test_stats_json_is_the_same_document_the_library_returns(rune: Path) -> None:
    result = invoke("--json", "--rune-dir", str(rune))
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["totals"]["consensus_rate"] == 0.75
    assert data["files"]["skipped"] == 2
    assert [w["week"] for w in data["weeks"]] == ["2026-W45", "2026-W46"]


def test_stats_prints_the_tables_and_writes_pictures_and_a_page(rune: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "pictures"
    html_file = tmp_path / "stats.html"
    result = invoke("--rune-dir", str(rune), "--png", str(out), "--html", str(html_file))
    assert result.exit_code == 0, result.output
    assert "75% (3/4)" in result.stdout and "2 file(s) skipped" in result.stdout
    assert "codex" in result.stdout and "exit_nonzero 1" in result.stdout
    assert sorted(p.name for p in out.iterdir()) == sorted(PICTURE_SIZES)
    assert html_file.read_text().count("data:image/png;base64,") == 5


def test_two_rune_dirs_are_read_together(rune: Path, tmp_path: Path) -> None:
    other = tmp_path / "other" / ".rune"
    (other / "council").mkdir(parents=True)
    shutil.copy(rune / "council" / "run-b.json", other / "council" / "run-b2.json")
    result = invoke("--json", "--rune-dir", str(rune), "--rune-dir", str(other))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["totals"]["runs"] == 5


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--since", "fortnight"], "neither a span"),
        (["--rune-dir", "/nonexistent/rune"], "is not a directory"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = invoke(*args)
    assert result.exit_code == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


BLOCK_MATPLOTLIB = (
    "import sys; sys.modules['matplotlib'] = None\n"
    "from rune_council.cli import main\n"
    "sys.argv = ['rune', 'council', 'stats', *sys.argv[1:]]\n"
    "main()\n"
)


def without_matplotlib(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCK_MATPLOTLIB, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_without_the_extra_the_numbers_still_print_and_the_extra_is_named(
    rune: Path, tmp_path: Path
) -> None:
    plain_run = without_matplotlib("--rune-dir", str(rune))
    assert plain_run.returncode == 0, plain_run.stderr
    assert "75% (3/4)" in plain_run.stdout
    assert "pip install 'rune-council[analytics]'" in plain_run.stdout

    png_run = without_matplotlib("--rune-dir", str(rune), "--png", str(tmp_path / "p"))
    assert png_run.returncode == 2
    assert "75% (3/4)" in png_run.stdout
    assert "rune-council[analytics]" in png_run.stderr
    assert not (tmp_path / "p").exists()

    html_run = without_matplotlib("--rune-dir", str(rune), "--html", str(tmp_path / "s.html"))
    assert html_run.returncode == 0, html_run.stderr
    page_text = (tmp_path / "s.html").read_text()
    assert "rune-council[analytics]" in page_text and "data:image/png" not in page_text
    assert "75% (3/4)" in page_text


def test_a_run_file_far_bigger_than_any_council_is_skipped_not_fatal(rune: Path) -> None:
    # The contract does not cap the number of voices; the digest does (500 calls).
    path = rune / "council" / "run-a.json"
    doc = json.loads(path.read_text())
    doc["voices"] = doc["voices"] * 200
    path.write_text(json.dumps(doc))
    s = stats([RuneDir(rune)])
    assert s.files.runs == 3 and s.files.skipped == 3
    reasons = {Path(f.file).name: f.reason for f in s.files.skipped_files}
    assert "holds more than a council run" in reasons["run-a.json"]
