"""`rune council eval` as a user runs it: fake AI CLIs as real processes, scripted per item to
anchor at (or away from) the seeded lines, and the report's figures checked against that."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from rune_council.evaluation.report import EvalReport
from rune_council.testing import answer_for, claim
from tests.fakes.bin import install_fake, path_with
from tests.helpers import ctrl_c_once_running, run_rune

SEEDED = 3
AWAY = 9
LINES = 10


def post_image(key: str) -> str:
    # Lines long enough that a quote of one identifies it.
    body = [f"def {key}(x):"]
    body += [f"    value_{i} = compute_total(x, step={i}) + offset" for i in range(1, LINES - 1)]
    return "\n".join([*body, f"    return value_{LINES - 2}"]) + "\n"


FLAWED: tuple[str, ...] = ("f1", "f2", "f3")
CLEAN: tuple[str, ...] = ("c1", "c2")


def path_of(key: str) -> str:
    return f"item_{key}.py"


def on(voice: str, key: str, line: int) -> dict[str, Any]:
    text = post_image(key).splitlines()[line - 1].strip()
    place = f"{path_of(key)}:{line}"
    # Each voice words it its own way: the same words from two families is a warning sign.
    said = f"{voice} finds the step passed to compute_total wrong on line {line}"
    return claim(said, anchor=place, ref=place, quote=text, severity="MUST")


# What each voice says on each item: the lines it anchors a claim at.
SCRIPT: dict[str, dict[str, list[int]]] = {
    # catches every flaw, never a false alarm
    "claude": {"f1": [SEEDED], "f2": [SEEDED], "f3": [SEEDED]},
    # catches one flaw, misses two by anchoring far away, and raises one false alarm
    "codex": {"f1": [SEEDED], "f2": [AWAY], "f3": [AWAY], "c1": [4]},
    # says nothing anywhere: it scores nothing, and precision is undefined
    "gemini": {},
}


def dataset(tmp: Path, extra: list[str] | None = None) -> Path:
    lines = []
    for key in (*FLAWED, *CLEAN):
        flawed = key in FLAWED
        lines.append(
            json.dumps(
                {
                    "id": key,
                    "label": "flawed" if flawed else "clean",
                    "path": path_of(key),
                    "pre_image": f"def {key}(x):\n    pass\n",
                    "post_image": post_image(key),
                    "seeded": [{"path": path_of(key), "line": SEEDED}] if flawed else [],
                }
            )
        )
    path = tmp / "items.jsonl"
    path.write_text("\n".join(lines + (extra or [])) + "\n")
    return path


def fakes(tmp: Path, **settings: str | float | Path) -> None:
    for name, script in SCRIPT.items():
        folder = tmp / "answers" / name
        folder.mkdir(parents=True, exist_ok=True)
        for key in (*FLAWED, *CLEAN):
            claims = [on(name, key, line) for line in script.get(key, [])]
            answer = answer_for("__QUESTION__", "NO" if claims else "YES", claims)
            (folder / f"{path_of(key)}.answer").write_text(answer)
        install_fake(
            tmp / "bin",
            name,
            answer=answer_for("__QUESTION__", "YES", []),
            mode="answer_question",
            answer_dir=str(folder),
            **{k: str(v) for k, v in settings.items()},
        )


def env(tmp: Path) -> dict[str, str]:
    return {
        "PATH": path_with(tmp / "bin"),
        "HOME": str(tmp),
        "LANG": "C.UTF-8",
        "RUNE_COUNCIL_ALLOW_EXTERNAL": "1",
    }


def rune(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_rune(tmp, env(tmp), "council", "eval", *args, timeout=240)


def arm(report: EvalReport, name: str) -> Any:
    return next(a for a in report.arms if a.name == name)


def figures(report: EvalReport, name: str) -> tuple[Any, Any, Any]:
    a = arm(report, name)
    return a.recall.value, a.false_alarm.value, a.precision.value


def test_the_report_scores_each_voice_as_it_was_scripted(tmp_path: Path) -> None:
    fakes(tmp_path)
    # A run of the user's own that happens to share an item's id is not the eval's.
    own = tmp_path / ".rune" / "council" / "run-f1.json"
    own.parent.mkdir(parents=True)
    own.write_text("the user's own run")
    out = rune(tmp_path, str(dataset(tmp_path)), "--json")
    assert out.returncode == 0, out.stderr
    report = EvalReport.model_validate_json(out.stdout)
    assert (report.items, report.flawed, report.clean) == (5, 3, 2)
    assert figures(report, "voice:claude") == (1.0, 0.0, 1.0)
    # four items alarmed (f1, f2, f3, c1), one of them a hit
    assert figures(report, "voice:codex") == (1 / 3, 0.5, 1 / 4)
    recall, false_alarm, precision = figures(report, "voice:gemini")
    assert (recall, false_alarm) == (0.0, 0.0)
    assert precision is None
    assert arm(report, "voice:gemini").precision.reason == "no alarm raised"
    # Only f1 has two families on the seeded line: that is the council's one consensus hit.
    assert figures(report, "council:consensus")[0] == 1 / 3
    # With under ten items the best voice is chosen in-sample, and the report says so.
    best = arm(report, "best-voice")
    assert best.choices and all(c.in_sample for c in best.choices)
    assert best.choices[0].voice == "claude"
    assert {c.arm for c in report.comparisons} >= {"majority", "council:consensus"}
    assert all(0.0 <= c.holm_p <= 1.0 for c in report.comparisons)
    # Each fake voice is one call per item; the council is the three of them.
    cost = {c.arm: c for c in report.costs}
    assert cost["voice:claude"].calls_per_item == 1.0 and cost["voice:claude"].items == 5
    assert cost["council"].calls_per_item == 3.0
    assert (cost["council"].seconds_per_item or 0) > 0
    assert own.read_text() == "the user's own run"
    results = tmp_path / ".rune" / "eval" / "items" / "results.jsonl"
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    # Each row is the item's council, under the eval's own run id (eval-<tag>-<item id>).
    assert sorted(r["id"].split("-", 2)[2] for r in rows) == sorted([*FLAWED, *CLEAN])
    assert all(r["id"].startswith("eval-") for r in rows)


def test_the_text_report_shows_the_table_and_a_second_run_reruns_nothing(tmp_path: Path) -> None:
    fakes(tmp_path, pid_file=tmp_path / "pids")
    path = dataset(tmp_path)
    first = rune(tmp_path, str(path))
    assert first.returncode == 0, first.stderr
    assert "voice:claude" in first.stdout and "1.00 (3/3)" in first.stdout
    assert "voice:gemini precision: \u2014 no alarm raised" in first.stdout
    assert "effective independent votes" in first.stdout
    assert "families anthropic & openai: wrong together" in first.stdout
    assert "  council: 3.0 call(s);" in first.stdout
    calls = len((tmp_path / "pids").read_text().split())
    second = rune(tmp_path, str(path))
    assert second.returncode == 0, second.stderr
    assert len((tmp_path / "pids").read_text().split()) == calls  # no voice ran again
    table = [line for line in first.stdout.splitlines() if line.startswith("voice:")]
    assert table == [line for line in second.stdout.splitlines() if line.startswith("voice:")]


def test_hostile_dataset_lines_are_named_by_number_and_nothing_runs(tmp_path: Path) -> None:
    fakes(tmp_path)
    bad = [
        "{not json",
        json.dumps(
            {
                "id": "x1",
                "label": "flawed",
                "path": "a.py",
                "pre_image": "",
                "post_image": "x\n",
                "seeded": [{"path": "a.py", "line": 1}],
                "seded": [],
            }
        ),
        json.dumps(
            {
                "id": "../../etc/x",
                "label": "clean",
                "path": "a.py",
                "pre_image": "",
                "post_image": "x\n",
            }
        ),
        json.dumps(
            {"id": "x2", "label": "flawed", "path": "a.py", "pre_image": "", "post_image": "x\n"}
        ),
        json.dumps(
            {"id": "f1", "label": "clean", "path": "a.py", "pre_image": "", "post_image": "x\n"}
        ),
        "x" * (4 * 1024 * 1024 + 10),
    ]
    out = rune(tmp_path, str(dataset(tmp_path, bad)))
    assert out.returncode == 2, out.stderr
    assert "line 6: not JSON" in out.stderr
    assert "line 7: unknown key 'seded' (closest valid key: 'seeded')" in out.stderr
    assert "line 8: id '../../etc/x' is not a run id" in out.stderr
    assert "line 9: a flawed item names at least one seeded place" in out.stderr
    assert "line 10: id 'f1' is already used by an earlier line" in out.stderr
    assert "line 11: longer than 4194304 bytes" in out.stderr
    assert "6 bad line(s)" in out.stderr and "nothing was run" in out.stderr
    assert not (tmp_path / ".rune" / "council").exists()


def test_ctrl_c_mid_eval_loses_nothing_and_a_rerun_completes(tmp_path: Path) -> None:
    fakes(tmp_path, sleep_s=120, pid_file=tmp_path / "pids")
    path = dataset(tmp_path)
    # Stopped once one council's three voices have all started.
    args = ("council", "eval", str(path), "-c", "1")
    code, _, err = ctrl_c_once_running(tmp_path, env(tmp_path), args, tmp_path / "pids", 6)
    assert code == 130, err
    assert "eval stopped" in err and "the next run picks up the rest" in err
    fakes(tmp_path)  # the voices answer at once now
    out = rune(tmp_path, str(path), "--json")
    assert out.returncode == 0, out.stderr
    report = EvalReport.model_validate_json(out.stdout)
    assert figures(report, "voice:claude") == (1.0, 0.0, 1.0)
    assert all(a.unanswered == 0 for a in report.arms if a.kind == "voice")


def test_builtin_humaneval_items_are_reviewed_and_scored_at_their_mutated_lines(
    tmp_path: Path,
) -> None:
    from rune_council.council.eval_items import from_humaneval

    items = from_humaneval(2, 0)  # what the command will draw with the same limit and seed
    assert {i.label for i in items} == {"flawed", "clean"}
    for name in ("claude", "codex", "gemini"):
        folder = tmp_path / "answers" / name
        folder.mkdir(parents=True)
        for item in items:
            claims = []
            if name == "claude" and item.seeded:
                place = item.seeded[0]
                text = item.post_image.splitlines()[place.line - 1].strip()
                ref = f"{place.path}:{place.line}"
                claims = [
                    claim("the changed test decides wrongly", anchor=ref, ref=ref, quote=text)
                ]
            # The question names the item ("item <id>: ..."), so each fake knows which it reviews.
            answer = answer_for("__QUESTION__", "NO" if claims else "YES", claims)
            (folder / f"item {item.id}:.answer").write_text(answer)
        install_fake(
            tmp_path / "bin",
            name,
            answer=answer_for("__QUESTION__", "YES", []),
            mode="answer_question",
            answer_dir=str(folder),
        )
    out = rune(tmp_path, "--builtin", "humaneval", "--limit", "2", "--seed", "0", "--json")
    assert out.returncode == 0, out.stderr
    assert "runs each problem's own tests" in out.stderr and "sandboxed" in out.stderr
    report = EvalReport.model_validate_json(out.stdout)
    flawed = sum(i.label == "flawed" for i in items)
    assert (report.items, report.flawed) == (len(items), flawed)
    assert figures(report, "voice:claude") == (1.0, 0.0, 1.0)
    assert figures(report, "voice:codex")[:2] == (0.0, 0.0)


def test_eval_needs_exactly_one_item_source(tmp_path: Path) -> None:
    none = rune(tmp_path)
    assert none.returncode == 2 and "give a DATASET file or --builtin humaneval" in none.stderr
    other = rune(tmp_path, "--builtin", "mmlu")
    assert other.returncode == 2 and "--builtin: must be one of humaneval" in other.stderr


def test_records_keep_consensus_anchors_and_only_single_voice_dissent(tmp_path: Path) -> None:
    from rune_council.council.eval_items import load_dataset, read_run, records

    fakes(tmp_path)
    path = dataset(tmp_path)
    assert rune(tmp_path, str(path), "--json").returncode == 0
    items, bad = load_dataset(path)
    assert not bad
    runs = {}
    for i in items:
        [run] = (tmp_path / ".rune" / "council").glob(f"run-eval-*-{i.id}.json")
        runs[i.id] = read_run(run, run.stem.removeprefix("run-"))
    by_id = {r.id: r for r in records(items, runs).items}
    [council] = by_id["f1"].councils
    # Two families on the seeded line: one consensus claim, its members' anchors kept.
    assert [c.anchors for c in council.consensus] == [["item_f1.py:3"]]
    # On f2 claude alone cites the seeded line and codex alone a far one: both are single-
    # voice dissent; the split on the stance (every voice) is not a claim of one voice.
    [f2] = by_id["f2"].councils
    assert sorted(a for c in f2.dissent for a in c.anchors) == ["item_f2.py:3", "item_f2.py:9"]
    assert [v.voice for v in by_id["f1"].voices] == ["claude", "codex", "gemini"]
    assert {v.family for v in by_id["f1"].voices} == {"anthropic", "openai", "google"}


def test_a_garbled_run_file_is_scored_unanswered_and_said(tmp_path: Path) -> None:
    fakes(tmp_path)
    path = dataset(tmp_path)
    assert rune(tmp_path, str(path), "--json").returncode == 0
    [run] = (tmp_path / ".rune" / "council").glob("run-eval-*-f2.json")
    run.write_text('{"id": "' + run.stem.removeprefix("run-") + '", "status": ')
    # The earlier file cannot be judged, so the batch refuses to run over it, and the eval
    # scores what it has.
    out = rune(tmp_path, str(path), "--json")
    assert out.returncode == 0, out.stderr
    assert "1 item(s) have no finished council" in out.stderr and "f2" in out.stderr
    report = EvalReport.model_validate_json(out.stdout)
    claude = arm(report, "voice:claude")
    assert (claude.answered, claude.unanswered) == (4, 1)
    assert claude.recall.denominator == 2


def test_a_rank_setup_is_run_beside_the_plain_council_and_scored_as_its_own_arms(
    tmp_path: Path,
) -> None:
    fakes(tmp_path)
    out = rune(tmp_path, str(dataset(tmp_path)), "--setup", "rank", "--json")
    assert out.returncode == 0, out.stderr
    report = EvalReport.model_validate_json(out.stdout)
    names = {a.name for a in report.arms}
    assert {"rank:consensus", "rank:consensus+dissent", "council:consensus"} <= names
    assert arm(report, "rank:consensus").answered + arm(report, "rank:consensus").unanswered == 5
    assert {c.arm for c in report.comparisons} >= {"rank:consensus", "council:consensus"}
    rank_runs = sorted((tmp_path / ".rune" / "council").glob("run-eval-*.rank.json"))
    assert len(rank_runs) == 5
    doc = json.loads(rank_runs[0].read_text())
    assert doc["request"]["deliberation"]["method"] == "rank"
    # The voice arms are the plain council's voices only: one arm per voice, not two.
    assert sorted(a.name for a in report.arms if a.kind == "voice") == [
        "voice:claude",
        "voice:codex",
        "voice:gemini",
    ]
    bad = rune(tmp_path, str(dataset(tmp_path)), "--setup", "debate")
    assert bad.returncode == 2 and "must be one of rank, red-team" in bad.stderr


def test_a_red_team_setup_is_scored_as_its_own_arms(tmp_path: Path) -> None:
    fakes(tmp_path)
    out = rune(tmp_path, str(dataset(tmp_path)), "--setup", "red-team", "--json")
    assert out.returncode == 0, out.stderr
    report = EvalReport.model_validate_json(out.stdout)
    red = arm(report, "red-team:consensus")
    assert red.answered + red.unanswered == 5
    [run] = (tmp_path / ".rune" / "council").glob("run-eval-*-f1.red-team.json")
    doc = json.loads(run.read_text())
    assert doc["request"]["deliberation"]["council_type"] == "red_team"


def test_a_planted_eval_folder_symlink_is_refused_and_nothing_is_written_through_it(
    tmp_path: Path,
) -> None:
    fakes(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "items.tmp").write_text("keep me")
    (tmp_path / ".rune" / "eval").mkdir(parents=True)
    (tmp_path / ".rune" / "eval" / "items").symlink_to(outside)
    out = rune(tmp_path, str(dataset(tmp_path)))
    assert out.returncode == 2, out.stderr
    assert "is a symbolic link or not a folder" in out.stderr
    assert sorted(p.name for p in outside.iterdir()) == ["items.tmp"]
    assert (outside / "items.tmp").read_text() == "keep me"
