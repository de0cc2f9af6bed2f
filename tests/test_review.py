"""`rune council review` as a user runs it: a real git repository, fake CLIs as processes.

The voices answer with claims at `path:line` anchors quoting the diff; the council checks
each quote against the artifact it showed them (the diff with its place gutter), and the
review places every finding at its file and line: SARIF that validates against the OASIS
schema and reads back through sarif-tools, levels from the council's own classification,
and a gate whose exit code is its own.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from rune_council.core.prompts import ARTIFACT_CHAR_CAP, numbered_artifact
from tests.fixtures.review.kit import (
    INJECTION,
    INJECTION_TOO,
    RENAMED,
    SHELL_LINE,
    answer,
    change_repo,
    claim,
    git,
    run_file,
    rune,
    sarif_schema,
    voices,
)

GONE_LINE = "obsolete notes about the first release"
DELETED = claim(
    "The release notes are deleted while the docs still link to them",
    "docs/gone.txt:1",
    GONE_LINE,
    severity="SHOULD",
)
DELETED_TOO = {**DELETED, "text": "Deleting the release notes leaves the docs linking to them"}
BINARY = claim("The new logo is committed as a binary without its source", "logo.png", None, "MAY")


def council_voices(tmp: Path) -> None:
    voices(
        tmp,
        claude=answer([INJECTION, DELETED]),
        codex=answer([INJECTION_TOO, DELETED_TOO]),
        gemini=answer([RENAMED, BINARY]),
    )


def review(tmp: Path, repo: Path, *args: str, stdin: str | None = None) -> Any:
    return rune(tmp, repo, "council", "review", *args, stdin=stdin)


def results_by_rule(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in doc["runs"][0]["results"]:
        out.setdefault(r["ruleId"], []).append(r)
    return out


def place(result: dict[str, Any]) -> tuple[str, int | None]:
    physical = result["locations"][0]["physicalLocation"]
    return physical["artifactLocation"]["uri"], physical.get("region", {}).get("startLine")


def test_a_branch_review_is_sarif_with_each_finding_at_its_line(tmp_path: Path) -> None:
    repo = change_repo(tmp_path)
    council_voices(tmp_path)
    out = tmp_path / "review.sarif"
    ran = review(
        tmp_path, repo.path, "main..feature", "--format", "sarif", "-o", str(out), "--id", "r1"
    )
    assert ran.returncode == 3, ran.stderr  # the gate's own code: an agreed MUST
    doc = json.loads(out.read_text(encoding="utf-8"))
    jsonschema.Draft4Validator(sarif_schema()).validate(doc)

    run = doc["runs"][0]
    assert run["properties"]["decorrelation"] == "MULTI_FAMILY"
    assert run["properties"]["runId"] == "r1"
    assert run["properties"]["gate"] == {
        "failOn": "needs-decision",
        "verdict": "fail",
        "reason": run["properties"]["gate"]["reason"],
    }
    rules = results_by_rule(doc)
    [must] = rules["consensus-must"]
    assert (must["level"], place(must)) == ("error", ("src/app.py", 6))
    assert must["properties"]["families"] == ["anthropic", "openai"]
    assert must["properties"]["voices"] == ["v1", "v2"]
    # Agreed at SHOULD on a deleted file: a warning at the old path's line.
    [deleted] = rules["consensus-should"]
    assert (deleted["level"], place(deleted)) == ("warning", ("docs/gone.txt", 1))
    assert deleted["properties"]["fileStatus"] == "deleted"
    # One voice on the renamed file: a note at the new path.
    notes = {place(r): r for r in rules["dissent-single-voice"]}
    assert notes[("src/new_name.py", 6)]["level"] == "note"
    assert notes[("src/new_name.py", 6)]["properties"]["fileStatus"] == "renamed"
    # A claim about the binary file as a whole: the file, no line.
    assert notes[("logo.png", None)]["level"] == "note"
    assert all(
        r["ruleId"] == run["tool"]["driver"]["rules"][r["ruleIndex"]]["id"] for r in run["results"]
    )

    # The council verified the quotes at path:line against the diff itself.
    doc_run = run_file(repo.path, "r1")
    v1 = next(v for v in doc_run["voices"] if v["id"] == "v1")
    assert [e["verified"] for c in v1["claims"] for e in c["evidence"]] == ["true", "true"]
    assert doc_run["request"]["mode"] == "review"
    assert SHELL_LINE in doc_run["artifact_text"]

    # verify reaches the same verdict from the raw answers: the places are the council's.
    verified = rune(tmp_path, repo.path, "council", "verify", "r1")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "run r1: reproduced" in verified.stdout

    # sarif-tools reads the same places and levels back.
    from sarif import loader

    records = loader.load_sarif_file(str(out)).get_records()
    seen = {(r["Location"], r["Line"], r["Severity"]) for r in records}
    assert ("src/app.py", 6, "error") in seen
    assert ("docs/gone.txt", 1, "warning") in seen


def test_the_voices_are_shown_exactly_the_text_their_quotes_are_checked_against(
    tmp_path: Path,
) -> None:
    repo = change_repo(tmp_path)
    council_voices(tmp_path)
    copy = tmp_path / "claude-stdin.txt"
    from tests.fakes.bin import install_fake

    install_fake(
        tmp_path / "bin",
        "claude",
        answer=answer([INJECTION]),
        mode="answer_question",
        stdin_copy=str(copy),
    )
    ran = review(tmp_path, repo.path, "main..feature", "--json", "--id", "seen")
    assert ran.returncode == 3, ran.stderr
    recorded = run_file(repo.path, "seen")
    prompt = copy.read_text(encoding="utf-8")
    # Whole, with the prompt's own line numbers: nothing the council checks is hidden.
    assert numbered_artifact("change.diff", recorded["artifact_text"]) in prompt
    assert "[truncated" not in prompt


def test_fingerprints_hold_still_when_unrelated_lines_move(tmp_path: Path) -> None:
    repo = change_repo(tmp_path)
    council_voices(tmp_path)
    first = review(tmp_path, repo.path, "main..feature", "--format", "sarif", "--id", "f1")
    # The same change on a branch where a comment at the top moved every line down by one.
    git(repo.path, "checkout", "-q", "-b", "moved", "main")
    app = repo.path / "src" / "app.py"
    app.write_text("# a comment\n" + app.read_text(encoding="utf-8"), encoding="utf-8")
    git(repo.path, "commit", "-q", "-am", "comment")
    git(repo.path, "checkout", "-q", "-b", "feature2")
    git(repo.path, "cherry-pick", "feature")
    moved = {
        **INJECTION,
        "anchor": "src/app.py:7",
        "evidence": [{"ref": "src/app.py:7", "quote": SHELL_LINE}],
    }
    voices(
        tmp_path,
        claude=answer([moved]),
        codex=answer([{**moved, "text": INJECTION_TOO["text"]}]),
        gemini=answer([]),
    )
    second = review(tmp_path, repo.path, "moved..feature2", "--format", "sarif", "--id", "f2")
    a, b = (results_by_rule(json.loads(r.stdout))["consensus-must"][0] for r in (first, second))
    assert (place(a), place(b)) == (("src/app.py", 6), ("src/app.py", 7))
    assert a["partialFingerprints"] == b["partialFingerprints"]


@pytest.mark.parametrize(
    ("fail_on", "code"), [("needs-decision", 3), ("consensus", 3), ("must", 0), ("never", 0)]
)
def test_the_gate_decides_the_exit_code(tmp_path: Path, fail_on: str, code: int) -> None:
    repo = change_repo(tmp_path)
    # Agreed at SHOULD only: consensus (and needs-decision) fail on it, must does not.
    should = {**INJECTION, "severity": "SHOULD"}
    voices(
        tmp_path,
        claude=answer([should]),
        codex=answer([{**should, "text": INJECTION_TOO["text"]}]),
        gemini=answer([]),
    )
    ran = review(tmp_path, repo.path, "main..feature", "--fail-on", fail_on, "--id", "g")
    assert ran.returncode == code, ran.stdout + ran.stderr
    assert f"gate --fail-on {fail_on}: {'fail' if code else 'pass'}" in ran.stderr


def test_a_single_voice_must_needs_a_decision_but_is_no_consensus(tmp_path: Path) -> None:
    repo = change_repo(tmp_path)
    voices(tmp_path, claude=answer([INJECTION]), codex=answer([]), gemini=answer([]))
    needs = review(tmp_path, repo.path, "main..feature", "--id", "s1", "--format", "github")
    assert needs.returncode == 3, needs.stderr
    assert "::notice file=src/app.py,line=6," in needs.stdout
    agreed = review(tmp_path, repo.path, "main..feature", "--id", "s2", "--fail-on", "consensus")
    assert agreed.returncode == 0, agreed.stderr


@pytest.mark.parametrize("fail_on", ["needs-decision", "never"])
def test_a_council_with_no_valid_voice_exits_no_verdict_never_a_pass(
    tmp_path: Path, fail_on: str
) -> None:
    repo = change_repo(tmp_path)
    (tmp_path / "bin").mkdir()  # no CLI at all: nobody can answer
    out = tmp_path / "empty.sarif"
    ran = review(
        tmp_path,
        repo.path,
        "main..feature",
        "--fail-on",
        fail_on,
        "--format",
        "sarif",
        "-o",
        str(out),
    )
    assert ran.returncode == 1, ran.stderr
    assert "no verdict" in ran.stderr
    doc = json.loads(out.read_text(encoding="utf-8"))
    jsonschema.Draft4Validator(sarif_schema()).validate(doc)
    assert doc["runs"][0]["invocations"][0]["executionSuccessful"] is False
    assert doc["runs"][0]["properties"]["gate"]["verdict"] == "no-verdict"


def test_a_template_applies_to_the_review(tmp_path: Path) -> None:
    repo = change_repo(tmp_path)
    council_voices(tmp_path)
    ran = review(tmp_path, repo.path, "main..feature", "--template", "security-review", "--id", "t")
    assert ran.returncode == 3, ran.stderr
    doc = run_file(repo.path, "t")
    assert doc["request"]["template"]["name"] == "security-review"
    assert doc["request"]["mode"] == "review"
    assert "security review" in doc["request"]["preamble"]


def test_a_bad_range_or_format_is_one_clear_line_before_anything_runs(tmp_path: Path) -> None:
    repo = change_repo(tmp_path)
    council_voices(tmp_path)
    for args, said in [
        # An option's spelling given as the range is a range that fails the pattern.
        (["--", "--output=pwned"], "is not a revision range"),
        (["main..$(touch pwned)"], "is not a revision range"),
        (["main..nosuchbranch"], "'nosuchbranch' names no commit"),
        (["main..feature", "--format", "pdf"], "--format: 'pdf' is not one of"),
        (["main..feature", "--fail-on", "sometimes"], "--fail-on: 'sometimes' is not one of"),
        (["main..feature", "--staged"], "not both"),
    ]:
        ran = review(tmp_path, repo.path, *args)
        assert ran.returncode == 2, (args, ran.stderr)
        assert said in ran.stderr.lower() or said in ran.stderr, (args, ran.stderr)
    assert not (repo.path / "pwned").exists()
    assert not (repo.path / ".rune" / "council").exists()


def test_a_diff_on_stdin_is_reviewed_like_the_range(tmp_path: Path) -> None:
    repo = change_repo(tmp_path)
    council_voices(tmp_path)
    patch = git(repo.path, "diff", "main..feature") + "\n"
    ran = review(tmp_path, repo.path, "--diff", "-", "--format", "sarif", "--id", "in", stdin=patch)
    assert ran.returncode == 3, ran.stderr
    [must] = results_by_rule(json.loads(ran.stdout))["consensus-must"]
    assert place(must) == ("src/app.py", 6)


def test_a_large_diff_is_capped_and_what_was_left_out_is_in_the_run_notes(tmp_path: Path) -> None:
    repo = change_repo(tmp_path)
    git(repo.path, "checkout", "-q", "-b", "big", "main")
    for k in range(20):
        body = "".join(
            f"value_{k}_{i} = compute({i}, 'some text to make it longer')\n" for i in range(100)
        )
        (repo.path / f"gen_{k:02}.py").write_text(body, encoding="utf-8")
    git(repo.path, "add", ".")
    git(repo.path, "commit", "-q", "-m", "2000 lines")
    voices(tmp_path, claude=answer([]), codex=answer([]), gemini=answer([]))
    ran = review(tmp_path, repo.path, "main..big", "--id", "big", "--fail-on", "never")
    assert ran.returncode == 0, ran.stderr
    doc = run_file(repo.path, "big")
    assert len(doc["artifact_text"]) <= ARTIFACT_CHAR_CAP
    left = [n for n in doc["notes"] if n.startswith("review: left out: ")]
    assert left, doc["notes"]
    # Named file by file, and told to the voices in the artifact itself.
    assert any("gen_19.py" in n for n in left)
    assert "Left out of this artifact" in doc["artifact_text"]
    assert "left out: gen_19.py" in ran.stderr


def test_an_empty_change_convenes_no_council_and_passes(tmp_path: Path) -> None:
    repo = change_repo(tmp_path)
    council_voices(tmp_path)
    ran = review(tmp_path, repo.path, "feature..feature", "--format", "sarif")
    assert ran.returncode == 0, ran.stderr
    assert "nothing to review" in ran.stderr
    doc = json.loads(ran.stdout)
    jsonschema.Draft4Validator(sarif_schema()).validate(doc)
    assert doc["runs"][0]["results"] == []
    assert not (repo.path / ".rune" / "council").exists()


def test_a_question_council_loads_none_of_the_review() -> None:
    probe = (
        "import sys, json\nimport rune_council.cli\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('rune_council.review'))))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_output_into_a_pipe_is_written_into_it_and_the_pipe_stays_a_pipe(tmp_path: Path) -> None:
    # `-o /dev/null` must never put a plain file where the device was (as root, a rename over
    # it would); a named pipe stands in for the device so the test cannot harm the machine.
    import os
    import stat
    import threading

    repo = change_repo(tmp_path)
    council_voices(tmp_path)
    pipe = tmp_path / "out.fifo"
    os.mkfifo(pipe)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(pipe.read_bytes()), daemon=True)
    reader.start()
    ran = review(tmp_path, repo.path, "main..feature", "--format", "sarif", "-o", str(pipe))
    reader.join(timeout=60)
    assert ran.returncode == 3, ran.stderr
    assert stat.S_ISFIFO(pipe.lstat().st_mode)
    assert json.loads(got[0])["version"] == "2.1.0"


def test_a_file_that_is_not_a_regular_file_is_never_replaced(tmp_path: Path) -> None:
    import os
    import stat

    from rune_council.core.errors import RunFileError
    from rune_council.files import atomic_write_bytes

    pipe = tmp_path / "results.jsonl"
    os.mkfifo(pipe)
    with pytest.raises(RunFileError, match="not a regular file"):
        atomic_write_bytes(pipe, b"{}\n")
    assert stat.S_ISFIFO(pipe.lstat().st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["results.jsonl"]
