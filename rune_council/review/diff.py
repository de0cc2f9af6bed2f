"""A change as git (or a unified diff) tells it: files, hunks, and each line's numbers.

Git is run as ``git`` itself, with an argument list and no shell; the only words of the
user's that reach it are revisions that matched a strict pattern, and those are resolved to
commit ids with ``git rev-parse --verify`` first, so the diff is asked for by id. The
repository's own configuration cannot run a program for it: external diff drivers,
textconv filters and the fsmonitor hook are all off for these calls.

What git prints is read as data, bounded (``DIFF_BYTE_CAP``); a diff over the cap is read up
to it and the files it did not reach are named, never dropped quietly.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Literal

from ..core.errors import RequestError

DIFF_BYTE_CAP = 8 * 1024 * 1024
GIT_TIMEOUT_S = 120.0
DEFAULT_CONTEXT = 5
MAX_CONTEXT = 50
# A revision as a person types one: names, ids, ^ ~ and @{...}; never an option (-...), a
# pathspec-like :/text search, whitespace or a range inside a side.
_REV = re.compile(r"^(?![-.])(?!.*\.\.)[A-Za-z0-9_@^~{}./+-]{1,200}$")
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")

Status = Literal["added", "modified", "deleted", "renamed", "copied"]
LineKind = Literal[" ", "+", "-", "\\"]


class DiffError(RequestError):
    """A range, repository or diff this command cannot read; the message says which."""


@dataclass(frozen=True)
class DiffLine:
    kind: LineKind  # context, added, removed, or git's "\ No newline at end of file"
    text: str
    old: int | None  # its number in the old file (None for an added line)
    new: int | None  # its number in the new file (None for a removed line)


@dataclass
class Hunk:
    header: str
    lines: list[DiffLine] = field(default_factory=list)


@dataclass
class DiffFile:
    old_path: str | None
    new_path: str | None
    status: Status = "modified"
    binary: bool = False
    similarity: int | None = None
    mode_change: str | None = None
    hunks: list[Hunk] = field(default_factory=list)

    @property
    def path(self) -> str:
        """Where a finding on this file points: the new path, the old one for a deletion."""
        path = self.old_path if self.status == "deleted" else self.new_path
        return path or self.old_path or self.new_path or "(unnamed)"

    def counts(self) -> tuple[int, int]:
        added = sum(1 for h in self.hunks for ln in h.lines if ln.kind == "+")
        removed = sum(1 for h in self.hunks for ln in h.lines if ln.kind == "-")
        return added, removed


@dataclass
class Diff:
    files: list[DiffFile]
    source: str  # how the change was chosen, in words ("the working tree against HEAD")
    base: str | None = None  # the commit the change is read against, when there is one
    head: str | None = None  # the commit it ends at (None: the index or the working tree)
    notes: list[str] = field(default_factory=list)  # what the diff itself leaves out
    unread: list[str] = field(default_factory=list)  # files past the byte cap, not read

    def counts(self) -> tuple[int, int]:
        pairs = [f.counts() for f in self.files]
        return sum(a for a, _ in pairs), sum(r for _, r in pairs)


# --------------------------------------------------------------------------- parsing


def _unquote(text: str) -> tuple[str, str]:
    """A C-quoted name at the start of ``text`` as git writes one ("a/x\\ny"), and the rest."""
    assert text.startswith('"')
    out = bytearray()
    k = 1
    simple = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}
    while k < len(text):
        ch = text[k]
        if ch == '"':
            return out.decode("utf-8", "replace"), text[k + 1 :]
        if ch == "\\" and k + 1 < len(text):
            nxt = text[k + 1]
            if nxt in simple:
                out.append(simple[nxt])
                k += 2
                continue
            octal = text[k + 1 : k + 4]
            if len(octal) == 3 and all(c in "01234567" for c in octal):
                out.append(int(octal, 8) & 0xFF)
                k += 4
                continue
        out += ch.encode("utf-8", "surrogateescape")
        k += 1
    raise DiffError(f"a quoted file name in the diff is not closed: {text[:80]!r}")


def _name(text: str) -> str:
    """A file name from a ---/+++/rename line: quoted, or plain up to a tab (git adds one
    after a name with a space; diff -u puts the time there)."""
    text = text.rstrip("\n")
    if text.startswith('"'):
        return _unquote(text)[0]
    return text.split("\t", 1)[0]


def _side(name: str, prefix: str, git: bool) -> str | None:
    if name == "/dev/null":
        return None
    if git and name.startswith(prefix):
        return name[len(prefix) :]
    return name


def _git_header_names(rest: str) -> tuple[str | None, str | None]:
    """``a/X b/Y`` after ``diff --git``: used only when no ---/+++ or rename line names them."""
    if rest.startswith('"'):
        old, tail = _unquote(rest)
        tail = tail.lstrip(" ")
        new = _unquote(tail)[0] if tail.startswith('"') else tail
    elif ' "' in rest:
        old, _, tail = rest.partition(' "')
        new = _unquote('"' + tail)[0]
    else:
        # Unquoted names with spaces are ambiguous; git writes the same name twice unless
        # the file moved, so the split that makes both halves equal is the one.
        half = len(rest) // 2
        old, new = rest[:half], rest[half + 1 :]
        if not (old.startswith("a/") and new.startswith("b/") and old[2:] == new[2:]):
            old, _, new = rest.partition(" b/")
            new = "b/" + new
    return _side(old, "a/", True), _side(new, "b/", True)


def parse_unified(text: str) -> list[DiffFile]:
    """The files of a unified diff (git's or ``diff -u``'s), with every line's numbers.

    A hunk's lines are counted by its header, so a removed line that reads ``-- x`` is never
    taken for the next file's ``--- `` line."""
    lines = text.split("\n")
    files: list[DiffFile] = []
    current: DiffFile | None = None
    git = False
    k = 0
    while k < len(lines):
        line = lines[k]
        if line.startswith("diff --git "):
            git = True
            old, new = _git_header_names(line[len("diff --git ") :])
            current = DiffFile(old, new)
            files.append(current)
        elif line.startswith("--- ") and k + 1 < len(lines) and lines[k + 1].startswith("+++ "):
            old = _side(_name(line[4:]), "a/", git)
            new = _side(_name(lines[k + 1][4:]), "b/", git)
            if current is None or current.hunks or not git:
                current = DiffFile(old, new)
                files.append(current)
                if not git:
                    current.old_path, current.new_path = _plain_sides(old, new)
            else:
                current.old_path, current.new_path = old, new
            if old is None:
                current.status = "added"
            elif new is None:
                current.status = "deleted"
            k += 2
            continue
        elif current is not None and (m := _HUNK.match(line)):
            k = _read_hunk(lines, k, m, current)
            continue
        elif current is not None:
            _extended_header(line, current)
        k += 1
    return files


def _plain_sides(old: str | None, new: str | None) -> tuple[str | None, str | None]:
    """``diff -u a/x b/x`` (the prefixes a tool adds) as the paths ``x`` and ``x``."""
    if old is not None and new is not None and old.startswith("a/") and new.startswith("b/"):
        return old[2:], new[2:]
    return old, new


def _extended_header(line: str, current: DiffFile) -> None:
    if line.startswith("new file mode"):
        current.status = "added"
        current.old_path = None
    elif line.startswith("deleted file mode"):
        current.status = "deleted"
        current.new_path = None
    elif line.startswith("rename from "):
        current.status, current.old_path = "renamed", _name(line[len("rename from ") :])
    elif line.startswith("rename to "):
        current.status, current.new_path = "renamed", _name(line[len("rename to ") :])
    elif line.startswith("copy from "):
        current.status, current.old_path = "copied", _name(line[len("copy from ") :])
    elif line.startswith("copy to "):
        current.status, current.new_path = "copied", _name(line[len("copy to ") :])
    elif line.startswith(("similarity index ", "dissimilarity index ")):
        digits = line.rsplit(" ", 1)[-1].rstrip("%")
        current.similarity = int(digits) if digits.isdigit() else None
    elif line.startswith("old mode "):
        current.mode_change = line[len("old mode ") :].strip()
    elif line.startswith("new mode ") and current.mode_change is not None:
        current.mode_change += " -> " + line[len("new mode ") :].strip()
    elif line.startswith("GIT binary patch") or (
        line.startswith("Binary files ") and line.endswith(" differ")
    ):
        current.binary = True
        if current.old_path is None and current.new_path is None:
            _binary_names(line, current)


def _binary_names(line: str, current: DiffFile) -> None:
    """``Binary files a/x and b/x differ``, the only name a plain binary entry gives."""
    body = line[len("Binary files ") : -len(" differ")]
    old, sep, new = body.partition(" and ")
    if sep:
        current.old_path = _side(old, "a/", True)
        current.new_path = _side(new, "b/", True)
        if current.old_path is None:
            current.status = "added"
        elif current.new_path is None:
            current.status = "deleted"


def _read_hunk(lines: list[str], k: int, m: re.Match[str], current: DiffFile) -> int:
    old_at, new_at = int(m.group(1)), int(m.group(3))
    old_left = int(m.group(2)) if m.group(2) is not None else 1
    new_left = int(m.group(4)) if m.group(4) is not None else 1
    hunk = Hunk(lines[k])
    current.hunks.append(hunk)
    k += 1
    while k < len(lines) and (old_left > 0 or new_left > 0):
        raw = lines[k]
        sign, body = (raw[0], raw[1:]) if raw else (" ", "")  # a blank context line, trimmed
        body = body.removesuffix("\r")
        if sign == " " and old_left > 0 and new_left > 0:
            hunk.lines.append(DiffLine(" ", body, old_at, new_at))
            old_at, new_at, old_left, new_left = old_at + 1, new_at + 1, old_left - 1, new_left - 1
        elif sign == "-" and old_left > 0:
            hunk.lines.append(DiffLine("-", body, old_at, None))
            old_at, old_left = old_at + 1, old_left - 1
        elif sign == "+" and new_left > 0:
            hunk.lines.append(DiffLine("+", body, None, new_at))
            new_at, new_left = new_at + 1, new_left - 1
        elif sign == "\\":
            hunk.lines.append(DiffLine("\\", body.strip(), None, None))
        else:
            break  # the hunk is shorter than its header says: the rest is not its
        k += 1
    if k < len(lines) and lines[k].startswith("\\"):
        hunk.lines.append(DiffLine("\\", lines[k][1:].strip(), None, None))
        k += 1
    return k


# --------------------------------------------------------------------------- ranges


@dataclass(frozen=True)
class Range:
    """Which change to read: the working tree or the index against HEAD, or commits."""

    kind: Literal["worktree", "staged", "commits"]
    left: str | None = None  # as typed (validated), for the words that describe it
    right: str | None = None  # None: the working tree against ``left``
    symmetric: bool = False  # ``A...B``: from the merge base of A and B to B


def parse_range(text: str | None, *, staged: bool = False) -> Range:
    """``REV_RANGE`` as typed: none (the working tree), ``A..B``, ``A...B`` or one ``REV``."""
    if text is None or text == "":
        return Range("staged" if staged else "worktree")
    if staged:
        raise DiffError("give --staged or a revision range, not both")
    symmetric = "..." in text
    left, sep, right = text.partition("..." if symmetric else "..")
    sides = [left or "HEAD", right or "HEAD"] if sep else [left]
    for side in sides:
        if not _REV.match(side):
            shown = text if len(text) <= 80 else text[:77] + "..."
            raise DiffError(
                f"{shown!r} is not a revision range: use REV, BASE..HEAD or BASE...HEAD "
                "with names or commit ids (letters, digits and . _ / @ ^ ~ { } + -)"
            )
    if not sep:
        return Range("commits", sides[0])
    return Range("commits", sides[0], sides[1], symmetric)


class Git:
    """``git`` in one repository, run without a shell and without the repository's programs."""

    def __init__(self, repo: Path, env: dict[str, str] | None = None) -> None:
        exe = shutil.which("git")
        if exe is None:
            raise DiffError("git is not installed (or not on PATH); --diff FILE reads a diff")
        self.exe = exe
        base = dict(os.environ if env is None else env)
        base.update(
            GIT_TERMINAL_PROMPT="0",
            GIT_OPTIONAL_LOCKS="0",  # reading the status must not rewrite the index
            GIT_PAGER="cat",
            LC_ALL="C",
        )
        for name in ("GIT_EXTERNAL_DIFF", "GIT_DIFF_OPTS"):
            base.pop(name, None)
        self.env = base
        self.repo = repo
        top = self.text(["rev-parse", "--show-toplevel"], what="find the repository")
        self.root = Path(top.strip())

    def _argv(self, args: Sequence[str]) -> list[str]:
        return [
            self.exe,
            "--no-pager",
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.quotePath=true",
            "-c",
            "diff.noprefix=false",
            "-c",
            "diff.mnemonicPrefix=false",
            "-C",
            str(self.repo),
            *args,
        ]

    def run(
        self, args: Sequence[str], *, what: str, cap: int = DIFF_BYTE_CAP
    ) -> tuple[bytes, bool]:
        """git's standard output (at most ``cap`` bytes) and whether it went on past it."""
        with tempfile.TemporaryFile() as err:
            try:
                proc = subprocess.Popen(
                    self._argv(args),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    env=self.env,
                )
            except OSError as exc:
                raise DiffError(f"cannot run git to {what}: {exc}") from None
            assert proc.stdout is not None
            out = bytearray()
            over = False
            try:
                while chunk := proc.stdout.read(65536):
                    out += chunk
                    if len(out) > cap:
                        over = True
                        del out[cap:]
                        proc.kill()
                        break
                proc.wait(timeout=GIT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise DiffError(f"git took over {GIT_TIMEOUT_S:g} s to {what}") from None
            finally:
                proc.stdout.close()
            if proc.returncode != 0 and not over:
                err.seek(0)
                said = err.read(2000).decode("utf-8", "replace").strip().splitlines()
                detail = said[-1] if said else f"exit status {proc.returncode}"
                raise DiffError(f"git could not {what}: {detail}")
        return bytes(out), over

    def text(self, args: Sequence[str], *, what: str) -> str:
        out, _ = self.run(args, what=what, cap=1024 * 1024)
        return out.decode("utf-8", "replace")

    def commit(self, rev: str) -> str | None:
        """The commit id ``rev`` names, or None; ``rev`` has matched ``_REV`` already."""
        try:
            out = self.text(
                ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"],
                what=f"resolve {rev}",
            )
        except DiffError:
            return None
        return out.strip() or None

    def resolve(self, rev: str) -> str:
        sha = self.commit(rev)
        if sha is None:
            raise DiffError(f"{rev!r} names no commit in {self.root}")
        return sha


def _diff_args(context: int) -> list[str]:
    return [
        "diff",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "--no-relative",
        "--submodule=short",
        "-M",
        f"--unified={context}",
        "--src-prefix=a/",
        "--dst-prefix=b/",
    ]


def _amount(cap: int) -> str:
    return f"{cap / (1024 * 1024):g} MiB" if cap >= 1024 * 1024 else f"{cap} bytes"


def _names(raw: bytes) -> Iterator[str]:
    """The paths of ``git diff --name-only -z``, decoded as the patch's names are."""
    for part in raw.split(b"\0"):
        if part:
            yield part.decode("utf-8", "replace")


def read_git(
    repo: Path,
    which: Range,
    *,
    context: int = DEFAULT_CONTEXT,
    env: dict[str, str] | None = None,
    cap: int = DIFF_BYTE_CAP,
) -> Diff:
    """The change ``which`` names in the repository at ``repo``."""
    if not 0 <= context <= MAX_CONTEXT:
        raise DiffError(f"--context must be 0-{MAX_CONTEXT} lines, not {context}")
    git = Git(repo, env)
    head = git.commit("HEAD")
    revs: list[str]
    base: str | None
    tip: str | None = None
    if which.kind == "worktree":
        if head is None:
            raise DiffError("the repository has no commit yet: --staged reviews what is added")
        revs, base, source = [head], head, "the working tree against HEAD"
    elif which.kind == "staged":
        revs = ["--cached", head] if head is not None else ["--cached"]
        base, source = head, "the staged changes against HEAD"
    else:
        assert which.left is not None
        left = git.resolve(which.left)
        if which.right is None:
            revs, base, source = [left], left, f"the working tree against {which.left}"
        else:
            right = git.resolve(which.right)
            if which.symmetric:
                merged = git.text(["merge-base", left, right], what="find the merge base")
                left = merged.strip()
            glue = "..." if which.symmetric else ".."
            revs, base, tip = [left, right], left, right
            source = f"{which.left}{glue}{which.right}"
    raw, over = git.run([*_diff_args(context), *revs, "--"], what="read the diff", cap=cap)
    text = raw.decode("utf-8", "replace")
    files = parse_unified(text)
    diff = Diff(files, source, base=base, head=tip)
    if over:
        cut = files.pop() if files else None  # the file the cap cut through
        named, _ = git.run(
            [*_diff_args(0), "--name-only", "-z", *revs, "--"], what="list the files"
        )
        seen = {f.path for f in files} | {f.new_path for f in files if f.new_path}
        rest = [n for n in _names(named) if n not in seen]
        # Named one by one as left out, like the files the artifact's own cap leaves out.
        diff.unread = rest
        diff.notes.append(
            f"the diff is over {_amount(cap)}: it was read up to "
            f"{cut.path if cut is not None else 'its start'}, and {len(rest)} file(s) "
            "from there on were not read"
        )
    if which.kind == "worktree":
        untracked, _ = git.run(
            ["ls-files", "--others", "--exclude-standard", "-z"], what="list untracked files"
        )
        count = sum(1 for _ in _names(untracked))
        if count:
            diff.notes.append(
                f"{count} untracked file(s) are not part of the change (git add -N adds them)"
            )
    return diff


def read_text(text: str, source: str) -> Diff:
    """A unified diff given as text (``--diff FILE`` or stdin)."""
    files = parse_unified(text)
    if not files and text.strip():
        raise DiffError(f"{source} holds no unified diff (no ---/+++ or diff --git lines)")
    return Diff(files, source)


def read_diff_input(given: str, stdin: BinaryIO | None = None, cap: int = DIFF_BYTE_CAP) -> Diff:
    """``--diff FILE``, or ``-`` for a unified diff on standard input, read up to ``cap``."""
    from ..core.errors import file_error
    from ..safefile import read_capped

    if given == "-":
        stream = stdin if stdin is not None else sys.stdin.buffer
        raw = stream.read(cap + 1)
        source = "the diff on standard input"
    else:
        try:
            raw, _ = read_capped(given, cap + 1)
        except OSError as exc:
            raise file_error(f"cannot read --diff {given}", exc, bad_path=DiffError) from None
        source = f"the diff in {Path(given).name}"
    over = len(raw) > cap
    text = raw[:cap].decode("utf-8", "replace")
    if over:
        text = text[: text.rfind("\n") + 1]
    diff = read_text(text, source)
    if over:
        cut = diff.files.pop() if diff.files else None
        diff.notes.append(
            f"the diff is over {_amount(cap)}: it was read up to "
            f"{cut.path if cut is not None else 'its start'}; the files after that were not read"
        )
    return diff
