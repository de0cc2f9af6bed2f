"""Seeded-flaw items from HumanEval: every kept mutant fails its problem's tests, every
control passes, and the checks run in a sandbox with limits.

The subset test generates items for 15 problems drawn by a fixed seed, then runs each item
again outside the generator (a plain child Python, no limits but a timeout), so a flaw that
only the sandbox's limits produced would show.
"""

from __future__ import annotations

import difflib
import gzip
import json
import subprocess
import sys
import time

import pytest

from rune_council.core.errors import RequestError
from rune_council.evaluation import humaneval as H

SUBSET = 15
SUBSET_SEED = 2
LIMITS = H.Limits(wall_seconds=6, cpu_seconds=3)


@pytest.fixture(scope="module")
def problems() -> list[H.Problem]:
    return H.load_problems()


@pytest.fixture(scope="module")
def subset(problems: list[H.Problem]) -> H.Generated:
    return H.generate(problems, seed=SUBSET_SEED, limit=SUBSET, limits=LIMITS, workers=2)


def test_the_package_ships_164_problems(problems: list[H.Problem]) -> None:
    assert len(problems) == 164
    assert [p.number for p in problems] == list(range(164))
    assert problems[0].path == "humaneval/000_has_close_elements.py"


def test_every_kept_mutant_fails_and_every_control_passes_when_run_again(
    subset: H.Generated, problems: list[H.Problem], tmp_path: object
) -> None:
    by_task = {p.task_id: p for p in problems}
    controls = [i for i in subset.items if i.label == "clean"]
    mutants = [i for i in subset.items if i.label == "flawed"]
    assert len(controls) == SUBSET
    assert len(mutants) >= SUBSET - 2  # a problem may have no mutant its tests catch
    assert {i.check.outcome for i in controls} == {"passed"}
    assert all(not i.check.passed for i in mutants)
    for item in subset.items:
        program = H.program_for(by_task[item.task_id], item.post_image)
        try:
            done = subprocess.run(
                [sys.executable, "-c", program],
                cwd=str(tmp_path),
                capture_output=True,
                timeout=LIMITS.wall_seconds,
            )
            passed = done.returncode == 0
        except subprocess.TimeoutExpired:
            passed = False
        assert passed == (item.label == "clean"), (item.id, item.detail)


def test_each_mutant_changes_only_its_seeded_place(
    subset: H.Generated, problems: list[H.Problem]
) -> None:
    by_task = {p.task_id: p for p in problems}
    for item in subset.items:
        problem = by_task[item.task_id]
        assert item.path == problem.path
        assert item.pre_image == problem.prompt
        assert item.post_image.startswith(problem.prompt)
        if item.label == "clean":
            assert item.post_image == problem.source and item.seeded_line is None
            continue
        assert item.seeded_line is not None
        assert item.seeded_line >= problem.first_solution_line
        old = problem.source.split("\n")
        new = item.post_image.split("\n")
        ops = [o for o in difflib.SequenceMatcher(a=old, b=new).get_opcodes() if o[0] != "equal"]
        assert len(ops) == 1, (item.id, ops)
        tag, a0, a1, b0, b1 = ops[0]
        if item.kind == "dropped-case":
            assert tag == "delete"
            # The seeded line is the first non-blank line standing where the case was.
            assert item.seeded_line >= b0 + 1
            assert all(not line.strip() for line in new[b0 : item.seeded_line - 1])
        else:
            assert (tag, a1 - a0, b1 - b0) == ("replace", 1, 1)
            assert item.seeded_line == b0 + 1


def test_the_subset_uses_several_kinds_of_mutation(subset: H.Generated) -> None:
    kinds = {i.kind for i in subset.items if i.kind is not None}
    assert len(kinds) >= 3, kinds


def test_the_same_seed_gives_the_same_items(problems: list[H.Problem]) -> None:
    few = problems[:3]
    a = H.generate(few, seed=4, limits=LIMITS)
    b = H.generate(few, seed=4, limits=LIMITS)
    strip = lambda g: [(i.id, i.post_image, i.seeded_line) for i in g.items]  # noqa: E731
    assert strip(a) == strip(b)


def test_pick_problems_is_seeded_and_keeps_task_order(problems: list[H.Problem]) -> None:
    a = H.pick_problems(problems, 10, seed=1)
    assert a == H.pick_problems(problems, 10, seed=1)
    assert a != H.pick_problems(problems, 10, seed=2)
    assert [p.number for p in a] == sorted(p.number for p in a)
    assert H.pick_problems(problems, None, seed=1) == problems
    with pytest.raises(RequestError):
        H.pick_problems(problems, -1, seed=1)


# --------------------------------------------------------------------------- mutations

PROMPT = '''def f(xs: list, name: str) -> int:
    """Count the small ones; "é" keeps the columns honest."""
'''
SOLUTION = """    if not xs:
        return 0
    label = "é"; n = 0
    for i in range(len(xs)):
        if xs[i] < 3 and label == "é":
            n += 1
    return max(n, 0) + pow(2, 0) - 1
"""
TOY = H.Problem(
    task_id="Toy/7",
    prompt=PROMPT,
    canonical_solution=SOLUTION,
    test="def check(candidate):\n    assert candidate([1, 5, 2], 'x') == 2\n",
    entry_point="f",
)


def lines_of(m: H.Mutation) -> str:
    return m.text.split("\n")[m.line - 1].strip()


def test_every_kind_of_mutation_is_made_at_the_node_itself() -> None:
    found = {(m.kind, lines_of(m)) for m in H.mutations(TOY)}
    assert ("boundary", 'if xs[i] <= 3 and label == "é":') in found
    assert ("flipped-comparison", 'if xs[i] > 3 and label == "é":') in found
    assert ("flipped-comparison", 'if xs[i] < 3 and label != "é":') in found
    assert ("off-by-one", 'if xs[i] < 4 and label == "é":') in found
    assert ("off-by-one", "for i in range(len(xs) + 1):") in found
    assert ("off-by-one", "for i in range(len(xs) - 1):") in found
    assert ("swapped-arguments", "return max(0, n) + pow(2, 0) - 1") in found
    assert ("swapped-arguments", "return max(n, 0) + pow(0, 2) - 1") in found
    dropped = [m for m in H.mutations(TOY) if m.kind == "dropped-case"]
    assert [lines_of(m) for m in dropped] == ['label = "é"; n = 0']
    assert all(m.line >= TOY.first_solution_line for m in H.mutations(TOY))


def test_mutations_leave_the_prompt_alone_and_all_parse() -> None:
    for m in H.mutations(TOY):
        assert m.text.startswith(PROMPT)
        compile(m.text, "<m>", "exec")
    # "0" never becomes "-1": a literal minus would be a different expression.
    assert not any("`0` became `-1`" in m.detail for m in H.mutations(TOY))


def test_a_toy_problem_yields_a_control_and_a_caught_mutant() -> None:
    got = H.generate([TOY], seed=0, limits=LIMITS)
    assert [i.label for i in got.items] == ["clean", "flawed"]
    assert got.items[1].check.outcome in {"failed", "timeout", "killed"}


def test_a_problem_whose_reference_fails_is_skipped_with_the_reason() -> None:
    broken = H.Problem(
        task_id="Toy/8",
        prompt="def g():\n",
        canonical_solution="    return 1\n",
        test="def check(candidate):\n    assert candidate() == 2\n",
        entry_point="g",
    )
    got = H.generate([broken], seed=0, limits=LIMITS)
    assert got.items == []
    assert "does not pass its tests" in got.skipped[0].reason


def test_a_problem_nothing_can_mutate_is_skipped_with_the_reason() -> None:
    plain = H.Problem(
        task_id="Toy/9",
        prompt="def h(s):\n",
        canonical_solution="    return s.strip()\n",
        test="def check(candidate):\n    assert candidate(' a ') == 'a'\n",
        entry_point="h",
    )
    got = H.generate([plain], seed=0, limits=LIMITS)
    assert [i.label for i in got.items] == ["clean"]
    assert got.skipped[0].reason == "no mutation applies to its reference solution"


def test_unreadable_data_is_a_clear_error() -> None:
    with pytest.raises(RequestError, match="not readable gzip"):
        H.parse_problems(b"not gzip")
    with pytest.raises(RequestError, match="line 1 is not a problem"):
        H.parse_problems(gzip.compress(b'{"task_id": "x"}\n'))
    row = {"task_id": "HumanEval/x", "prompt": "", "canonical_solution": "", "test": ""}
    with pytest.raises(RequestError, match="no number"):
        H.parse_problems(gzip.compress(json.dumps({**row, "entry_point": "f"}).encode()))
    bomb = gzip.compress(b" " * (H.MAX_DATA_BYTES + 10))
    with pytest.raises(RequestError, match="over"):
        H.parse_problems(bomb)


# --------------------------------------------------------------------------- sandbox


def test_a_program_that_never_ends_is_stopped() -> None:
    started = time.monotonic()
    got = H.run_sandboxed("while True:\n    pass\n", H.Limits(wall_seconds=3, cpu_seconds=1))
    assert got.outcome in {"timeout", "killed"}
    assert time.monotonic() - started < 8


def test_memory_is_limited() -> None:
    got = H.run_sandboxed("x = bytearray(900 * 1024 * 1024)\n", H.Limits(memory_bytes=256 << 20))
    assert got.outcome == "failed" and "MemoryError" in got.detail


def test_the_child_has_an_empty_directory_a_bare_environment_and_fixed_limits() -> None:
    program = """
import os, resource, sys
assert os.listdir(".") == [], os.listdir(".")
assert set(os.environ) <= {"LC_ALL", "LC_CTYPE"}, sorted(os.environ)
assert resource.getrlimit(resource.RLIMIT_NPROC) == (0, 0)
assert resource.getrlimit(resource.RLIMIT_CORE) == (0, 0)
assert resource.getrlimit(resource.RLIMIT_CPU) == (3, 3)
assert sys.flags.isolated and sys.flags.no_site
try:
    resource.setrlimit(resource.RLIMIT_CPU, (100, 100))
except ValueError:
    pass
else:
    raise SystemExit("the limit could be raised")
"""
    got = H.run_sandboxed(program, H.Limits(cpu_seconds=3))
    assert got.outcome == "passed", got.detail


def test_a_flood_of_output_is_cut_off() -> None:
    got = H.run_sandboxed(
        "import sys\nwhile True:\n    sys.stderr.write('x' * 65536)\n",
        H.Limits(file_bytes=64 * 1024),
    )
    assert got.outcome in {"killed", "failed"}
    assert len(got.detail) <= H.MAX_DETAIL + 20


def alive(pid: int) -> bool:
    """Running, as opposed to gone or a zombie nobody has reaped yet."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in {"Z", "X"}


def test_nothing_the_program_starts_outlives_it() -> None:
    # As root RLIMIT_NPROC does not bind, so the fork may succeed: the grandchild must still
    # be gone once the check returns.
    program = """
import os, sys, time
try:
    pid = os.fork()
except OSError:
    sys.stderr.write("fork refused\\n")
    raise SystemExit(3)
if pid == 0:
    time.sleep(60)
    os._exit(0)
sys.stderr.write(f"grandchild {pid}\\n")
raise SystemExit(4)
"""
    got = H.run_sandboxed(program, H.Limits(wall_seconds=5))
    assert got.outcome == "failed"
    if got.detail.startswith("grandchild"):
        pid = int(got.detail.split()[1])
        deadline = time.monotonic() + 5
        while alive(pid):
            if time.monotonic() > deadline:
                pytest.fail(f"grandchild {pid} outlived the check")
            time.sleep(0.05)
    else:
        assert got.detail == "fork refused"
