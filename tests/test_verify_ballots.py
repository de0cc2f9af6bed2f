"""verify re-derives every ballot from the raw reply its member sent, sealed by digest.

The members are real subprocesses (a small voice script behind ``CommandRuntime``) that
answer the question, vote on numbered items and rank the others' answers under the letters
they were shown. Each run file is then edited the way someone forging a verdict would: a
ballot reply changed, a vote flipped from no to yes, voter lists swapped so the outcome
stays, a raw reply edited with or without what was derived from it. ``rune council verify``
runs as its own process on every file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from rune_council import CouncilOptions, convene
from rune_council.core.contract import SCHEMA_VERSION, ConsolidatedItem, CouncilResult, VoteResult
from rune_council.deliberation import rank as rank_mod
from rune_council.deliberation.metadata import verdict_metadata
from rune_council.deliberation.tally import tally_text
from rune_council.deliberation.vote import approval_concordance, arithmetic_verdict
from rune_council.runtimes.subagent import CommandRuntime
from tests.helpers import PLAN, QUESTION, ROLLBACK, SHARDS, UNDO, answer, council_result_schema

ROOT = Path(__file__).resolve().parents[1]

# A member: its answer comes from a file; it votes yes on items naming what it likes and
# ranks the answers naming what it likes first. Only the standard library, so it starts fast.
VOICE = r"""
import re, sys
answer_file, likes = sys.argv[1], sys.argv[2].lower()
ballot = sys.argv[3] if len(sys.argv) > 3 else "honest"
prompt = sys.stdin.read()
if "Items:" in prompt and "VOTE -> " in prompt:
    if ballot == "fails":
        sys.exit(3)
    items = re.findall(r"^(\d+)\. (.*)$", prompt.split("Items:")[1].split("\n\n")[0], re.M)
    votes = [f"VOTE -> {n} {'yes' if likes in text.lower() else 'no'}" for n, text in items]
    if ballot == "floods":
        # The first vote, a flood past the bound, then the rest: only the first is read.
        votes = [votes[0], "x" * 25_000, *votes[1:]]
    print("\n".join(votes))
elif "\nRANK " in prompt and "Answer " in prompt:
    shown = dict(re.findall(
        r"^Answer ([A-Z]):\n(.*?)(?=\n\nAnswer [A-Z]:|\n\nRank the )", prompt, re.M | re.S
    ))
    order = sorted(shown, key=lambda k: (0 if likes in shown[k].lower() else 1, k))
    print("RANK " + ">".join(order) + " conf=0.8")
    print('CRITIQUE SHOULD -> ' + order[-1] + ' "says too little about the rollback"')
else:
    print(open(answer_file, encoding="utf-8").read())
"""

MEMBERS = (
    ("claude", "anthropic", "NO, not before a rollback exists", [ROLLBACK], "rollback"),
    ("codex", "openai", "NO, there is no way back", [UNDO], "rollback"),
    ("gemini", "google", "YES, eight shards leave headroom", [SHARDS], "headroom"),
)


def _members(tmp_path: Path, ballots: tuple[str, ...] = ()) -> list[CommandRuntime]:
    """``ballots``: how each member replies to a ballot (honest, floods, fails)."""
    script = tmp_path / "voice.py"
    script.write_text(VOICE, encoding="utf-8")
    out = []
    for k, (name, family, stance, claims, likes) in enumerate(MEMBERS):
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


def _run(tmp_path: Path, run_id: str, ballots: tuple[str, ...] = (), **deliberation: Any) -> Path:
    rune = tmp_path / "rune"
    convene(
        {
            "id": run_id,
            "question": QUESTION,
            "n": 3,
            "artifact": {"name": "plan.md", "text": PLAN},
            "deliberation": deliberation,
        },
        CouncilOptions(runtimes=_members(tmp_path, ballots), rune_dir=rune),
    )
    return rune / "council" / f"run-{run_id}.json"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One council per method, run once for the module: vote, rank, rank over two rounds,
    vote over two rounds, red team."""
    made = {}
    setups: dict[str, dict[str, Any]] = {
        "vote": {"method": "vote"},
        "rank": {"method": "rank"},
        "rounds": {"method": "rank", "rounds": {"max_rounds": 2, "convergence_threshold": 1}},
        "vote-rounds": {"method": "vote", "rounds": {"max_rounds": 2, "convergence_threshold": 1}},
        "red": {"method": "rank", "council_type": "red_team"},
    }
    for name, deliberation in setups.items():
        made[name] = _run(tmp_path_factory.mktemp(name), name, **deliberation)
    return made


def _verify(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rune_council.cli", "council", "verify", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


Edit = Callable[[dict[str, Any]], None]


def _edited(path: Path, edit: Edit, name: str = "edited") -> Path:
    doc = json.loads(path.read_text(encoding="utf-8"))
    edit(doc)
    out = path.with_name(f"run-{name}.json")
    out.write_text(json.dumps(doc), encoding="utf-8")
    # The artifact is kept beside the run file, under the file's own name (contract 2.8).
    artifact = path.with_suffix(".artifact")
    if artifact.exists():
        out.with_suffix(".artifact").write_bytes(artifact.read_bytes())
    return out


def _differs(path: Path, *fields: str) -> str:
    result = _verify(path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "NOT reproduced" in result.stdout
    lines = result.stdout.splitlines()
    for name in fields:
        # The field itself, or a part of it (items[0].yes[1] is part of items).
        named = [x for x in lines if x.startswith(f"  {name}") and ": recorded" in x]
        assert named, f"{name} not named:\n{result.stdout}"
    return result.stdout


def _tampered(path: Path, where: str) -> None:
    """The ballot reply at ``where`` was edited after it was sealed: verify says so."""
    out = _differs(path, f"{where}.text")
    assert f"  {where}.text: recorded '(tampered:" in out, out


# --------------------------------------------------------------------------- the honest files


def test_every_untouched_run_verifies_and_seals_each_ballot(runs: dict[str, Path]) -> None:
    schema = council_result_schema()
    for path in runs.values():
        doc = json.loads(path.read_text(encoding="utf-8"))
        jsonschema.validate(doc, schema)
        assert doc["schema_version"] == SCHEMA_VERSION
        d = doc["deliberation"]
        ballots = [b for part in ("vote", "rank") if d.get(part) for b in d[part]["ballots"]]
        assert len(ballots) == 3 and all(b["outcome"] == "counted" for b in ballots)
        assert all(b["digest"].startswith("sha256:") and b["text"] for b in ballots)
        result = _verify(path)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "reproduced" in result.stdout
        assert "ballots" not in result.stdout.split("verify cannot check:")[0]


# --------------------------------------------------------------------------- rank ballots


def test_an_edited_rank_reply_is_tampered_and_its_ballot_is_re_derived(
    runs: dict[str, Path],
) -> None:
    def edit(doc: dict[str, Any]) -> None:
        ballot = doc["deliberation"]["rank"]["ballots"][0]
        first, second = ballot["text"].split("RANK ")[1].split(" ")[0].split(">")
        ballot["text"] = ballot["text"].replace(f"RANK {first}>{second}", f"RANK {second}>{first}")

    out = _differs(_edited(runs["rank"], edit), "deliberation.rank.transcript")
    assert "  deliberation.rank.ballots[0].text: recorded '(tampered:" in out
    assert "deliberation.rank.ballots[0].detail" in out  # the RANK line as it now reads


def test_a_rank_ballot_rewritten_in_the_derived_records_is_named(runs: dict[str, Path]) -> None:
    """The transcript, the ballot's counted line and the tally all say the member ranked the
    other way; only its raw reply (untouched, still sealed) says what it sent."""

    def edit(doc: dict[str, Any]) -> None:
        rank = doc["deliberation"]["rank"]
        line = rank["ballots"][0]["detail"]
        voter, _, order, conf = line.split(" ")
        flipped = f"{voter} RANK {'>'.join(reversed(order.split('>')))} {conf}"
        rank["ballots"][0]["detail"] = flipped
        rank["transcript"] = rank["transcript"].replace(line, flipped)
        rank["tally"] = tally_text(rank["transcript"]).model_dump(mode="json")
        _rederive_verdict(doc)

    out = _differs(
        _edited(runs["rank"], edit),
        "deliberation.rank.transcript",
        "deliberation.rank.ballots[0].detail",
    )
    assert "tampered" not in out


def test_rank_voters_swapped_with_the_same_order_are_named(runs: dict[str, Path]) -> None:
    """Two members' counted lines trade voters: every score and the winner stay the same."""

    def edit(doc: dict[str, Any]) -> None:
        rank = doc["deliberation"]["rank"]
        a, b = rank["ballots"][0], rank["ballots"][1]
        text = rank["transcript"]
        text = text.replace(a["voice_id"] + " ", "@swap ").replace(
            b["voice_id"] + " ", a["voice_id"] + " "
        )
        rank["transcript"] = text.replace("@swap ", b["voice_id"] + " ")
        before = rank["tally"]
        rank["tally"] = tally_text(rank["transcript"]).model_dump(mode="json")
        assert rank["tally"]["winner"] == before["winner"]
        assert rank["tally"]["scores"] == before["scores"]
        _rederive_verdict(doc)

    _differs(_edited(runs["rank"], edit), "deliberation.rank.transcript")


def test_a_later_round_ballot_is_re_derived_too(runs: dict[str, Path]) -> None:
    def edit(doc: dict[str, Any]) -> None:
        first = doc["deliberation"]["rounds"][0]["rank"]
        ballot = first["ballots"][1]
        ballot["text"] = ballot["text"].replace("conf=0.8", "conf=0.1")

    _tampered(_edited(runs["rounds"], edit), "deliberation.rounds[0].rank.ballots[1]")


def test_a_proposal_handed_to_another_member_is_named(runs: dict[str, Path]) -> None:
    """Who wrote which answer (the label behind each letter) is re-derived, not taken."""

    def edit(doc: dict[str, Any]) -> None:
        proposals = doc["deliberation"]["rank"]["proposals"]
        proposals[0]["voice_id"], proposals[1]["voice_id"] = (
            proposals[1]["voice_id"],
            proposals[0]["voice_id"],
        )

    _differs(_edited(runs["red"], edit), "deliberation.rank.proposals[0].voice_id")


# --------------------------------------------------------------------------- vote ballots


def _rederive_verdict(doc: dict[str, Any]) -> None:
    """What verify used to derive from the edited records (the arithmetic verdict, its
    markers, the verdict block), brought in line: a forgery verify used to accept."""
    result = CouncilResult.model_validate(doc)
    d = result.deliberation
    assert d is not None and d.synthesis is not None
    if d.vote is not None:
        text = arithmetic_verdict(d.vote)
    else:
        assert d.rank is not None
        disagreements = [x for x in result.agreement.dissent if x.label == "disagreement"]
        text = rank_mod.arithmetic_verdict(d.rank.proposals, d.rank.tally, disagreements)
    d.synthesis.text = text
    d.synthesis.uncertainty_markers = rank_mod.uncertainty_markers(text)
    result.verdict = verdict_metadata(result)
    doc["deliberation"]["synthesis"] = d.synthesis.model_dump(mode="json")
    doc["verdict"] = result.verdict.model_dump(mode="json")


def _flip(vote: dict[str, Any], number: int, voter: str, to: str, measure: bool = True) -> None:
    """Move ``voter``'s vote on item ``number`` to ``to``; count the item and (``measure``)
    the agreement again, as the council would have for such a ballot."""
    item = next(i for i in vote["items"] if i["number"] == number)
    for choice in ("yes", "no", "abstain"):
        if voter in item[choice]:
            item[choice].remove(voter)
    item[to] = [v for v in vote["counted"] if v in item[to] or v == voter]
    item["outcome"] = "passed" if len(item["yes"]) >= item["required"] else "failed"
    if not measure:
        return
    choices: dict[str, dict[int, str]] = {v: {} for v in vote["counted"]}
    for i in vote["items"]:
        for choice in ("yes", "no", "abstain"):
            for v in i[choice]:
                choices[v][i["number"]] = choice
    listed = [
        ConsolidatedItem(number=i["number"], text=i["text"], sources=[], voice_ids=[])
        for i in vote["items"]
    ]
    consensus, dissenters = approval_concordance(listed, choices)
    vote["consensus"] = consensus.model_dump(mode="json")
    vote["dissenters"] = dissenters


def _a_no(vote: dict[str, Any]) -> tuple[int, str]:
    item = next(i for i in vote["items"] if i["no"])
    return item["number"], item["no"][0]


def test_a_vote_flipped_from_no_to_yes_is_named(runs: dict[str, Path]) -> None:
    path = runs["vote"]
    vote = json.loads(path.read_text(encoding="utf-8"))["deliberation"]["vote"]
    number, voter = _a_no(vote)
    index = [i["number"] for i in vote["items"]].index(number)

    def edit(doc: dict[str, Any]) -> None:
        _flip(doc["deliberation"]["vote"], number, voter, "yes")
        VoteResult.model_validate(doc["deliberation"]["vote"])
        _rederive_verdict(doc)

    out = _differs(
        _edited(path, edit),
        f"deliberation.vote.items[{index}].yes",
        f"deliberation.vote.items[{index}].no",
    )
    assert "tampered" not in out  # the raw replies were left alone: they give the truth


def test_voters_swapped_with_the_outcome_kept_are_named(runs: dict[str, Path]) -> None:
    path = runs["vote"]
    vote = json.loads(path.read_text(encoding="utf-8"))["deliberation"]["vote"]
    split = next(i for i in vote["items"] if i["yes"] and i["no"])
    index = vote["items"].index(split)

    def edit(doc: dict[str, Any]) -> None:
        item = doc["deliberation"]["vote"]["items"][index]
        item["yes"][0], item["no"][0] = item["no"][0], item["yes"][0]
        assert item["outcome"] == split["outcome"]
        _rederive_verdict(doc)

    _differs(_edited(path, edit), f"deliberation.vote.items[{index}].yes[0]")


def test_a_counted_voter_list_that_drops_a_member_is_named(runs: dict[str, Path]) -> None:
    def edit(doc: dict[str, Any]) -> None:
        vote = doc["deliberation"]["vote"]
        # The member's ballot stays on file, counted; the lists no longer name it.
        gone = vote["counted"].pop()
        vote["denominator"] -= 1
        for item in vote["items"]:
            for choice in ("yes", "no", "abstain"):
                item[choice] = [v for v in item[choice] if v != gone]
            item["required"] = 2
            item["outcome"] = "passed" if len(item["yes"]) >= 2 else "failed"
        _rederive_verdict(doc)

    _differs(_edited(runs["vote"], edit), "deliberation.vote.counted[2]")


def test_a_raw_vote_reply_edited_and_its_ballot_left_is_tampered(runs: dict[str, Path]) -> None:
    def edit(doc: dict[str, Any]) -> None:
        ballot = doc["deliberation"]["vote"]["ballots"][2]
        ballot["text"] = ballot["text"].replace(" no", " yes")

    _tampered(_edited(runs["vote"], edit), "deliberation.vote.ballots[2]")


def test_a_reply_and_its_ballot_edited_together_are_caught_by_the_digest(
    runs: dict[str, Path],
) -> None:
    """The raw reply says yes, the tallies say yes, the verdict says yes: only the digest
    sealed when the reply arrived still says what the member sent."""
    path = runs["vote"]
    vote = json.loads(path.read_text(encoding="utf-8"))["deliberation"]["vote"]
    number, voter = _a_no(vote)
    at = [b["voice_id"] for b in vote["ballots"]].index(voter)

    def edit(doc: dict[str, Any]) -> None:
        ballot = doc["deliberation"]["vote"]["ballots"][at]
        ballot["text"] = ballot["text"].replace(f"VOTE -> {number} no", f"VOTE -> {number} yes")
        _flip(doc["deliberation"]["vote"], number, voter, "yes")
        _rederive_verdict(doc)

    out = _differs(_edited(path, edit))
    assert f"  deliberation.vote.ballots[{at}].text: recorded '(tampered:" in out
    # Everything derived agrees with the edited reply: the digest is the only witness.
    assert "deliberation.vote.items" not in out


def test_a_vote_of_an_earlier_round_is_re_derived(runs: dict[str, Path]) -> None:
    path = runs["vote-rounds"]
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert len(doc["deliberation"]["rounds"]) == 2
    number, voter = _a_no(doc["deliberation"]["rounds"][0]["vote"])

    def edit(doc: dict[str, Any]) -> None:
        # The round's agreement is left as measured, so its score still matches its record.
        _flip(doc["deliberation"]["rounds"][0]["vote"], number, voter, "yes", measure=False)

    _differs(_edited(path, edit), "deliberation.rounds[0].vote.items[")


def test_a_ballot_whose_digest_was_removed_is_named(runs: dict[str, Path]) -> None:
    def edit(doc: dict[str, Any]) -> None:
        doc["deliberation"]["vote"]["ballots"][0]["digest"] = None

    _differs(_edited(runs["vote"], edit), "deliberation.vote.ballots[0].digest")


def test_a_flooded_and_a_failed_ballot_verify_as_read_and_stay_absent(tmp_path: Path) -> None:
    """A reply past the bound is read only as far as it is recorded, so verify reads the
    same ballot; a ballot whose runtime failed stays absent, and cannot be made to count."""
    path = _run(tmp_path, "uneven", ballots=("honest", "floods", "fails"), method="vote")
    vote = json.loads(path.read_text(encoding="utf-8"))["deliberation"]["vote"]
    flooded, failed = vote["ballots"][1], vote["ballots"][2]
    assert flooded["truncated"] and len(flooded["text"]) == 20_000
    assert flooded["outcome"] == "counted" and flooded["detail"] == "1 vote(s)"
    assert failed["outcome"] == "failed" and failed["detail"].startswith("exit_nonzero")
    assert vote["counted"] == ["v1", "v2"] and vote["denominator"] == 2
    result = _verify(path)
    assert result.returncode == 0, result.stdout + result.stderr

    def count_it(doc: dict[str, Any]) -> None:
        vote = doc["deliberation"]["vote"]
        vote["ballots"][2]["outcome"] = "counted"
        vote["absent"] = [a for a in vote["absent"] if a["voice_id"] != "v3"]

    _differs(_edited(path, count_it), "deliberation.vote.ballots[2].outcome")


# --------------------------------------------------------------------------- older run files


def _as_older(doc: dict[str, Any]) -> None:
    """The file as a writer of contract 2.5 left it: ballots without seal or truncation flag."""
    doc["schema_version"] = "2.5"
    doc["request"]["schema_version"] = "2.5"
    d = doc["deliberation"]
    for part in [d, *d["rounds"]]:
        for name in ("vote", "rank"):
            for ballot in (part.get(name) or {}).get("ballots", []):
                del ballot["digest"], ballot["truncated"]


def test_an_older_file_says_its_ballots_were_not_re_derived(runs: dict[str, Path]) -> None:
    older = _edited(runs["vote"], _as_older, "older")
    result = _verify(older)
    assert result.returncode == 0, result.stdout
    # Not a plain "reproduced": the first line says part of it went unchecked, and what.
    first = result.stdout.splitlines()[0]
    assert "reproduced" in first and "1 part(s) of it could not be checked" in first
    assert "not checked: deliberation.vote.ballots: recorded by contract 2.5" in result.stdout


def test_a_file_that_claims_an_older_contract_but_carries_seals_is_named(
    runs: dict[str, Path],
) -> None:
    def edit(doc: dict[str, Any]) -> None:
        doc["schema_version"] = "2.5"

    _differs(_edited(runs["vote"], edit), "schema_version")
