"""How many answers written the way real models write them the council can read.

    python bench/answer_yield.py [--extra DIR]... [--show] [--json]

Every answer goes through GATE (the council's own ``stages.gate.gate``, with the question it
answered and the artifact it saw) and is counted as parsed as written, parsed with repairs
(by repair, an answer can need several) or dropped (by reason). The corpus is
tests/fixtures/answer_shapes/: one file per shape, with where that shape was seen in its
index.json. ``--extra DIR`` adds answers from elsewhere, such as the real-model tier's own:

- run files (``run-*.json``, or any ``*.json`` that is a CouncilResult): every voice that
  answered, with the run's question and artifact, and every voice lost before GATE (counted
  as dropped by ``dispatch: <its last attempt's outcome>``, e.g. a reply cut at the token
  limit);
- ``*.txt`` files: one raw answer each, to the question in ``DIR/question.txt`` (else the
  corpus question) about ``DIR/plan.md`` if there is one.

``--show`` prints each answer's outcome; ``--json`` prints the counts as JSON instead.
Nothing is asserted here; tests/test_answer_shapes.py holds each corpus shape to its outcome.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from rune_council.core.contract import CouncilResult, PerspectiveRequest, RawOutput, Voice
from rune_council.stages.dispatch import DISPATCH
from rune_council.stages.gate import gate

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "answer_shapes"


@dataclass(frozen=True)
class Answer:
    source: str  # where it came from, for --show
    text: str
    question: str
    artifact: str | None
    # A run file's voice that never reached GATE: what its last attempt ended in.
    dispatch: str | None = None


@dataclass(frozen=True)
class Outcome:
    answer: Answer
    repairs: tuple[str, ...]  # repair kinds applied, once each
    dropped: str | None  # the reason's kind, None when kept
    reason: str


def reason_kind(reason: str) -> str:
    """The kind of a drop reason: its first clause, and the second for malformed answers
    (``malformed: no JSON object found in the voice's output``), without quoted text."""
    parts = reason.split(": ")
    head = parts[0]
    if head == "malformed" and len(parts) > 1:
        return f"{head}: {parts[1]}"
    return head


def corpus() -> list[Answer]:
    index = json.loads((CORPUS / "index.json").read_text(encoding="utf-8"))
    answers = []
    for s in index["shapes"]:
        named = s.get("artifact", index["artifact"])
        artifact = None if named is None else (CORPUS / named).read_text(encoding="utf-8")
        answers.append(
            Answer(
                f"corpus/{s['file']}",
                (CORPUS / s["file"]).read_text(encoding="utf-8"),
                s.get("question", index["question"]),
                artifact,
            )
        )
    return answers


def _run_answers(path: Path) -> list[Answer] | None:
    try:
        run = CouncilResult.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError:
        return None
    found = []
    for v in run.voices:
        where = f"{path.name}:{v.id}"
        if v.dropped_by == DISPATCH:
            ended = v.attempts[-1].outcome if v.attempts else "dropped"
            found.append(Answer(where, "", run.request.question, None, ended))
        elif v.raw is not None:
            found.append(Answer(where, v.raw.text, run.request.question, run.artifact_text))
    return found


def extra(directory: Path, question: str) -> list[Answer]:
    found: list[Answer] = []
    asked = directory / "question.txt"
    if asked.is_file():
        question = asked.read_text(encoding="utf-8").strip()
    plan = directory / "plan.md"
    artifact = plan.read_text(encoding="utf-8") if plan.is_file() else None
    for path in sorted(directory.rglob("*")):
        if not path.is_file():
            continue
        if path.suffix == ".json":
            answers = _run_answers(path)
            if answers is None:
                print(f"skipped {path}: not a run file", file=sys.stderr)
                continue
            found += answers
        elif path.suffix == ".txt" and path.name != "question.txt":
            text = path.read_text(encoding="utf-8", errors="replace")
            found.append(Answer(str(path), text, question, artifact))
    return found


def judge(answer: Answer) -> Outcome:
    if answer.dispatch is not None:
        # Cut at the token limit, timed out, refused: lost before GATE, and lost all the same.
        return Outcome(answer, (), f"dispatch: {answer.dispatch}", f"dispatch: {answer.dispatch}")
    voice = Voice(
        id="v1",
        source="external-cli",
        runtime="bench",
        status="complete",
        raw=RawOutput(text=answer.text),
    )
    request = PerspectiveRequest(id="bench", question=answer.question)
    dropped = gate(voice, request, answer.artifact)
    kinds = tuple(dict.fromkeys(r.kind for r in voice.repairs))
    if dropped is None:
        return Outcome(answer, kinds, None, "")
    return Outcome(answer, kinds, reason_kind(dropped.reason), dropped.reason)


def _share(n: int, total: int) -> str:
    return f"{n:>4}  {100 * n / total:5.1f}%" if total else f"{n:>4}"


def report(outcomes: list[Outcome], sources: dict[str, int]) -> dict[str, object]:
    total = len(outcomes)
    kept = [o for o in outcomes if o.dropped is None]
    return {
        "answers": total,
        "sources": sources,
        "parsed_as_written": sum(1 for o in kept if not o.repairs),
        "parsed_with_repairs": sum(1 for o in kept if o.repairs),
        "repairs": dict(Counter(k for o in kept for k in o.repairs).most_common()),
        "dropped": total - len(kept),
        "drop_reasons": dict(Counter(o.dropped for o in outcomes if o.dropped).most_common()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--extra", action="append", type=Path, default=[], metavar="DIR")
    parser.add_argument("--show", action="store_true", help="print each answer's outcome")
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    args = parser.parse_args(argv)

    answers = corpus()
    sources = {"corpus": len(answers)}
    question = answers[0].question
    for directory in args.extra:
        if not directory.is_dir():
            parser.error(f"--extra {directory}: not a directory")
        more = extra(directory, question)
        sources[str(directory)] = len(more)
        answers += more
    outcomes = [judge(a) for a in answers]
    counts = report(outcomes, sources)
    if args.json:
        print(json.dumps(counts, indent=2))
        return 0

    total = len(outcomes)
    print(
        f"answer yield: {total} answers ("
        + ", ".join(f"{n} {name}" for name, n in sources.items())
        + ")"
    )
    parsed = counts["parsed_as_written"]
    repaired = counts["parsed_with_repairs"]
    assert isinstance(parsed, int) and isinstance(repaired, int)
    print(f"  kept                      {_share(parsed + repaired, total)}")
    print(f"    parsed as written       {_share(parsed, total)}")
    print(f"    parsed with repairs     {_share(repaired, total)}")
    repairs = counts["repairs"]
    assert isinstance(repairs, dict)
    for kind, n in repairs.items():
        print(f"      {kind:<22}{_share(n, total)}")
    dropped = counts["dropped"]
    assert isinstance(dropped, int)
    print(f"  dropped                   {_share(dropped, total)}")
    reasons = counts["drop_reasons"]
    assert isinstance(reasons, dict)
    width = max((len(k) for k in reasons), default=0)
    for kind, n in reasons.items():
        print(f"      {kind:<{width}}  {_share(n, total)}")
    if args.show:
        print()
        for o in outcomes:
            state = f"dropped: {o.reason[:120]}" if o.dropped else "kept"
            fixes = f" [{', '.join(o.repairs)}]" if o.repairs else ""
            print(f"  {o.answer.source:<45} {state}{fixes}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
