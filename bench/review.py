"""`rune council review` on a 2,000-line diff, whole process, beside a plain council on the
same text.

Run: .venv/bin/python bench/review.py [--repeat 3]

A real git repository gets a branch whose diff has 2,000 changed lines over 10 files. The
voices are the test suite's fake CLIs (claude, codex, gemini as processes, on a private
PATH), and each one cites the same added line as ``path:LINE`` with its words as the quote.
Two commands run on it, interleaved, each a fresh process:

- review: ``rune council review main..feature --format sarif``;
- plain: ``rune council "<the same question>" --mode review --artifact change.diff`` with
  the output of ``git diff main..feature`` as the artifact.

Per command: the wall time (median and minimum over the repeats), the characters of the
artifact the council kept in its run file, whether the prompt showed it whole, the quotes
the council verified, the consensus it reached and (review only) the files it cut, named in
the run's notes. The plain council is handed the whole diff, which the prompt then cuts at
its size cap without saying where; it cannot read ``path:LINE`` as a place in it, so the
same quotes stay unchecked and no consensus forms. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakes.bin import install_fake, path_with  # noqa: E402

FILES = 10
LINES_PER_FILE = 200
CITED = "gen_00.py:12"
CITED_TEXT = "total_11 = accumulate(rows[11], weight=0.11)"


def git(repo: Path, *args: str) -> str:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(repo.parent),
        "GIT_AUTHOR_NAME": "b",
        "GIT_AUTHOR_EMAIL": "b@example.invalid",
        "GIT_COMMITTER_NAME": "b",
        "GIT_COMMITTER_EMAIL": "b@example.invalid",
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    done = subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


def make_repo(tmp: Path) -> Path:
    repo = tmp / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README").write_text("bench\n", encoding="utf-8")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "checkout", "-q", "-b", "feature")
    for k in range(FILES):
        body = "".join(
            f"total_{i} = accumulate(rows[{i}], weight=0.{i:02d})\n" for i in range(LINES_PER_FILE)
        )
        (repo / f"gen_{k:02d}.py").write_text(body, encoding="utf-8")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "2,000 lines")
    return repo


def answer(text: str) -> str:
    claim = {
        "text": text,
        "anchor": CITED,
        "severity": "SHOULD",
        "evidence": [{"ref": CITED, "quote": CITED_TEXT}],
    }
    return json.dumps({"question_echo": "__QUESTION__", "stance": "NO, not yet", "claims": [claim]})


def install_voices(tmp: Path) -> None:
    words = {
        "claude": "The weight of row 11 is hard-coded where the others come from rows",
        "codex": "Row 11 uses a hard-coded weight instead of one read from the rows",
        "gemini": "Nothing documents why row 11 gets a weight of 0.11",
    }
    for name, text in words.items():
        install_fake(tmp / "bin", name, answer=answer(text), mode="answer_question")


def run(tmp: Path, repo: Path, args: list[str]) -> tuple[float, int, str]:
    env = {
        "PATH": path_with(tmp / "bin"),
        "HOME": str(tmp),
        "LANG": "C.UTF-8",
        "RUNE_COUNCIL_ALLOW_EXTERNAL": "1",
    }
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "rune_council.cli", "council", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=300,
    )
    return time.perf_counter() - started, done.returncode, done.stderr


def facts(repo: Path, run_id: str) -> dict[str, Any]:
    from rune_council.core.prompts import ARTIFACT_CHAR_CAP

    doc = json.loads((repo / ".rune" / "council" / f"run-{run_id}.json").read_text("utf-8"))
    evidence = [e for v in doc["voices"] for c in v["claims"] for e in c["evidence"]]
    text = doc.get("artifact_text") or ""
    return {
        "artifact chars": len(text),
        "shown whole": "yes" if len(text) <= ARTIFACT_CHAR_CAP else "no (cut by the prompt)",
        "quotes verified": f"{sum(e['verified'] == 'true' for e in evidence)}/{len(evidence)}",
        "consensus": len(doc["agreement"]["consensus_claims"]),
        "files cut, named": sum(1 for n in doc["notes"] if n.startswith("review: left out:")),
        "voices valid": f"{doc['voices_valid']}/{len(doc['voices'])}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rune-review-bench-") as name:
        tmp = Path(name)
        repo = make_repo(tmp)
        install_voices(tmp)
        patch = git(repo, "diff", "main..feature")
        (repo / "change.diff").write_text(patch, encoding="utf-8")
        changed = sum(
            1 for ln in patch.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))
        )
        from rune_council.review.artifact import build_artifact
        from rune_council.review.diff import parse_range, read_git

        question = build_artifact(read_git(repo, parse_range("main..feature"))).question
        times: dict[str, list[float]] = {"review": [], "plain": []}
        last: dict[str, str] = {}
        for k in range(opts.repeat):
            for what in ("review", "plain"):
                run_id = f"{what}{k}"
                if what == "review":
                    args = ["review", "main..feature", "--format", "sarif", "--id", run_id]
                    args += ["-o", os.devnull, "--fail-on", "never"]
                else:
                    args = [question, "--mode", "review", "--artifact", "change.diff"]
                    args += ["--json", "--id", run_id]
                took, code, err = run(tmp, repo, args)
                if code != 0:
                    print(f"{what}: FAILED (exit {code}): {err.strip()[-300:]}")
                    return
                times[what].append(took)
                last[what] = run_id
        print(f"diff: {changed} changed lines in {FILES} files, {len(patch)} characters")
        print(f"{'':<22}{'review':>26}{'plain council':>30}")
        for what_row in ("wall s (median/min)",):
            cells = [
                f"{statistics.median(times[w]):.2f} / {min(times[w]):.2f}"
                for w in ("review", "plain")
            ]
            print(f"{what_row:<22}{cells[0]:>26}{cells[1]:>30}")
        got = {w: facts(repo, last[w]) for w in ("review", "plain")}
        for key in got["review"]:
            print(f"{key:<22}{got['review'][key]!s:>26}{got['plain'][key]!s:>30}")


if __name__ == "__main__":
    main()
