"""The change as the review reads it: git's own output in real repositories, and the
artifact whose every line says its place."""

from __future__ import annotations

from pathlib import Path

import pytest

from rune_council.review.artifact import build_artifact, fair_shares
from rune_council.review.diff import DiffError, parse_range, parse_unified, read_git
from rune_council.stages.normalize import check_quote, parse_ref
from rune_council.stages.places import HEADER, Places
from tests.fixtures.review.kit import APP_FEATURE, SHELL_LINE, change_repo, git


def by_path(diff: object) -> dict[str, object]:
    return {f.path: f for f in diff.files}  # type: ignore[attr-defined]


def test_a_branch_has_each_kind_of_change_with_the_paths_a_finding_points_at(
    tmp_path: Path,
) -> None:
    repo = change_repo(tmp_path)
    diff = read_git(repo.path, parse_range("main..feature"))
    files = {f.path: f for f in diff.files}
    assert {p: f.status for p, f in files.items()} == {
        "docs/gone.txt": "deleted",
        "logo.png": "added",
        "src/app.py": "modified",
        "src/new_name.py": "renamed",
    }
    assert files["logo.png"].binary and not files["logo.png"].hunks
    assert files["src/new_name.py"].old_path == "src/old_name.py"
    assert (diff.base, diff.head) == (repo.base, repo.head)
    added = [ln for h in files["src/app.py"].hunks for ln in h.lines if ln.kind == "+"]
    assert [(ln.new, ln.text.strip()) for ln in added] == [(6, SHELL_LINE)]


def test_the_artifact_places_lines_by_the_new_file_and_a_deletion_by_the_old(
    tmp_path: Path,
) -> None:
    repo = change_repo(tmp_path)
    artifact = build_artifact(read_git(repo.path, parse_range("main..feature")))
    lines = artifact.text.splitlines()
    assert lines[0] == HEADER
    places = Places.of(lines)
    assert places is not None
    at = places.find("src/app.py", 6, None)
    assert at is not None and SHELL_LINE in lines[at[0] - 1]
    gone = places.find("docs/gone.txt", 1, None)
    assert gone is not None and "obsolete notes" in lines[gone[0] - 1]
    # The removed line of the renamed file has no place; its replacement has line 6.
    renamed = places.find("b/src/new_name.py", 6, None)
    assert renamed is not None and lines[renamed[0] - 1].endswith("+    return 3")
    assert "-    return 2" in lines[renamed[0] - 2] and lines[renamed[0] - 2].startswith(" ")
    assert places.find("src/old_name.py", 6, None) is None
    # A quote is checked there, as the council checks it.
    ref = parse_ref("src/app.py:6", "change.diff", places)
    assert check_quote(ref, SHELL_LINE, lines)[0] == "true"
    assert check_quote(ref, "os.system(user_input) here", lines)[0] == "false"
    # Without the places (the council before it read them), the ref named nothing it had.
    assert check_quote(parse_ref("src/app.py:6", "change.diff"), SHELL_LINE, lines)[0] == (
        "unchecked"
    )


def test_staged_working_tree_and_untracked_changes_are_read_apart(tmp_path: Path) -> None:
    repo = change_repo(tmp_path)
    app = repo.path / "src" / "app.py"
    app.write_text(APP_FEATURE + "\nSTAGED = True\n", encoding="utf-8")
    git(repo.path, "add", "src/app.py")
    app.write_text(APP_FEATURE + "\nSTAGED = True\nUNSTAGED = True\n", encoding="utf-8")
    (repo.path / "notes.txt").write_text("not added\n", encoding="utf-8")

    def added(diff: object) -> list[str]:
        return [
            ln.text
            for f in diff.files  # type: ignore[attr-defined]
            for h in f.hunks
            for ln in h.lines
            if ln.kind == "+" and ln.text
        ]

    staged = read_git(repo.path, parse_range(None, staged=True))
    assert added(staged) == ["STAGED = True"]
    worktree = read_git(repo.path, parse_range(None))
    assert added(worktree) == ["STAGED = True", "UNSTAGED = True"]
    assert any("1 untracked file(s)" in n for n in worktree.notes)
    assert not any("untracked" in n for n in staged.notes)


def test_three_dots_read_from_the_merge_base_as_a_pull_request_does(tmp_path: Path) -> None:
    repo = change_repo(tmp_path)
    git(repo.path, "checkout", "-q", "main")
    (repo.path / "later.txt").write_text("main moved on\n", encoding="utf-8")
    git(repo.path, "add", ".")
    git(repo.path, "commit", "-q", "-m", "later on main")
    two = read_git(repo.path, parse_range("main..feature"))
    three = read_git(repo.path, parse_range("main...feature"))
    assert "later.txt" in {f.path for f in two.files}  # as a deletion, seen from main
    assert "later.txt" not in {f.path for f in three.files}
    assert three.base == repo.base


@pytest.mark.parametrize(
    "typed",
    [
        "--output=x",
        "-p",
        "main..--exec=sh",
        "HEAD;rm -rf /",
        "$(id)",
        ":/fix the bug",
        "main....feature",
        "a b",
        "main..\nfeature",
        "x" * 201,
    ],
)
def test_a_range_that_is_not_revisions_is_refused_before_git_sees_it(typed: str) -> None:
    with pytest.raises(DiffError, match="is not a revision range"):
        parse_range(typed)


def test_a_revision_git_cannot_resolve_to_a_commit_is_named(tmp_path: Path) -> None:
    repo = change_repo(tmp_path)
    with pytest.raises(DiffError, match="'no-such-branch' names no commit"):
        read_git(repo.path, parse_range("main..no-such-branch"))
    # A tree or blob id is no commit either.
    tree = git(repo.path, "rev-parse", "HEAD^{tree}")
    with pytest.raises(DiffError, match="names no commit"):
        read_git(repo.path, parse_range(f"{tree}..HEAD"))


def test_the_repositorys_own_diff_programs_do_not_run(tmp_path: Path) -> None:
    repo = change_repo(tmp_path)
    ran = tmp_path / "ran"
    script = tmp_path / "prog.sh"
    script.write_text(f'#!/bin/sh\ntouch {ran}\ncat "$1"\n', encoding="utf-8")
    script.chmod(0o755)
    (repo.path / ".gitattributes").write_text("*.py diff=evil\n", encoding="utf-8")
    git(repo.path, "config", "diff.evil.textconv", str(script))
    git(repo.path, "config", "diff.external", str(script))
    git(repo.path, "config", "core.fsmonitor", str(script))
    diff = read_git(repo.path, parse_range("main..feature"))
    assert "src/app.py" in {f.path for f in diff.files}
    assert not ran.exists()


def test_hostile_file_names_stay_one_path_and_cannot_forge_a_place(tmp_path: Path) -> None:
    repo = change_repo(tmp_path)
    git(repo.path, "checkout", "-q", "-b", "hostile", "main")
    names = [
        "new\nline.py",
        "esc\x1b]0;pwned\x07.py",
        "::set-output name=x::y.py",
        "pipe | app.py:1 | .py",
        " leading.py",
    ]
    for name in names:
        (repo.path / name).write_text("fine = 1\n", encoding="utf-8")
    # A removed line whose text looks like a place: it must stay no place.
    (repo.path / "docs" / "gone.txt").write_text("src/app.py:1 | forged\n", encoding="utf-8")
    git(repo.path, "add", ".")
    git(repo.path, "commit", "-q", "-m", "names")
    git(repo.path, "checkout", "-q", "-b", "hostile2")
    (repo.path / "docs" / "gone.txt").write_text("real\n", encoding="utf-8")
    git(repo.path, "commit", "-q", "-am", "edit")
    diff = read_git(repo.path, parse_range("main..hostile"))
    assert set(names) <= {f.path for f in diff.files}
    artifact = build_artifact(diff)
    lines = artifact.text.splitlines()
    assert len(lines) == len(artifact.rows)  # no name or text split a line
    assert "\x1b" not in artifact.text
    places = Places.of(lines)
    assert places is not None
    assert set(places.at) == {
        "new\\nline.py",
        "esc\\x1b]0;pwned\\x07.py",
        "::set-output name=x::y.py",
        "pipe \\x7c app.py:1 \\x7c .py",
        "\\x20leading.py",
        "docs/gone.txt",
    }
    edited = build_artifact(read_git(repo.path, parse_range("hostile..hostile2")))
    forged = Places.of(edited.text.splitlines())
    assert forged is not None and set(forged.at) == {"docs/gone.txt"}


def test_a_unified_diff_is_read_by_its_counts_not_by_what_its_lines_look_like() -> None:
    text = (
        "--- a/notes.sql\n"
        "+++ b/notes.sql\n"
        "@@ -1,3 +1,3 @@\n"
        " select 1;\n"
        "--- a comment that looks like a file header\n"
        "+++ another that looks like one too\n"
        " select 2;\n"
        "\\ No newline at end of file\n"
        '--- "a/tab\\there.txt"\n'
        '+++ "b/tab\\there.txt"\n'
        "@@ -0,0 +1 @@\n"
        "+x\n"
    )
    files = parse_unified(text)
    assert [f.path for f in files] == ["notes.sql", "tab\there.txt"]
    kinds = [(ln.kind, ln.text) for ln in files[0].hunks[0].lines]
    assert kinds == [
        (" ", "select 1;"),
        ("-", "-- a comment that looks like a file header"),
        ("+", "++ another that looks like one too"),
        (" ", "select 2;"),
        ("\\", "No newline at end of file"),
    ]


def test_no_file_crowds_the_others_out_of_the_cap() -> None:
    assert fair_shares([100, 5000, 200, 9000], 4000) == [100, 1850, 200, 1850]
    assert fair_shares([10, 20], 1000) == [10, 20]


def test_a_diff_over_the_byte_cap_names_every_file_it_did_not_read(tmp_path: Path) -> None:
    from rune_council.review.diff import read_diff_input

    repo = change_repo(tmp_path)
    diff = read_git(repo.path, parse_range("main..feature"), cap=300)
    read = {f.path for f in diff.files}
    assert diff.unread and not (read & set(diff.unread))
    assert read | set(diff.unread) >= {"docs/gone.txt", "src/app.py", "src/new_name.py"}
    artifact = build_artifact(diff)
    assert all(any(name in note for note in artifact.left_out) for name in diff.unread)
    # The same cap on a diff file: read up to it, and said so.
    patch = tmp_path / "change.patch"
    patch.write_text(git(repo.path, "diff", "main..feature") + "\n", encoding="utf-8")
    whole = read_diff_input(str(patch))
    assert {f.path for f in whole.files} >= {"src/app.py", "docs/gone.txt"} and not whole.notes
    cut = read_diff_input(str(patch), cap=300)
    assert len(cut.files) < len(whole.files)
    assert "over 0 MiB" not in cut.notes[0] and "were not read" in cut.notes[0]
