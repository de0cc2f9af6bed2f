"""Sealed ballots: run files edited the way someone forging a verdict would, then verified.

Each attack runs a real council (tests/test_verify_ballots.py ``_run``: three members as
real subprocesses behind ``CommandRuntime``, which answer, vote on numbered items and rank
the others' answers), edits a copy of its run file with the suite's own forgeries (a ballot
reply changed, a vote flipped with the outcome, score and verdict brought in line, voters
swapped so the outcome stays, a raw reply edited with or without what was derived from it,
a digest removed, an older contract claimed), and runs ``rune council verify`` on both.
The council itself runs inside the bench; the peak is that of the verify processes.

Held: verify exits 1 on the edited file naming the field, and 0 on the untouched one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rune_council.core.contract import VoteResult
from rune_council.deliberation.tally import tally_text
from tests.test_verify_ballots import _a_no, _edited, _flip, _rederive_verdict, _run

from .kit import OFFLINE, Row, World, attack, expect

SECTION = "sealed ballots (verify)"
Edit = Callable[[dict[str, Any]], None]


def _council(w: World, method: str) -> Path:
    return Path(_run(w.tmp, method, method=method))


def _verify(w: World, honest: Path, edit: Edit, *fields: str, tampered: str | None = None) -> Row:
    failures: list[str] = []
    env = {"PATH": "/usr/bin:/bin", "HOME": str(w.tmp), "LANG": "C.UTF-8", **OFFLINE}
    w.file_roots = [w.tmp / "rune"]
    clean = w.rune("verify", str(honest), env=env)
    expect(failures, "reproduced" in clean.stdout, "the untouched file did not reproduce")
    forged = _edited(honest, edit)
    ran = w.rune("verify", str(forged), env=env, ok=(1,))
    expect(failures, "NOT reproduced" in ran.stdout, "the forgery verifies as reproduced")
    lines = ran.stdout.splitlines()
    for name in fields:
        named = any(x.startswith(f"  {name}") and ": recorded" in x for x in lines)
        expect(failures, named, f"{name} not named")
    if tampered:
        line = f"  {tampered}.text: recorded '(tampered:"
        expect(failures, line in ran.stdout, f"{tampered}.text not named as tampered")
    what = ", ".join([*fields, *([f"{tampered}.text tampered"] if tampered else [])])
    return w.row(failures, f"exit 1 naming {what}; the untouched file exits 0")


@attack("rank ballot reply edited (RANK order swapped)", SECTION)
def _(w: World) -> Row:
    def edit(doc: dict[str, Any]) -> None:
        ballot = doc["deliberation"]["rank"]["ballots"][0]
        first, second = ballot["text"].split("RANK ")[1].split(" ")[0].split(">")
        ballot["text"] = ballot["text"].replace(f"RANK {first}>{second}", f"RANK {second}>{first}")

    return _verify(w, _council(w, "rank"), edit, tampered="deliberation.rank.ballots[0]")


@attack("vote flipped no -> yes, outcome, score and verdict to match", SECTION)
def _(w: World) -> Row:
    path = _council(w, "vote")
    vote = json.loads(path.read_text(encoding="utf-8"))["deliberation"]["vote"]
    number, voter = _a_no(vote)
    index = [i["number"] for i in vote["items"]].index(number)

    def edit(doc: dict[str, Any]) -> None:
        _flip(doc["deliberation"]["vote"], number, voter, "yes")
        VoteResult.model_validate(doc["deliberation"]["vote"])
        _rederive_verdict(doc)

    return _verify(w, path, edit, f"deliberation.vote.items[{index}].yes")


@attack("vote voters swapped, outcome kept", SECTION)
def _(w: World) -> Row:
    path = _council(w, "vote")
    vote = json.loads(path.read_text(encoding="utf-8"))["deliberation"]["vote"]
    split = next(i for i in vote["items"] if i["yes"] and i["no"])
    index = vote["items"].index(split)

    def edit(doc: dict[str, Any]) -> None:
        item = doc["deliberation"]["vote"]["items"][index]
        item["yes"][0], item["no"][0] = item["no"][0], item["yes"][0]
        _rederive_verdict(doc)

    return _verify(w, path, edit, f"deliberation.vote.items[{index}].yes[0]")


@attack("rank voters swapped, scores and winner kept", SECTION)
def _(w: World) -> Row:
    def edit(doc: dict[str, Any]) -> None:
        rank = doc["deliberation"]["rank"]
        a, b = rank["ballots"][0], rank["ballots"][1]
        text = rank["transcript"]
        text = text.replace(a["voice_id"] + " ", "@swap ").replace(
            b["voice_id"] + " ", a["voice_id"] + " "
        )
        rank["transcript"] = text.replace("@swap ", b["voice_id"] + " ")
        rank["tally"] = tally_text(rank["transcript"]).model_dump(mode="json")
        _rederive_verdict(doc)

    return _verify(w, _council(w, "rank"), edit, "deliberation.rank.transcript")


@attack("raw vote reply edited, its ballot left", SECTION)
def _(w: World) -> Row:
    def edit(doc: dict[str, Any]) -> None:
        ballot = doc["deliberation"]["vote"]["ballots"][2]
        ballot["text"] = ballot["text"].replace(" no", " yes")

    return _verify(w, _council(w, "vote"), edit, tampered="deliberation.vote.ballots[2]")


@attack("vote reply and ballot edited together, digest left", SECTION)
def _(w: World) -> Row:
    path = _council(w, "vote")
    vote = json.loads(path.read_text(encoding="utf-8"))["deliberation"]["vote"]
    number, voter = _a_no(vote)
    at = [b["voice_id"] for b in vote["ballots"]].index(voter)

    def edit(doc: dict[str, Any]) -> None:
        ballot = doc["deliberation"]["vote"]["ballots"][at]
        ballot["text"] = ballot["text"].replace(f"VOTE -> {number} no", f"VOTE -> {number} yes")
        _flip(doc["deliberation"]["vote"], number, voter, "yes")
        _rederive_verdict(doc)

    return _verify(w, path, edit, tampered=f"deliberation.vote.ballots[{at}]")


@attack("ballot digest removed", SECTION)
def _(w: World) -> Row:
    def edit(doc: dict[str, Any]) -> None:
        doc["deliberation"]["vote"]["ballots"][0]["digest"] = None

    return _verify(w, _council(w, "vote"), edit, "deliberation.vote.ballots[0].digest")


@attack("schema_version lowered to 2.5, seals kept", SECTION)
def _(w: World) -> Row:
    def edit(doc: dict[str, Any]) -> None:
        doc["schema_version"] = "2.5"

    return _verify(w, _council(w, "vote"), edit, "schema_version")
