"""`rune council stats` shows each eval's decorrelation: how often two voices, and two
families, were wrong on the same item against what independence predicts, and the
effective number of independent votes, with the very figures the eval's own report gives.

The eval is run with the fake CLIs of tests/fakes as real processes; its scored file is then
read by the stats command, its --html page and the web view. The scored file is data from
anyone (a rune dir can come with a clone): planted, broken or huge files are read bounded and
skipped with a count, and never stop the stats."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from rune_council.analytics.aggregate import Stats
from rune_council.analytics.evals import MAX_FILE_BYTES, MAX_LINE_BYTES, write_scored
from rune_council.evaluation.report import EvalReport
from rune_council.evaluation.stats import ScoredItem, ScoredVoice
from tests.helpers import run_rune
from tests.test_eval_cli import dataset, env, fakes


def run(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_rune(tmp, env(tmp), "council", *args, timeout=240)


def stats_json(tmp: Path) -> Stats:
    out = run(tmp, "stats", "--json")
    assert out.returncode == 0, out.stderr
    return Stats.model_validate_json(out.stdout)


def test_stats_shows_each_evals_pairwise_figures_exactly_as_its_report(tmp_path: Path) -> None:
    fakes(tmp_path)
    out = run(tmp_path, "eval", str(dataset(tmp_path)), "--seed", "7", "--json")
    assert out.returncode == 0, out.stderr
    report = EvalReport.model_validate_json(out.stdout)

    [shown] = stats_json(tmp_path).evals.evals
    assert (shown.eval, shown.items, shown.flawed, shown.clean) == ("items", 5, 3, 2)
    assert shown.skipped_lines == 0 and shown.seed == 7
    figures = shown.decorrelation
    assert figures is not None
    # The same functions over the same inputs: every figure equal, intervals included.
    assert figures.voice_agreement == report.voice_agreement
    assert figures.family_agreement == report.family_agreement
    assert figures.effective_votes == report.effective_votes
    # What the scripted voices make of it: codex and gemini both missed f2 and f3.
    pair = next(p for p in figures.voice_agreement if {p.a, p.b} == {"codex", "gemini"})
    assert (pair.items, pair.both_wrong, pair.joint_error_rate) == (5, 2, 0.4)

    text = run(tmp_path, "stats")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert "Eval items: voices wrong together" in lines
    assert "Eval items: families wrong together" in lines
    row = next(ln for ln in lines if ln.strip().startswith("codex & gemini"))
    assert re.search(r"codex & gemini\s+5\s+2/5 \(0\.40\)\s+0\.40\s+1\.00", row), row
    summary = next(ln for ln in lines if ln.strip().startswith("items "))
    votes = report.effective_votes
    assert votes.value is not None and f"{votes.value:.2f}" in summary
    assert re.search(r"5 \(3 flawed, 2 clean\)\s+3\s+", summary), summary

    page = tmp_path / "stats.html"
    assert run(tmp_path, "stats", "--html", str(page)).returncode == 0
    html = page.read_text()
    assert "<h2>Eval items: voices wrong together</h2>" in html
    assert "<td>codex &amp; gemini</td><td>5</td><td>2/5 (0.40)</td>" in html


def test_the_web_stats_tables_carry_the_eval_picture(tmp_path: Path) -> None:
    from tests.web.serving import serving

    rune = tmp_path / ".rune"
    (rune / "eval" / "planned").mkdir(parents=True)
    write_scored(
        rune / "eval" / "planned",
        "planned",
        [
            ScoredItem(
                id=f"i{k}",
                label="flawed" if k % 2 else "clean",
                voices=[
                    ScoredVoice(voice="a", family="meta", error=k % 3 == 0),
                    ScoredVoice(voice="b", family="qwen", error=k % 4 == 0),
                ],
            )
            for k in range(12)
        ],
        seed=0,
        resamples=200,
        level=0.95,
    )
    with serving(tmp_path) as server:
        view = server.client.get("/v1/stats/tables").json()
    titles = [t["title"] for t in view["tables"]]
    assert "Eval planned: voices wrong together" in titles
    table = next(t for t in view["tables"] if t["title"] == "Eval planned: voices wrong together")
    assert table["rows"][0][:3] == ["a & b", "12", "1/12 (0.08)"]


def test_no_eval_runs_is_said_in_one_line(tmp_path: Path) -> None:
    out = run(tmp_path, "stats")
    assert out.returncode == 0, out.stderr
    said = [ln for ln in out.stdout.splitlines() if ln.startswith("Eval")]
    assert said == [
        "Eval runs: none found (rune council eval keeps each eval's scored items in "
        "<rune dir>/eval/)"
    ]
    assert stats_json(tmp_path).evals.evals == []


def item_line(item_id: str, error: object = True) -> str:
    return json.dumps(
        {
            "id": item_id,
            "label": "flawed",
            "voices": [
                {"voice": "a", "family": "meta", "error": error},
                {"voice": "b", "family": "qwen", "error": False},
            ],
        }
    )


def test_planted_broken_huge_and_linked_scored_files_are_refused_or_skipped(
    tmp_path: Path,
) -> None:
    evals = tmp_path / ".rune" / "eval"
    broken = evals / "broken"
    broken.mkdir(parents=True)
    lines = [
        '{"rune_eval": "broken", "seed": 3, "resamples": 100, "level": 0.9}',
        item_line("one"),
        "not json at all",
        "[1, 2, 3]",
        item_line("two", error="true"),  # a string is no boolean
        item_line("one"),  # the same item again
        "{" * 200_000,  # deep nesting, and longer than a line may be
        json.dumps(
            {
                "id": "x",
                "label": "flawed",
                "voices": [{"voice": f"v{k}", "error": None} for k in range(60)],
            }
        ),
        item_line("three", error=False),
    ]
    (broken / "scored.jsonl").write_text("\n".join(lines) + "\n")
    huge = evals / "huge"
    huge.mkdir()
    with (huge / "scored.jsonl").open("wb") as fh:
        fh.truncate(MAX_FILE_BYTES + 1)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "scored.jsonl").write_text(item_line("elsewhere") + "\n")
    linked = evals / "linked-file"
    linked.mkdir()
    (linked / "scored.jsonl").symlink_to(outside / "scored.jsonl")
    (evals / "linked-folder").symlink_to(outside)
    fifo = evals / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / "scored.jsonl")

    found = stats_json(tmp_path).evals
    by_name = {e.eval: e for e in found.evals}
    assert set(by_name) == {"broken", "huge", "linked-file", "fifo"}
    bad = by_name["broken"]
    assert (bad.items, bad.skipped_lines) == (2, 6)
    assert (bad.seed, bad.resamples, bad.level) == (3, 100, 0.9)
    assert any(f"longer than {MAX_LINE_BYTES} bytes" in r for r in bad.skipped_reasons)
    assert bad.decorrelation is not None and bad.decorrelation.items == 2
    assert by_name["huge"].decorrelation is None
    assert by_name["huge"].notes == [f"not read: larger than {MAX_FILE_BYTES} bytes"]
    for refused in ("linked-file", "fifo"):
        assert by_name[refused].decorrelation is None
        assert by_name[refused].notes[0].startswith("not read: "), by_name[refused].notes
    assert "symlink" in by_name["linked-file"].notes[0]
    assert any("linked-folder is a symbolic link; not read" in n for n in found.notes)

    text = run(tmp_path, "stats")
    assert text.returncode == 0, text.stderr
    assert "Eval broken: voices wrong together" in text.stdout
    assert re.search(r"broken\s+2 \(2 flawed, 0 clean\)\s+2\s+.*\s6\s*$", text.stdout, re.M)
