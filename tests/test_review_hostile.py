"""Hostile changes and hostile voices: nothing they write becomes a workflow command, markup,
a mention or a terminal escape in what the review prints."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema

from rune_council.review.annotations import annotation, escape_data, escape_property
from rune_council.review.comment import MARKER, md
from tests.fixtures.review.kit import answer, claim, git, rune, sarif_schema, voices

EVIL_FILE = "x\n::add-mask::hunter2\n::set-output name=ok::1.py"
EVIL_LINE = "token = read('x')  # ::warning::this line is fine"
COMMANDS = (
    "\n::set-output name=approved::true\n::add-mask::\n::stop-commands::zzz\n"
    "%0A::error::forged%0D::set-env name=X::1 ::group::x\r::endgroup::"
)
HTML = (
    '<img src=x onerror="alert(1)"> <script>alert(2)</script> <!-- --> </details> '
    "[approve](https://evil.example/a) @octocat #1 www.evil.example\n## Approved\n```\n"
)
ESCAPES = "\x1b]0;owned\x07\x1b[2J\x9b31m colours"


def hostile_repo(tmp: Path) -> Path:
    repo = tmp / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README").write_text("base\n", encoding="utf-8")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "checkout", "-q", "-b", "pr")
    (repo / EVIL_FILE).write_text(f"{EVIL_LINE}\nsecond = 2\n", encoding="utf-8")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "evil")
    return repo


def hostile_voices(tmp: Path) -> None:
    shown = EVIL_FILE.replace("\n", "\\n")  # the file's place as the artifact shows it
    evil = claim(
        f"{COMMANDS} {HTML} {ESCAPES}",
        f"{shown}:1",
        "token = read('x')",
        severity="MUST",
    )
    voices(
        tmp,
        claude=answer([evil], stance=f"NO {COMMANDS}"),
        codex=answer([{**evil, "text": f"Also {COMMANDS} {HTML}"}]),
        gemini=answer([]),
    )


OURS = re.compile(r"^::(error|warning|notice)( [a-z]+=[^:]*)?::")


def unescape(value: str) -> str:
    return (
        value.replace("%0A", "\n")
        .replace("%0D", "\r")
        .replace("%3A", ":")
        .replace("%2C", ",")
        .replace("%25", "%")
    )


def test_annotations_carry_no_command_of_a_voice_or_a_file_name(tmp_path: Path) -> None:
    repo = hostile_repo(tmp_path)
    hostile_voices(tmp_path)
    ran = rune(tmp_path, repo, "council", "review", "main..pr", "--format", "github")
    assert ran.returncode == 3, ran.stderr
    lines = ran.stdout.splitlines()
    assert lines and all(OURS.match(line) for line in lines), lines
    assert "\x1b" not in ran.stdout and "\x9b" not in ran.stdout
    # The finding names the real file: unescaped as the runner does, it is the path.
    errors = [line for line in lines if line.startswith("::error ")]
    assert errors, lines
    props = errors[0].split("::")[1].removeprefix("error ")
    file_value = dict(p.split("=", 1) for p in props.split(","))["file"]
    assert unescape(file_value) == EVIL_FILE
    message = errors[0].split("::", 2)[2]
    assert "::set-output" in unescape(message)  # kept as the voice's words, inert


def test_the_pr_comment_shows_a_voices_markup_as_text(tmp_path: Path) -> None:
    repo = hostile_repo(tmp_path)
    hostile_voices(tmp_path)
    base = "https://github.com/o/r/blob/" + "a" * 40
    ran = rune(
        tmp_path,
        repo,
        "council",
        "review",
        "main..pr",
        "--format",
        "markdown",
        "--link-base",
        base,
    )
    assert ran.returncode == 3, ran.stderr
    body = ran.stdout
    assert body.startswith(MARKER) and body.count(MARKER) == 1
    for raw in ("<img", "<script", "<!-- --", "](https://evil", "@octocat", "#1 ", "www.evil"):
        assert raw not in body, raw
    assert "</details>" not in body  # nothing was left out, so no details of ours either
    assert "\n## Approved" not in body and "```" not in body
    assert "\x1b" not in body
    # Every finding line is one line, its link the real file's, percent-encoded.
    assert (
        f"({base}/x%0A%3A%3Aadd-mask%3A%3Ahunter2%0A%3A%3Aset-output%20name%3Dok%3A%3A1.py#L1)"
        in body
    )


def test_sarif_keeps_the_real_path_and_the_voices_words_as_data(tmp_path: Path) -> None:
    repo = hostile_repo(tmp_path)
    hostile_voices(tmp_path)
    ran = rune(tmp_path, repo, "council", "review", "main..pr", "--format", "sarif")
    assert ran.returncode == 3, ran.stderr
    assert "\x1b" not in ran.stdout
    doc = json.loads(ran.stdout)
    jsonschema.Draft4Validator(sarif_schema()).validate(doc)
    [result] = [r for r in doc["runs"][0]["results"] if r["level"] == "error"]
    uri = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    from urllib.parse import unquote

    assert unquote(uri) == EVIL_FILE and "\n" not in uri
    assert "::set-output" in result["message"]["text"]


def test_the_text_output_in_a_workflow_step_is_printed_with_commands_stopped(
    tmp_path: Path,
) -> None:
    repo = hostile_repo(tmp_path)
    hostile_voices(tmp_path)
    ran = rune(tmp_path, repo, "council", "review", "main..pr", GITHUB_ACTIONS="true")
    assert ran.returncode == 3, ran.stderr
    lines = ran.stdout.splitlines()
    token = lines[0].removeprefix("::stop-commands::")
    assert lines[0].startswith("::stop-commands::") and re.fullmatch(r"[0-9a-f]{32}", token)
    assert lines[-1] == f"::{token}::"
    assert token not in "\n".join(lines[1:-1])


def test_the_escapes_follow_githubs_own_rules() -> None:
    assert escape_data("50%\r\n::x") == "50%25%0D%0A::x"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    line = annotation("warning", "one\n::add-mask::x", file="a,b:c.py", line=3, title="t:1")
    assert line == "::warning file=a%2Cb%3Ac.py,line=3,title=t%3A1::one%0A::add-mask::x"


def test_markdown_escaping_keeps_the_words_and_drops_their_power() -> None:
    shown = md("**bold** <b>x</b> @team #12 https://x.example `code`\n# h")
    assert "<b>" not in shown and "**" not in shown and "\n" not in shown
    assert "@team" not in shown and "#12" not in shown and "https://" not in shown
    assert "bold" in shown and "&lt;b&gt;" in shown
