"""Ballots and the chairman as real models write them, through whole councils.

The members and the chairman are real subprocesses (small scripts behind ``CommandRuntime``)
that reply the way real models do: a RANK naming a letter they were never shown, two RANK
lines in one reply, a chairman that answers with noise, repeats its prompt, or writes
nothing of the council's; a vote of two members that splits. Every run file is read the way
a user reads it: the file itself, ``rune council show`` and ``rune council verify``, each as
its own process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from rune_council import CouncilOptions, convene
from rune_council.runs import load
from rune_council.runtimes.subagent import CommandRuntime
from tests.helpers import PLAN, QUESTION, ROLLBACK, SHARDS, UNDO, answer, council_result_schema

ROOT = Path(__file__).resolve().parents[1]

# A member: answers from a file, votes yes on items naming what it likes, and replies to a
# ranking ballot as its ``ballot`` mode says.
VOICE = r"""
import re, sys
answer_file, likes, ballot = sys.argv[1], sys.argv[2], sys.argv[3]
prompt = sys.stdin.read()
if "Items:" in prompt and "VOTE -> " in prompt:
    items = re.findall(r"^(\d+)\. (.*)$", prompt.split("Items:")[1].split("\n\n")[0], re.M)
    if ballot == "chatty":
        print("Here are my votes:")
    print("\n".join(f"VOTE -> {n} {'yes' if likes in t.lower() else 'no'}" for n, t in items))
elif "\nRANK " in prompt and "Answer " in prompt:
    shown = re.findall(r"^Answer ([A-Z]):", prompt, re.M)
    order = ">".join(shown)
    if ballot == "unseen":  # a letter past the ones shown, as a model counting on does
        print(f"RANK {order}>Z conf=0.8")
    elif ballot == "twice":  # a draft, then the ranking it settles on
        print(f"RANK {order} conf=0.8")
        print(f"RANK {'>'.join(reversed(shown))} conf=0.6")
    elif ballot == "then-unseen":  # a ranking, then one that names a letter never shown
        print(f"RANK {order} conf=0.8")
        print(f"RANK {order}>Z conf=0.9")
    else:
        print(f"RANK {order} conf=0.8")
else:
    print(open(answer_file, encoding="utf-8").read())
"""

# A chairman: merges nothing it is asked to merge, and writes the verdict as ``mode`` says.
CHAIR = r"""
import sys
mode = sys.argv[1]
prompt = sys.stdin.read()
if "You are the orchestrator" in prompt:
    print("nothing useful")
elif mode == "exits":
    sys.exit(3)
elif mode == "noise":
    print("lorem ipsum dolor sit amet, consectetur adipiscing elit\nSYNTH open=[]")
elif mode == "echo":
    print(prompt)
else:
    print("Add a rollback step before sharding: the plan has no way back.\nSYNTH open=[]")
"""

MEMBERS = (
    ("claude", "anthropic", "NO, not before a rollback exists", [ROLLBACK], "rollback"),
    ("codex", "openai", "NO, there is no way back", [UNDO], "rollback"),
    ("gemini", "google", "YES, eight shards leave headroom", [SHARDS], "headroom"),
)


def _runtimes(
    tmp_path: Path, ballots: tuple[str, ...], seats: tuple[str, ...]
) -> list[CommandRuntime]:
    script = tmp_path / "voice.py"
    script.write_text(VOICE, encoding="utf-8")
    out = []
    members = [m for m in MEMBERS if m[0] in seats]
    for k, (name, family, stance, claims, likes) in enumerate(members):
        answer_file = tmp_path / f"{name}.answer"
        answer_file.write_text(answer(QUESTION, stance, claims), encoding="utf-8")
        how = ballots[k] if k < len(ballots) else "honest"
        out.append(
            CommandRuntime(
                argv=[sys.executable, "-S", str(script), str(answer_file), likes, how],
                name=name,
                model_family=family,
                family_confidence="confirmed",
            )
        )
    return out


def _council(
    tmp_path: Path,
    run_id: str,
    *,
    ballots: tuple[str, ...] = (),
    chair: str | None = None,
    seats: tuple[str, ...] = ("claude", "codex", "gemini"),
    **deliberation: Any,
) -> tuple[Path, dict[str, Any]]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    orchestrator = None
    if chair is not None:
        script = tmp_path / "chair.py"
        script.write_text(CHAIR, encoding="utf-8")
        orchestrator = CommandRuntime(argv=[sys.executable, "-S", str(script), chair], name="chair")
    rune = tmp_path / "rune"
    convene(
        {
            "id": run_id,
            "question": QUESTION,
            "n": len(seats),
            "artifact": {"name": "plan.md", "text": PLAN},
            "deliberation": deliberation,
        },
        CouncilOptions(
            runtimes=_runtimes(tmp_path, ballots, seats), rune_dir=rune, orchestrator=orchestrator
        ),
    )
    path = rune / "council" / f"run-{run_id}.json"
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    jsonschema.validate(doc, council_result_schema())
    return path, doc


def _rune(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rune_council.cli", "council", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def _shown(path: Path) -> str:
    out = _rune("show", str(path))
    assert out.returncode == 0, out.stderr
    assert "- **Verification**: reproduced from the recorded raw answers" in out.stdout
    return out.stdout


def _verified(path: Path) -> None:
    out = _rune("verify", str(path))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "reproduced" in out.stdout and "NOT reproduced" not in out.stdout


def _ballot(doc: dict[str, Any], voice_id: str) -> dict[str, Any]:
    return next(b for b in doc["deliberation"]["rank"]["ballots"] if b["voice_id"] == voice_id)


# --------------------------------------------------------------------------- rank ballots


def test_a_rank_naming_a_letter_never_shown_is_dropped_on_its_ballot(tmp_path: Path) -> None:
    path, doc = _council(tmp_path, "unseen", ballots=("unseen",), method="rank")
    rank = doc["deliberation"]["rank"]
    ballot = _ballot(doc, "v1")
    # Its only RANK names Z: nothing of it counts, and the member is absent from the tally.
    assert ballot["outcome"] == "malformed"
    assert [(d["line"], d["reason"], d["source"]) for d in ballot["dropped_lines"]] == [
        (1, "Z was not shown to this member", "v1")
    ]
    assert ballot["dropped_lines"][0]["text"].endswith(">Z conf=0.8")
    assert "v1" not in [r["ranker"] for r in rank["tally"]["rankers"]]
    assert [a["voice_id"] for a in rank["absent"]] == ["v1"]

    shown = _shown(path)
    assert "  - absent v1 (ballot): malformed ballot: no usable RANK line" in shown
    line = next(x for x in shown.splitlines() if x.startswith("  - v1: 1 line(s) not counted"))
    assert line.startswith("  - v1: 1 line(s) not counted: line 1 'RANK ")
    assert line.endswith(">Z conf=0.8': Z was not shown to this member")
    _verified(path)


def test_of_several_rank_lines_the_last_countable_one_counts(tmp_path: Path) -> None:
    path, doc = _council(tmp_path, "twice", ballots=("twice", "then-unseen"), method="rank")
    twice, then_unseen = _ballot(doc, "v1"), _ballot(doc, "v2")
    shuffles = {s["voice_id"]: s["shown"] for s in doc["deliberation"]["rank"]["shuffles"]}

    # v1 drafted A>B, then settled on B>A: the last counts, the draft is superseded.
    draft, settled = twice["text"].splitlines()
    letters = settled.split()[1].split(">")
    assert twice["outcome"] == "counted"
    assert twice["detail"] == f"v1 RANK {'>'.join(shuffles['v1'][x] for x in letters)} conf=0.6"
    assert twice["dropped_lines"] == [
        {"line": 1, "text": draft, "reason": "superseded by the RANK on line 2", "source": "v1"}
    ]
    # v2's later RANK names a letter it never saw: it cannot count, so it supersedes nothing.
    first, later = then_unseen["text"].splitlines()
    counted = ">".join(shuffles["v2"][x] for x in first.split()[1].split(">"))
    assert then_unseen["outcome"] == "counted"
    assert then_unseen["detail"] == f"v2 RANK {counted} conf=0.8"
    assert then_unseen["dropped_lines"] == [
        {"line": 2, "text": later, "reason": "Z was not shown to this member", "source": "v2"}
    ]
    transcript = doc["deliberation"]["rank"]["transcript"]
    assert twice["detail"] in transcript and then_unseen["detail"] in transcript

    shown = _shown(path)
    assert f"  - v1: 1 line(s) not counted: line 1 '{draft}': superseded by the RANK on line 2" in (
        shown
    )
    assert f"  - v2: 1 line(s) not counted: line 2 '{later}': Z was not shown to this member" in (
        shown
    )
    _verified(path)


def test_verify_reads_each_ballots_dropped_lines_from_the_sealed_reply(tmp_path: Path) -> None:
    """A ballot whose refused line is taken off its record is named: the reply says more."""
    path, doc = _council(tmp_path, "hidden", ballots=("twice",), method="rank")
    _ballot(doc, "v1")["dropped_lines"] = []
    edited = path.with_name("run-hidden-edited.json")
    edited.write_text(json.dumps(doc), encoding="utf-8")
    out = _rune("verify", str(edited))
    assert out.returncode == 1 and "NOT reproduced" in out.stdout, out.stdout
    assert "deliberation.rank.ballots[0].dropped_lines[0]" in out.stdout
    assert "tampered" not in out.stdout  # the reply itself is as it was sealed


# --------------------------------------------------------------------------- the chairman


@pytest.mark.parametrize(
    ("mode", "why"),
    [
        ("noise", "the reply refers to none of the 3 answers it was given"),
        ("echo", "the reply repeats the chairman's prompt instead of answering it"),
    ],
)
def test_a_chairman_reply_that_does_not_synthesise_is_a_failed_chairman(
    tmp_path: Path, mode: str, why: str
) -> None:
    path, doc = _council(tmp_path / mode, mode, chair=mode, method="rank")
    synthesis = doc["deliberation"]["synthesis"]
    assert synthesis["fallback"] == "arithmetic" and synthesis["by"] is None
    assert synthesis["fallback_reason"].startswith(f"chair: malformed: {why}")
    attempt = synthesis["attempt"]
    assert attempt["outcome"] == "malformed" and attempt["detail"].startswith(why)
    if mode == "noise":
        assert attempt["output_tail"].startswith("lorem ipsum dolor sit amet")

    # The same fallback, marked the same way, as a chairman whose process fails (the same
    # run id, so the same shuffles, ballots and tally).
    _, failed = _council(tmp_path / "exits", mode, chair="exits", method="rank")
    exited = failed["deliberation"]["synthesis"]
    assert exited["fallback"] == "arithmetic" and exited["attempt"]["outcome"] == "exit_nonzero"
    assert exited["fallback_reason"].startswith("chair: exit_nonzero: ")
    assert exited["text"] == synthesis["text"]

    shown = _shown(path)
    assert "### Verdict (built from the arithmetic)" in shown
    assert f"- no chairman's text: chair: malformed: {why}" in shown
    _verified(path)


def test_a_vote_chairman_that_names_no_item_falls_back_to_the_count(tmp_path: Path) -> None:
    path, doc = _council(tmp_path, "vote-noise", chair="noise", method="vote")
    synthesis = doc["deliberation"]["synthesis"]
    items = len(doc["deliberation"]["vote"]["items"])
    assert synthesis["fallback"] == "arithmetic"
    assert synthesis["fallback_reason"].startswith(
        f"chair: malformed: the reply refers to none of the {items} items it was given"
    )
    assert synthesis["text"].startswith("Vote of 3 counted ballot(s)")
    assert "- no chairman's text: chair: malformed: " in _shown(path)
    _verified(path)

    # The rule refuses what is no synthesis, not a verdict in the chairman's own words.
    path, doc = _council(tmp_path / "kept", "vote-kept", chair="verdict", method="vote")
    synthesis = doc["deliberation"]["synthesis"]
    assert synthesis["fallback"] is None and synthesis["by"] == "chair"
    assert synthesis["text"].startswith("Add a rollback step before sharding")
    assert synthesis["attempt"]["outcome"] == "ok"
    assert "### Verdict (by chair)" in _shown(path)


def test_a_red_team_register_that_cannot_be_read_is_a_failed_chairman(tmp_path: Path) -> None:
    path, doc = _council(
        tmp_path, "red-noise", chair="noise", method="rank", council_type="red_team"
    )
    register = doc["deliberation"]["risk_register"]
    synthesis = doc["deliberation"]["synthesis"]
    assert register["fallback"] == "arithmetic"
    assert register["fallback_reason"] == "chair: malformed: no JSON object found"
    assert synthesis["attempt"]["outcome"] == "malformed"
    assert "### Risk register (built from the arithmetic)" in _shown(path)
    _verified(path)


# --------------------------------------------------------------------------- a vote's dissent


def test_a_vote_that_splits_reports_dissent_from_the_votes(tmp_path: Path) -> None:
    """Two members who vote against each other on every item: nobody stands apart by
    concordance (two ballots), yet every item split and each member was outvoted once."""
    path, doc = _council(
        tmp_path, "split", ballots=("chatty",), method="vote", seats=("claude", "gemini")
    )
    vote = doc["deliberation"]["vote"]
    assert vote["denominator"] == 2 and vote["dissenters"] == []
    assert all(i["yes"] and i["no"] for i in vote["items"])
    verdict = doc["verdict"]
    assert verdict["dissent_basis"] == "votes"
    assert verdict["dissent_detected"] is True
    # Each item needs 2 yes of 2 and failed: its yes voter voted against the outcome.
    assert verdict["dissenting_members"] == ["v1", "v2"]
    assert verdict["dissenting_member"] == "v1"
    shown = _shown(path)
    assert "dissent yes by votes (v1, v2)" in shown
    assert "  - v1: 1 line(s) not counted: line 1 'Here are my votes:': no verb" in shown
    _verified(path)

    # The same run as a 2.6 writer filed it: its ballots list no dropped lines and its
    # dissent was read by the older rule. verify says so rather than report an edit.
    # Its artifact inline, where writers kept it before 2.8.
    old = load(path).model_dump(mode="json")
    old["artifact_file"] = None
    old["schema_version"] = old["request"]["schema_version"] = "2.6"
    old["verdict"].update(
        dissent_detected=False,
        dissent_basis="rankings",
        dissenting_member=None,
        dissenting_members=[],
    )
    for ballot in old["deliberation"]["vote"]["ballots"]:
        del ballot["dropped_lines"]
    older = path.with_name("run-split-2.6.json")
    older.write_text(json.dumps(old), encoding="utf-8")
    out = _rune("verify", str(older))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "before a vote's dissent was read from its votes (2.7)" in out.stdout


def test_a_vote_of_three_names_the_member_outvoted(tmp_path: Path) -> None:
    path, doc = _council(tmp_path, "outvoted", method="vote")
    verdict = doc["verdict"]
    # claude and codex like the rollback items, gemini the headroom ones: gemini is outvoted
    # on every split item, and nobody else is.
    assert verdict["dissent_basis"] == "votes"
    assert verdict["dissent_detected"] is True and verdict["dissenting_members"] == ["v3"]
    assert "dissent yes by votes (v3)" in _shown(path)
    _verified(path)
