"""Voices answering in the shapes real models write, through `rune council` as a user runs it.

The fake CLIs are real processes printing exactly the texts below; the council keeps every
voice, records what it repaired to read each one, shows it, and `verify` reaches the same
voices again from the raw answers in the run file.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.fakes.bin import install_fake
from tests.helpers import PLAN, run_rune, user_env

Q = "Should we shard the orders table?"

# Wrapped, trailing commas, a review-scale severity, one evidence object.
CLAUDE = (
    '{"answer": {\n'
    f'  "question_echo": "{Q}",\n'
    '  "stance": "NO, not until there is a rollback",\n'
    '  "claims": [\n'
    '    {"text": "The plan has no rollback step", "severity": "critical",\n'
    '     "evidence": {"ref": "plan.md:6", "quote": "No rollback step is defined."},},\n'
    "  ],\n"
    "}}\n"
)
# Fenced, a comment, a key the contract does not name, a claim as a plain string.
CODEX = (
    "Sure, here is my assessment.\n```json\n{\n"
    f'  "question_echo": "{Q}", // restated\n'
    '  "stance": "NO, the migration cannot be undone",\n'
    '  "confidence": 0.7,\n'
    '  "claims": [\n'
    '    {"text": "Nothing says how to undo the migration if it fails", "severity": "High",\n'
    '     "evidence": [{"ref": "plan.md:6", "quote": "No rollback step is defined."}]},\n'
    '    "A weekend offline is a long outage"\n'
    "  ]\n}\n```\n"
)
# The contract's exact shape, said twice: one answer, no repair.
GEMINI_ONE = json.dumps({"question_echo": Q, "stance": "YES, with care", "claims": []})
GEMINI = f"{GEMINI_ONE}\n\nTo repeat:\n{GEMINI_ONE}\n"


def rune(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_rune(tmp, user_env(tmp), *args)


def council(tmp: Path, run_id: str, gemini: str = GEMINI) -> dict[str, Any]:
    install_fake(tmp / "bin", "claude", answer=CLAUDE)
    install_fake(tmp / "bin", "codex", answer=CODEX)
    install_fake(tmp / "bin", "gemini", answer=gemini)
    (tmp / "plan.md").write_text(PLAN, encoding="utf-8")
    ran = rune(tmp, "council", Q, "--artifact", "plan.md", "--n", "3", "--json", "--id", run_id)
    assert ran.returncode in (0, 1), ran.stderr
    doc: dict[str, Any] = json.loads(ran.stdout)
    return doc


def by_runtime(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["runtime"]: v for v in doc["voices"]}


def test_voices_in_real_models_shapes_are_kept_with_their_repairs_and_verify(
    tmp_path: Path,
) -> None:
    doc = council(tmp_path, "shapes1")
    assert doc["schema_version"] == "2.8"
    voices = by_runtime(doc)
    assert {r: v["status"] for r, v in voices.items()} == {
        "claude": "complete",
        "codex": "complete",
        "gemini": "complete",
    }
    assert [(r["kind"], r["at"]) for r in voices["claude"]["repairs"]] == [
        ("trailing_comma", ""),
        ("unwrapped", ""),
        ("severity", "claims[0].severity"),
        ("evidence_object", "claims[0].evidence"),
    ]
    assert [(r["kind"], r["at"]) for r in voices["codex"]["repairs"]] == [
        ("comment", ""),
        ("unknown_keys", ""),
        ("severity", "claims[0].severity"),
        ("claim_string", "claims[1]"),
    ]
    assert voices["gemini"]["repairs"] == []
    assert voices["claude"]["claims"][0]["severity"] == "MUST"
    assert voices["codex"]["claims"][0]["severity"] == "SHOULD"
    # The raw answers are kept as the models wrote them.
    assert voices["codex"]["raw"]["text"].strip() == CODEX.strip()

    # Two families cite the same line with a quote that is there: the repairs let them count.
    assert doc["decorrelation"] == "MULTI_FAMILY"
    agreed = doc["agreement"]["consensus_claims"]
    assert len(agreed) == 1 and sorted(agreed[0]["families"]) == ["anthropic", "openai"]

    verified = rune(tmp_path, "council", "verify", "shapes1")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "run shapes1: reproduced" in verified.stdout

    shown = rune(tmp_path, "council", "show", "shapes1")
    assert shown.returncode == 0, shown.stderr
    assert "answer read with 4 repair(s): trailing_comma (3 commas before" in shown.stdout
    assert "severity at claims[0].severity ('critical' read as MUST)" in shown.stdout
    assert "claim_string at claims[1]" in shown.stdout
    assert "- **Verification**: reproduced" in shown.stdout


def test_a_repair_taken_out_of_the_run_file_is_named_by_verify(tmp_path: Path) -> None:
    council(tmp_path, "shapes2")
    path = tmp_path / ".rune" / "council" / "run-shapes2.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    index = next(i for i, v in enumerate(doc["voices"]) if v["runtime"] == "claude")
    doc["voices"][index]["repairs"] = doc["voices"][index]["repairs"][1:]
    path.write_text(json.dumps(doc), encoding="utf-8")

    verified = rune(tmp_path, "council", "verify", "shapes2", "--json")
    assert verified.returncode == 1, verified.stdout + verified.stderr
    fields = [d["field"] for d in json.loads(verified.stdout)["differences"]]
    assert f"voices[{index}].repairs[0].kind" in fields


def test_two_different_answers_drop_the_voice_as_ambiguous_and_verify(tmp_path: Path) -> None:
    other = json.dumps({"question_echo": Q, "stance": "NO, on reflection", "claims": []})
    doc = council(tmp_path, "shapes3", gemini=f"{GEMINI_ONE}\nCorrection:\n{other}\n")
    gemini = by_runtime(doc)["gemini"]
    assert gemini["status"] == "dropped"
    assert gemini["drop_reason"].startswith("ambiguous: the output holds 2 different answer")
    assert (
        "NO, on reflection" in gemini["raw"]["text"] and "YES, with care" in gemini["raw"]["text"]
    )
    verified = rune(tmp_path, "council", "verify", "shapes3")
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_verify_says_when_a_file_before_2_7_is_read_by_the_repair_rules(tmp_path: Path) -> None:
    # A run written before 2.7 recorded no repairs (its GATE dropped such voices); verify
    # reads it by today's rules, names the difference and says where the rules, not an
    # edit, may be the cause.
    council(tmp_path, "shapes4")
    path = tmp_path / ".rune" / "council" / "run-shapes4.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["schema_version"] = "2.6"
    index = next(i for i, v in enumerate(doc["voices"]) if v["runtime"] == "claude")
    doc["voices"][index]["repairs"] = []
    path.write_text(json.dumps(doc), encoding="utf-8")

    verified = rune(tmp_path, "council", "verify", "shapes4", "--json")
    assert verified.returncode == 1, verified.stdout + verified.stderr
    outcome = json.loads(verified.stdout)
    assert f"voices[{index}].repairs[0]" in [d["field"] for d in outcome["differences"]]
    notes = [n for n in outcome["unchecked"] if n.startswith(f"voices[{index}]: recorded by")]
    assert len(notes) == 1 and "before answers were read by the 2.7 rules" in notes[0]
    # codex's answer is read with repairs too; gemini's needs none and is not flagged.
    assert len([n for n in outcome["unchecked"] if "2.7 rules" in n]) == 2
