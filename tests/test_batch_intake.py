"""A batch line is an ask like any door's: its own template, chain, deliberation and rounds;
the batch's flags are `rune council`'s council flags; a mistake names its line and the
closest valid key. Run as a user runs it: `rune council batch` with fake AI CLIs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from rune_council.batch import read_rows, run_batch
from rune_council.runs import load
from tests.test_batch import options, questions, voices, write_items
from tests.test_batch_cli import PLAN, env, fakes, results, rune


def write(tmp: Path, lines: list[dict[str, Any] | str], name: str = "items.jsonl") -> Path:
    (tmp / "plan.md").write_text(PLAN)
    path = tmp / name
    text = [line if isinstance(line, str) else json.dumps(line) for line in lines]
    path.write_text("\n".join(text) + "\n")
    return path


def run_file(tmp: Path, run_id: str) -> dict[str, Any]:
    # As a reader gets it: the artifact kept beside the run file (contract 2.8) put back.
    return load(tmp / ".rune" / "council" / f"run-{run_id}.json").model_dump(mode="json")


def test_a_line_asks_its_own_template_chain_and_deliberation(tmp_path: Path) -> None:
    fakes(tmp_path)
    path = write(
        tmp_path,
        [
            {
                "id": "t",
                "question": "Is this safe?",
                "template": "security-review",
                "artifact": "plan.md",
            },
            {"id": "c", "question": "Should it ship?", "chain": "red-team-first", "n": 3},
            {
                "id": "d",
                "question": "Which rollout?",
                "deliberation": "vote",
                "multi_round": {"max_rounds": 2, "on_divergence": "halt"},
                "council_type": "standard",
            },
        ],
    )
    out = rune(tmp_path, str(path), "--json")
    assert out.returncode in (0, 1), out.stderr
    rows = {r["id"]: r for r in map(json.loads, out.stdout.splitlines())}
    assert set(rows) == {"t", "c", "d"} and "invalid" not in {r["status"] for r in rows.values()}

    t = run_file(tmp_path, "t")["request"]
    assert t["template"]["name"] == "security-review" and t["mode"] == "review"
    assert t["artifact"]["path"] == str((tmp_path / "plan.md").resolve())
    # The chain ran both its steps, each in its own run file that names the other.
    red, last = run_file(tmp_path, "c.red-team"), run_file(tmp_path, "c")
    assert red["request"]["deliberation"]["council_type"] == "red_team"
    assert [r["run_id"] for r in last["request"]["chain"]["runs"]] == ["c.red-team", "c"]
    assert last["request"]["chain"]["step"] == 2
    d = run_file(tmp_path, "d")["request"]["deliberation"]
    assert d["method"] == "vote" and d["rounds"]["max_rounds"] == 2
    assert d["rounds"]["on_divergence"] == "halt"

    # What each line asked is what its run file answers: a rerun runs nothing again.
    again = rune(tmp_path, str(path), "--json")
    kept = {r["id"]: r for r in map(json.loads, again.stdout.splitlines())}
    finished = {i for i, r in rows.items() if r["status"] == "complete"}
    assert finished and {i for i, r in kept.items() if r["resumed"]} == finished


def test_the_batch_takes_the_council_flags_of_rune_council(tmp_path: Path) -> None:
    import typer

    import rune_council.cli  # noqa: F401  (registers the commands)
    from rune_council.cli.app import council_app
    from rune_council.council.intake import FLAGS

    batch = typer.main.get_command(council_app).commands["batch"]  # type: ignore[attr-defined]
    given = {opt for param in batch.params for opt in param.opts}
    assert set(FLAGS.values()) - given == {"--id"}  # every line has its own

    fakes(tmp_path)
    path = write(
        tmp_path,
        [
            {"id": "a", "question": "Is A ready?"},
            {"id": "b", "question": "Is B ready?", "multi_round": {"max_rounds": 1}},
        ],
    )
    out = rune(tmp_path, str(path), "--deliberate", "rank", "--rounds", "2", "--n", "2", "--json")
    assert out.returncode in (0, 1), out.stderr
    a, b = (run_file(tmp_path, i)["request"] for i in ("a", "b"))
    assert a["deliberation"]["method"] == b["deliberation"]["method"] == "rank"
    assert a["n"] == b["n"] == 2
    # The flags are defaults; a line's own keys beat them, key by key.
    assert (
        a["deliberation"]["rounds"]["max_rounds"],
        b["deliberation"]["rounds"]["max_rounds"],
    ) == (2, 1)

    bad = rune(tmp_path, str(path), "--rounds", "11")
    assert bad.returncode == 2
    assert "--rounds: Input should be less than or equal to 10" in bad.stderr


def test_an_unknown_key_names_its_line_and_the_closest_valid_key(tmp_path: Path) -> None:
    fakes(tmp_path)
    path = write(
        tmp_path,
        [
            {"id": "ok", "question": "Fine?"},
            {"id": "k1", "questoin": "Typo?"},
            {"id": "k2", "question": "Rounds?", "multi_round": {"max_round": 2}},
            {"id": "k3", "question": "Consent?", "yes": True},
        ],
    )
    out = rune(tmp_path, str(path), "--strict")
    assert out.returncode == 2
    assert "line 2: questoin: unknown key 'questoin' (closest valid key: 'question')" in out.stderr
    assert (
        "line 3: multi_round.max_round: unknown key 'max_round' (closest valid key: 'max_rounds')"
        in out.stderr
    )
    assert "line 4: yes: only the operator of the batch sets this" in out.stderr
    assert not (tmp_path / ".rune" / "council").exists()

    header = tmp_path / "items.csv"
    header.write_text("question,multi_round.max_round\nQ?,2\n")
    out = rune(tmp_path, str(header))
    assert out.returncode == 2
    assert "unknown key 'max_round' (closest valid key: 'max_rounds')" in out.stderr


def test_csv_columns_nest_with_dots_and_list_with_semicolons(tmp_path: Path) -> None:
    fakes(tmp_path)
    path = tmp_path / "items.csv"
    (tmp_path / "plan.md").write_text(PLAN)
    path.write_text(
        "id,question,template,artifact,multi_round.max_rounds,prefer,artifact_name\n"
        "s1,Is it safe?,security-review,plan.md,2,openai;google,The plan\n"
    )
    out = rune(tmp_path, str(path), "--json")
    assert out.returncode in (0, 1), out.stderr
    request = run_file(tmp_path, "s1")["request"]
    assert request["template"]["name"] == "security-review"
    assert request["deliberation"]["rounds"]["max_rounds"] == 2
    assert request["diversity"]["prefer_model_families"] == ["openai", "google"]
    assert request["artifact"]["name"] == "The plan"
    assert [r.status for r in read_rows(results(tmp_path))] != ["invalid"]


def test_the_operators_endpoint_url_is_not_held_to_council_toml(tmp_path: Path) -> None:
    fakes(tmp_path)
    path = write(tmp_path, [{"id": "e1", "question": "Is it up?"}])
    # Nothing listens there: the endpoint lists no models, the CLIs still answer.
    out = rune(tmp_path, str(path), "--endpoint", "http://127.0.0.1:9/v1", "--json")
    assert out.returncode in (0, 1), out.stderr
    [row] = [json.loads(line) for line in out.stdout.splitlines()]
    assert row["status"] != "invalid", row
    # A line naming a URL of its own is refused: only council.toml's names are its to use.
    line = write(
        tmp_path, [{"id": "e2", "question": "Mine?", "endpoints": ["http://127.0.0.1:9/v1"]}]
    )
    out = rune(tmp_path, str(line), "--strict")
    assert out.returncode == 2 and "endpoints.0: no endpoint named" in out.stderr
    assert env(tmp_path)["RUNE_COUNCIL_ALLOW_EXTERNAL"] == "1"


def test_an_artifact_changed_since_its_run_runs_again(tmp_path: Path) -> None:
    items = write_items(tmp_path / "items.jsonl", questions(2))
    runtimes = voices()
    asyncio.run(run_batch(items, options(tmp_path, runtimes)))
    (tmp_path / "plan.md").write_text("1. Drain.\n2. Switch.\n3. A rollback step is defined.\n")
    asyncio.run(run_batch(items, options(tmp_path, runtimes)))
    rows = read_rows(tmp_path / "results.jsonl")
    assert [r.resumed for r in rows] == [False, False]
    assert "A rollback step is defined" in run_file(tmp_path, "q0")["artifact_text"]
