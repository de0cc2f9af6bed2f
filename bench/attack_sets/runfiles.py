"""Run files are data: files planted in a cloned repository, read by the reader commands.

Each attack is the test suite's scene (tests/test_security_runfile.py): a ``git init``
project, a sentinel directory outside it, a private temp root (TMPDIR) holding a leftover
working directory of the shape this program makes, and sentinel ``sleep`` processes. The
planted run files say ``running``, with the orchestrator on this host and dead. Then
``rune council list``, ``show`` and ``watch --wait 5`` run against them as real processes.

Held: the attack's own criterion, and ``.git``, the sentinel, the temp root and every
sentinel process exactly as they were. Orphans are processes still carrying a planted
marker afterwards; a leak is the outside run file's question in any output.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable

import psutil

from rune_council.runtimes import lineage
from tests.test_security_runfile import (
    EXAMPLE,
    NOBODY,
    SECRET_QUESTION,
    Scene,
    _absolute,
    _climb,
    _finish,
    _ill_formed_markers,
    _index_for,
    _project,
    _symlinked_run_file,
)

from .kit import AS_ROOT, OFFLINE, Attack, Row, World, asserted, attack, expect

SECTION = "run files as data"


def _scene(w: World) -> Scene:
    s = _project(w.tmp)
    s.env.update(OFFLINE)
    w.cleanups.append(lambda: _finish(s))
    w.file_roots = [s.proj / ".rune"]
    w.secrets.append(SECRET_QUESTION)
    return s


def _planted(w: World, s: Scene) -> None:
    """What this attack planted: the markers a leftover would carry, and the state the
    readers must leave as they found it."""
    for proc in s.sleepers.values():
        env = _environ(proc.pid)
        if env.get(lineage.MARKER_VAR):
            w.markers.add(env[lineage.MARKER_VAR])
    s.before = s.snapshot()


def _environ(pid: int) -> dict[str, str]:
    try:
        return dict(psutil.Process(pid).environ())
    except psutil.Error:
        return {}


def _readers(w: World, s: Scene, failures: list[str]) -> None:
    """list, list --json, then show and watch --wait 5 on every planted id."""
    listed = w.rune("list", "--json", cwd=s.proj, env=s.env)
    try:
        rows = {r["id"]: r for r in json.loads(listed.stdout)}
    except ValueError:
        rows = {}
        failures.append("list --json printed no JSON")
    for run_id in s.ids:
        if run_id == "link":
            expect(failures, run_id not in rows, "list showed the symlinked run file")
        else:
            status = rows.get(run_id, {}).get("status")
            expect(failures, status == "abandoned", f"list says {run_id} is {status}")
    text = w.rune("list", cwd=s.proj, env=s.env)
    if any(run_id != "link" for run_id in s.ids):
        expect(failures, "abandoned" in text.stdout, "list does not say abandoned")
    for run_id in s.ids:
        link = run_id == "link"
        shown = w.rune("show", run_id, cwd=s.proj, env=s.env, ok=(2,) if link else (0,))
        watched = w.rune(
            "watch", run_id, "--wait", "5", cwd=s.proj, env=s.env, ok=(2,) if link else (75,)
        )
        for ran in (shown, watched):
            if link:
                expect(failures, "symlink" in ran.stderr, f"{ran.label} named no symlink")
            else:
                expect(failures, "abandoned" in ran.stdout, f"{ran.label} does not say abandoned")
    for ran in w.ran:
        expect(
            failures,
            "Traceback" not in ran.text and "internal error" not in ran.text,
            f"{ran.label} crashed",
        )
    asserted(failures, lambda: s.assert_intact("the readers"))


def _read_with(plant_it: Callable[[Scene], None], why: str) -> Attack:
    """An attack that plants with the test suite's own planting function, then reads."""

    def run(w: World) -> Row:
        s = _scene(w)
        plant_it(s)
        _planted(w, s)
        failures: list[str] = []
        _readers(w, s, failures)
        return w.row(failures, why)

    return run


attack("climb out of the temp root (marker ../../<project>/)", SECTION)(
    _read_with(_climb, ".git, the project and the sentinel untouched; run shown as abandoned")
)
attack("absolute path in the marker (forty ../ then the sentinel)", SECTION)(
    _read_with(_absolute, "the sentinel outside survives; the marker is not a path")
)


@attack("copied pid: a bystander's pid and real start time", SECTION)
def _(w: World) -> Row:
    s = _scene(w)
    s.plant("copied", marker=lineage.new_run_marker(), processes=[s.sleeper("bystander")])
    _planted(w, s)
    failures: list[str] = []
    _readers(w, s, failures)
    return w.row(failures, "the bystander sleep is still alive: it carries no marker of the run")


attack("ill-formed markers on real processes (*, deadbeef, ../../x)", SECTION)(
    _read_with(_ill_formed_markers, "all three sleeps carrying *.1, deadbeef.1, ../../x.1 alive")
)


@attack("another user's process and folder (root only)", SECTION)
def _(w: World) -> Row:
    if not AS_ROOT:
        return w.skip("skipped: needs root to run a process and own a folder as uid 65534")
    s = _scene(w)
    good = lineage.new_run_marker()
    foreign = s.sleeper("foreign", f"{good}.1", uid=NOBODY)
    theirs = s.scratch / f"rune-council-{good}.1-abcdefgh"
    theirs.mkdir()
    (theirs / "work.txt").write_text("another user's")
    os.chown(theirs / "work.txt", NOBODY, NOBODY)
    os.chown(theirs, NOBODY, NOBODY)
    s.plant("foreign", marker=good, processes=[foreign])
    _planted(w, s)
    failures: list[str] = []
    _readers(w, s, failures)
    expect(failures, (theirs / "work.txt").is_file(), "the other user's folder was removed")
    return w.row(failures, "uid 65534's sleep and folder both survive")


@attack("symlink named like ours in the temp root", SECTION)
def _(w: World) -> Row:
    s = _scene(w)
    good = lineage.new_run_marker()
    (s.scratch / f"rune-council-{good}.2-abcdefgh").symlink_to(s.outside / ".sentinel")
    s.plant("lookalike", marker=good)
    _planted(w, s)
    failures: list[str] = []
    _readers(w, s, failures)
    return w.row(failures, "the link's target (the sentinel) untouched, the link left alone")


@attack("symlinked run file (run-link.json -> outside)", SECTION)
def _(w: World) -> Row:
    s = _scene(w)
    _symlinked_run_file(s)
    _planted(w, s)
    failures: list[str] = []
    _readers(w, s, failures)
    by_path = w.rune("show", str(s.council / "run-link.json"), "--json", cwd=s.proj, env=s.env)
    by_path.ok = (2,)
    expect(failures, "symlink" in by_path.stderr, "show by path named no symlink")
    return w.row(failures, "show and watch exit 2 naming the symlink; its question never printed")


@attack("orchestrator pid -1", SECTION)
def _(w: World) -> Row:
    s = _scene(w)
    s.plant("badpid", marker=lineage.new_run_marker(), pid=-1)
    _planted(w, s)
    failures: list[str] = []
    _readers(w, s, failures)
    return w.row(failures, "list exits 0 and shows abandoned; nothing signalled")


@attack("planted stats-index.json (edited, size and mtime kept)", SECTION)
def _(w: World) -> Row:
    s = _scene(w)
    s.plant("indexed", marker=lineage.new_run_marker())
    shutil.copy(EXAMPLE, s.council / EXAMPLE.name)
    _index_for(s)  # the attacker's index, built over a copy and edited
    _planted(w, s)
    failures: list[str] = []
    stats = w.rune("stats", "--json", cwd=s.proj, env=s.env)
    try:
        got = json.loads(stats.stdout)
        expect(failures, got["totals"] == s.true_stats, "stats took the planted index's totals")
    except (ValueError, KeyError):
        failures.append("stats --json printed no totals")
    w.rune("stats", cwd=s.proj, env=s.env)
    asserted(failures, lambda: s.assert_intact("stats"))
    return w.row(failures, "stats --json totals equal an honest read of the files")


@attack("planted batch results file (symlink, hard link)", SECTION)
def _(w: World) -> Row:
    w.secrets.append(SECRET_QUESTION)
    outside = w.tmp / "outside"
    outside.mkdir()
    precious = outside / "precious.txt"
    precious.write_text("the user's own file\n")
    linked = outside / "linked.txt"
    linked.write_text("linked by a hard link\n")
    failures: list[str] = []
    for case in ("symlink", "hardlink"):
        work = w.tmp / case
        (work / ".rune" / "batch").mkdir(parents=True)
        (work / "items.jsonl").write_text(json.dumps({"id": "a", "question": "Is it safe?"}) + "\n")
        results = work / ".rune" / "batch" / "items.results.jsonl"
        if case == "symlink":
            results.symlink_to(precious)
        else:
            os.link(linked, results)
        env = {"PATH": "/usr/bin:/bin", "HOME": str(work), "LANG": "C.UTF-8", **OFFLINE}
        ran = w.rune(
            "batch", "items.jsonl", cwd=work, env=env, ok=(2,) if case == "symlink" else (0, 1)
        )
        if case == "symlink":
            expect(failures, "symlink" in ran.stderr, "batch named no symlink")
            expect(failures, results.is_symlink(), "the planted link was replaced silently")
        else:
            expect(failures, not os.path.samefile(results, linked), "wrote through the hard link")
    expect(failures, precious.read_text() == "the user's own file\n", "the link's target changed")
    expect(failures, linked.read_text() == "linked by a hard link\n", "the linked file changed")
    w.file_roots = [w.tmp / c / ".rune" for c in ("symlink", "hardlink")]
    return w.row(failures, "symlink refused (exit 2), hard link replaced; both outside files same")
