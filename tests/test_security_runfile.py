"""A run file is data, never instructions: planted ones attacked through every reading door.

A cloned repository can carry ``.rune/council/run-*.json``. Each scene here is such a project
(a real ``git init``), next to a sentinel directory outside it and a handful of sentinel
processes, with run files planted the way an outsider would write them: the orchestrator
on this host and dead, the voice marker a path that climbs out of the temp root, an absolute
path, glob characters, hex of the wrong length, a well-formed marker carried by another
user's process and naming another user's directory, the sentinels' pids with their real
start times copied in, and a run file that is a symlink to a file outside. Every door that
reads run files is run against it as a real process (the CLI, the MCP server, the HTTP
server on a loopback port); afterwards ``.git``, the sentinel directory and every sentinel
process must be exactly as they were.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from rune_council.runtimes import lineage
from rune_council.runtimes.scratch import FALLBACK_PREFIX

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / ".rune-example" / "council" / "run-orders-shard-critique.json"
AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
NOBODY = 65534
SECRET_QUESTION = "TOP SECRET QUESTION FROM OUTSIDE THE PROJECT"
# The shape of a real leftover working directory: an attacker's path climbs through one.
STEP = "rune-council-0123456789abcdef.1-abcdefgh"


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _started(pid: int) -> float:
    return float(psutil.Process(pid).create_time())


def _alive(proc: subprocess.Popen[bytes]) -> bool:
    if proc.poll() is not None:
        return False
    try:
        return psutil.Process(proc.pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _tree(path: Path) -> dict[str, str]:
    """Every entry under ``path`` (not following symlinks) with what it holds."""
    found: dict[str, str] = {}
    if not os.path.lexists(path):
        return found
    for here, dirs, files in os.walk(path):
        for name in dirs + files:
            full = Path(here, name)
            rel = str(full.relative_to(path))
            if full.is_symlink():
                found[rel] = "-> " + os.readlink(full)
            elif full.is_file():
                found[rel] = hashlib.sha256(full.read_bytes()).hexdigest()
            else:
                found[rel] = "dir"
    return found


@dataclass
class Scene:
    tmp: Path
    proj: Path
    outside: Path
    scratch: Path
    env: dict[str, str]
    sleepers: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    # Started here, expected to be killed: not sentinels, but never left running either.
    doomed: list[subprocess.Popen[bytes]] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    before: dict[str, dict[str, str]] = field(default_factory=dict)
    true_stats: dict[str, Any] = field(default_factory=dict)

    @property
    def council(self) -> Path:
        return self.proj / ".rune" / "council"

    def sleeper(self, name: str, marker: str | None = None, *, uid: int | None = None) -> int:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        if marker is not None:
            env[lineage.MARKER_VAR] = marker

        def drop() -> None:
            if uid is not None:
                os.setgid(uid)
                os.setuid(uid)

        proc = subprocess.Popen(["sleep", "300"], env=env, start_new_session=True, preexec_fn=drop)
        self.sleepers[name] = proc
        deadline = time.monotonic() + 5
        # Wait until the exec is done, so the environment read is sleep's own.
        while time.monotonic() < deadline:
            try:
                if psutil.Process(proc.pid).name() == "sleep":
                    break
            except psutil.Error:
                pass
            time.sleep(0.01)
        return proc.pid

    def plant(
        self,
        run_id: str,
        *,
        marker: Any,
        processes: Sequence[int] = (),
        pid: Any = None,
    ) -> None:
        doc = json.loads(EXAMPLE.read_text())
        started = (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=10)).isoformat()
        doc.update(id=run_id, status="running", started_at=started, finished_at=None)
        doc["orchestrator"] = {
            "pid": _dead_pid() if pid is None else pid,
            "host": socket.gethostname(),
            "started_at": started,
            "heartbeat_at": started,
            "voice_marker": marker,
            "voice_processes": [{"pid": p, "started": _started(p)} for p in processes],
        }
        path = self.council / f"run-{run_id}.json"
        path.write_text(json.dumps(doc))
        self.ids.append(run_id)

    def cli(self, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "rune_council.cli", "council", *args],
            cwd=self.proj,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    def snapshot(self) -> dict[str, dict[str, str]]:
        return {
            ".git": _tree(self.proj / ".git"),
            "outside": _tree(self.outside),
            "scratch": _tree(self.scratch),
        }

    def assert_intact(self, door: str) -> None:
        assert (self.proj / ".git" / "HEAD").is_file(), f"{door} deleted .git"
        git = subprocess.run(
            ["git", "-C", str(self.proj), "rev-parse", "--git-dir"], capture_output=True
        )
        assert git.returncode == 0, f"{door}: the repository is broken"
        keep = self.outside / ".sentinel" / "keep.txt"
        assert keep.is_file() and keep.read_text() == "keep", f"{door} deleted the sentinel"
        after = self.snapshot()
        for part, entries in self.before.items():
            assert after[part] == entries, f"{door} changed {part}"
        dead = [name for name, proc in self.sleepers.items() if not _alive(proc)]
        assert dead == [], f"{door} signalled {dead}"


def _index_for(scene: Scene) -> None:
    """An attacker's stats index: built over the same files in a copy of theirs (their
    inodes, their change times), then edited to claim what the files do not say."""
    theirs = scene.tmp / "attacker" / ".rune"
    shutil.copytree(scene.proj / ".rune" / "council", theirs / "council", symlinks=True)
    hour_ago = time.time() - 3600
    for tree in (scene.council, theirs / "council"):
        for path in tree.glob("*.json"):
            if not path.is_symlink():
                os.utime(path, (hour_ago, hour_ago))
    honest = subprocess.run(
        [sys.executable, "-m", "rune_council.cli", "council", "stats", "--json"],
        cwd=theirs.parent,
        env=scene.env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert honest.returncode == 0, honest.stderr
    scene.true_stats = json.loads(honest.stdout)["totals"]
    index = json.loads((theirs / "stats-index.json").read_text())
    for entry in index["entries"].values():
        if entry.get("run"):
            entry["run"]["status"] = "complete"
            entry["run"]["stamp"] = "MULTI_FAMILY"
            entry["run"]["consensus_claims"] = 42
    (scene.proj / ".rune" / "stats-index.json").write_text(json.dumps(index))


def _project(tmp_path: Path) -> Scene:
    """A cloned project (a real repository), a sentinel outside it, a private temp root."""
    proj = tmp_path / "proj"
    proj.mkdir()
    subprocess.run(["git", "init", "-q", str(proj)], check=True)
    (proj / "README.md").write_text("a cloned project\n")
    outside = tmp_path / "outside"
    (outside / ".sentinel").mkdir(parents=True)
    (outside / ".sentinel" / "keep.txt").write_text("keep")
    scratch = tmp_path / "scratch"  # the readers' temp root (TMPDIR)
    scratch.mkdir()
    (scratch / STEP).mkdir()
    (scratch / STEP / "note").write_text("a leftover of some other run")
    env = {
        "PATH": os.path.dirname(sys.executable) + ":/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "LANG": "C.UTF-8",
        "TMPDIR": str(scratch),
        "PYTHONPATH": str(ROOT),
    }
    (tmp_path / "home").mkdir()
    s = Scene(tmp_path, proj, outside, scratch, env)
    s.council.mkdir(parents=True)
    return s


def _climb(s: Scene) -> None:
    # The marker climbs from the temp root into the project and into the sentinel's parent;
    # a glob of the old kind ends in ".*" and so matches every dot-entry there. The pid of a
    # plain process of the user's is listed with its real start time.
    plain = s.sleeper("plain")
    step = STEP.removeprefix("rune-council-")
    s.plant("climb", marker=f"{step}/../../proj/", processes=[plain])
    s.plant("climb-out", marker=f"{step}/../../outside/", processes=[plain])


def _absolute(s: Scene) -> None:
    step = STEP.removeprefix("rune-council-")
    s.plant("absolute", marker=f"{step}/{'../' * 40}{s.outside.relative_to('/')}/")


def _ill_formed_markers(s: Scene) -> None:
    # Each process carries the file's (ill-formed) marker, as if it had inherited it.
    s.plant("glob", marker="*", processes=[s.sleeper("glob", "*.1")])
    s.plant("short", marker="deadbeef", processes=[s.sleeper("short", "deadbeef.1")])
    s.plant("climb-env", marker="../../x", processes=[s.sleeper("climber", "../../x.1")])


def _well_formed_but_not_ours(s: Scene) -> None:
    # A marker of the right shape: its process is another user's, its directory another
    # user's, and a symlink named like one of its working directories points at the
    # sentinel. The recorded list also names a plain process of the user's.
    good = lineage.new_run_marker()
    recorded = [s.sleeper("bystander")]
    if AS_ROOT:
        recorded.append(s.sleeper("foreign", f"{good}.1", uid=NOBODY))
        theirs = s.scratch / f"rune-council-{good}.1-abcdefgh"
        theirs.mkdir()
        (theirs / "work.txt").write_text("another user's")
        os.chown(theirs / "work.txt", NOBODY, NOBODY)
        os.chown(theirs, NOBODY, NOBODY)
    (s.scratch / f"rune-council-{good}.2-abcdefgh").symlink_to(s.outside / ".sentinel")
    s.plant("wellformed", marker=good, processes=recorded)


def _symlinked_run_file(s: Scene) -> None:
    # What it points at must never be shown.
    secret = json.loads(EXAMPLE.read_text())
    secret.update(id="link", question=SECRET_QUESTION)
    (s.outside / "secret-run.json").write_text(json.dumps(secret))
    (s.council / "run-link.json").symlink_to(s.outside / "secret-run.json")
    s.ids.append("link")


VECTORS = {
    "climb": _climb,
    "absolute": _absolute,
    "ill-formed": _ill_formed_markers,
    "well-formed": _well_formed_but_not_ours,
}


def _plant_hostile(s: Scene) -> None:
    for plant in VECTORS.values():
        plant(s)
    _symlinked_run_file(s)
    _index_for(s)


def _finish(s: Scene) -> None:
    for proc in [*s.sleepers.values(), *s.doomed]:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture
def scene(tmp_path: Path) -> Iterator[Scene]:
    """The project with every hostile run file planted."""
    s = _project(tmp_path)
    try:
        _plant_hostile(s)
        s.before = s.snapshot()
        yield s
    finally:
        _finish(s)


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Scene]:
    """The project alone: each test plants what it needs."""
    s = _project(tmp_path)
    try:
        s.before = s.snapshot()
        yield s
    finally:
        _finish(s)


def _no_traceback(*texts: str) -> None:
    for text in texts:
        assert "Traceback" not in text and "internal error" not in text, text[-2000:]


def _door_list(s: Scene) -> None:
    out = s.cli("list", "--json")
    assert out.returncode == 0, out.stderr
    rows = {r["id"]: r for r in json.loads(out.stdout)}
    assert "link" not in rows  # a symlinked run file is not listed
    for run_id in s.ids:
        if run_id != "link":
            assert rows[run_id]["status"] == "abandoned", rows[run_id]
    text = s.cli("list")
    assert text.returncode == 0 and "abandoned" in text.stdout, text.stderr


def _door_show(s: Scene) -> None:
    for run_id in s.ids:
        out = s.cli("show", run_id)
        _no_traceback(out.stdout, out.stderr)
        assert SECRET_QUESTION not in out.stdout + out.stderr
        if run_id == "link":
            assert out.returncode == 2 and "symlink" in out.stderr, out.stderr
        else:
            assert out.returncode == 0 and "abandoned" in out.stdout, out.stderr
    # Named by path, the symlink is refused the same way.
    out = s.cli("show", str(s.council / "run-link.json"), "--json")
    assert out.returncode == 2 and "symlink" in out.stderr and SECRET_QUESTION not in out.stdout


def _door_watch(s: Scene) -> None:
    for run_id in s.ids:
        out = s.cli("watch", run_id, "--wait", "5", timeout=60)
        _no_traceback(out.stdout, out.stderr)
        assert SECRET_QUESTION not in out.stdout + out.stderr
        if run_id == "link":
            assert out.returncode == 2 and "symlink" in out.stderr, out.stderr
        else:
            assert out.returncode == 75 and "abandoned" in out.stdout, (out.stdout, out.stderr)


def _door_verify(s: Scene) -> None:
    for run_id in s.ids:
        out = s.cli("verify", run_id)
        _no_traceback(out.stdout, out.stderr)
        assert out.returncode == 2, (run_id, out.stdout, out.stderr)
        assert out.stderr.startswith("rune council: "), out.stderr
        if run_id == "link":
            assert "symlink" in out.stderr and "reproduced" not in out.stdout


def _door_stats(s: Scene) -> None:
    out = s.cli("stats", "--json")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    # Every file was read again: the planted index's claims are not the statistics.
    assert got["files"]["reused"] == 0, got["files"]
    assert got["totals"] == s.true_stats
    assert s.cli("stats").returncode == 0


def _door_mcp(s: Scene) -> None:
    from tests.mcp_client import connect, text_of

    async def calls() -> list[tuple[str, str, bool, str]]:
        seen: list[tuple[str, str, bool, str]] = []
        async with connect(s.proj, env=s.env) as session:
            listed = await session.call_tool("list_runs", {"limit": 50})
            seen.append(("list_runs", "", bool(listed.is_error), text_of(listed)))
            for run_id in s.ids:
                for tool in ("show_run", "verify_run"):
                    got = await session.call_tool(tool, {"run_id": run_id})
                    seen.append((tool, run_id, bool(got.is_error), text_of(got)))
        return seen

    for tool, run_id, is_error, text in asyncio.run(calls()):
        _no_traceback(text)
        assert SECRET_QUESTION not in text, (tool, run_id)
        if tool == "list_runs":
            assert not is_error and "abandoned" in text, text
        elif run_id == "link":
            assert is_error and "symlink" in text, (tool, text)


def _door_serve(s: Scene) -> None:
    from tests.web.serving import base_env, start

    server = start(s.proj, env=base_env(s.proj, TMPDIR=str(s.scratch), HOME=s.env["HOME"]))
    try:
        listed = server.client.get("/v1/councils")
        assert listed.status_code == 200, listed.text
        body = listed.text
        assert "abandoned" in body and SECRET_QUESTION not in body
        for run_id in s.ids:
            got = server.client.get(f"/v1/councils/{run_id}")
            assert SECRET_QUESTION not in got.text
            assert got.status_code == (404 if run_id == "link" else 200), got.text
        assert server.proc.poll() is None
    finally:
        server.stop(signal.SIGTERM)
    _no_traceback((s.proj / "server.log").read_text())


DOORS = {
    "list": _door_list,
    "show": _door_show,
    "watch": _door_watch,
    "verify": _door_verify,
    "stats": _door_stats,
    "mcp": _door_mcp,
    "serve": _door_serve,
}


@pytest.mark.parametrize("door", list(DOORS))
def test_a_planted_run_file_deletes_nothing_and_signals_nothing(scene: Scene, door: str) -> None:
    DOORS[door](scene)
    time.sleep(0.2)  # a SIGKILL takes a moment to show
    scene.assert_intact(door)


@pytest.mark.parametrize("vector", list(VECTORS))
def test_each_hostile_value_alone_is_refused(project: Scene, vector: str) -> None:
    VECTORS[vector](project)
    project.before = project.snapshot()
    for args in (("list",), *(("show", run_id) for run_id in project.ids)):
        out = project.cli(*args)
        _no_traceback(out.stdout, out.stderr)
        assert out.returncode == 0 and "abandoned" in out.stdout, (args, out.stderr)
    time.sleep(0.2)
    project.assert_intact(f"{vector}: list and show")


@pytest.mark.parametrize("pid", [-1, 0, 2**40])
def test_an_orchestrator_pid_that_names_no_process_of_ours_is_gone_not_a_crash(
    project: Scene, pid: Any
) -> None:
    project.plant("badpid", marker=lineage.new_run_marker(), pid=pid)
    out = project.cli("list", "--json")
    assert out.returncode == 0, out.stderr
    rows = {r["id"]: r for r in json.loads(out.stdout)}
    assert rows["badpid"]["status"] == "abandoned", rows["badpid"]
    shown = project.cli("show", "badpid")
    assert shown.returncode == 0 and "no usable orchestrator pid" in shown.stdout, shown.stderr
    project.assert_intact("list")


def test_a_real_leftover_of_ours_is_still_killed_and_its_directory_removed(
    project: Scene,
) -> None:
    """The cleanup a dead council needs still happens, and stays inside its own directory."""
    marker = lineage.new_run_marker()
    voice = project.sleeper("voice", f"{marker}.1")
    helper = project.sleeper("helper", f"{marker}.2")  # detached, not in the recorded list
    project.doomed += [project.sleepers.pop("voice"), project.sleepers.pop("helper")]
    voice_proc = psutil.Process(voice)
    helper_proc = psutil.Process(helper)
    # Where a council with the readers' environment puts its voices' directories: HOME is
    # below the shared temp root, so no private root qualifies and the last resort is used.
    root = project.scratch / f"{FALLBACK_PREFIX}{os.getuid()}"
    root.mkdir(mode=0o700)
    work = root / f"rune-council-{marker}.1-k3_9zq0a"
    (work / "locked" / "inner").mkdir(parents=True)
    (work / "locked" / "inner" / "file").write_text("x")
    (work / "to-sentinel").symlink_to(project.outside / ".sentinel")
    (work / "locked" / "inner").chmod(0o000)
    (work / "locked").chmod(0o500)
    # Same run, wrong shape: not a working directory of ours, so it stays.
    odd = root / f"rune-council-{marker}.1-toolongtail"
    odd.mkdir()
    project.before["scratch"] = _tree(project.scratch)
    project.plant("ours", marker=marker, processes=[voice])
    out = project.cli("list", "--json")
    assert out.returncode == 0, out.stderr
    assert {r["id"]: r for r in json.loads(out.stdout)}["ours"]["status"] == "abandoned"
    for proc in (voice_proc, helper_proc):
        proc.wait(5)
    assert not work.exists()
    assert odd.is_dir()
    gone = str(work.relative_to(project.scratch))
    expected = {k: v for k, v in project.before["scratch"].items() if not k.startswith(gone)}
    project.before["scratch"] = expected
    project.assert_intact("list")


def test_a_planted_results_file_is_replaced_never_written_through(tmp_path: Path) -> None:
    precious = tmp_path / "outside" / "precious.txt"
    precious.parent.mkdir()
    precious.write_text("the user's own file\n")
    linked = tmp_path / "outside" / "linked.txt"
    linked.write_text("linked by a hard link\n")
    for case, plant in (
        ("symlink", lambda p: p.symlink_to(precious)),
        ("hardlink", lambda p: os.link(linked, p)),
    ):
        work = tmp_path / case
        (work / ".rune" / "batch").mkdir(parents=True)
        (work / "items.jsonl").write_text(json.dumps({"id": "a", "question": "Is it safe?"}) + "\n")
        results = work / ".rune" / "batch" / "items.results.jsonl"
        plant(results)
        out = subprocess.run(
            [sys.executable, "-m", "rune_council.cli", "council", "batch", "items.jsonl"],
            cwd=work,
            env={
                "PATH": "/usr/bin:/bin",
                "HOME": str(work),
                "LANG": "C.UTF-8",
                "PYTHONPATH": str(ROOT),
            },
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        _no_traceback(out.stdout, out.stderr)
        if case == "symlink":
            assert out.returncode == 2 and "symlink" in out.stderr, out.stderr
            assert results.is_symlink()
        else:
            assert not os.path.samefile(results, linked)
    assert precious.read_text() == "the user's own file\n"
    assert linked.read_text() == "linked by a hard link\n"


def test_reading_a_hostile_results_file_is_one_error_naming_the_line(tmp_path: Path) -> None:
    from rune_council.batch import read_rows
    from rune_council.core.errors import RunFileError

    path = tmp_path / "results.jsonl"
    good = '{"id":"a","line":1,"status":"complete"}'
    for bad, why in (
        ('{"id":"a","line":1,"status":"complete","__class__":1,"run_file":7}', "run_file"),
        ('{"id":"a","line":"1","status":"complete"}', "line"),
        ('{"id":"a","line":1,"status":"owned"}', "status"),
        ("[" * 50_000, "row"),
        ("not json", "row"),
    ):
        path.write_text(good + "\n" + bad + "\n")
        with pytest.raises(RunFileError, match=f":2: .*{why}"):
            read_rows(path)
    path.unlink()
    path.symlink_to(tmp_path / "elsewhere.jsonl")
    (tmp_path / "elsewhere.jsonl").write_text(good + "\n")
    with pytest.raises(RunFileError, match="symlink"):
        read_rows(path)


@pytest.mark.skipif(not AS_ROOT, reason="needs another user to drop to")
def test_an_ordinary_user_removes_its_locked_leftover_directory() -> None:
    """As root, permissions do not bind; the removal runs here as an ordinary user, in a
    forked child, over a working directory whose parts the voice made unreadable."""
    import tempfile

    from rune_council.runtimes.process import remove_leftover_dirs

    # Under the system temp root: pytest's own directories are closed to other users.
    root = Path(tempfile.mkdtemp(prefix="rune-runfile-test-"))
    root.chmod(0o755)
    os.chown(root, NOBODY, NOBODY)
    marker = lineage.new_run_marker()
    work = root / f"rune-council-{marker}.1-abcdefgh"
    pid = os.fork()
    if pid == 0:  # the child: become nobody, make the mess, then clean it up
        code = 1
        try:
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            (work / "locked" / "inner").mkdir(parents=True)
            (work / "locked" / "inner" / "file").write_text("x")
            (work / "locked" / "inner").chmod(0o000)
            (work / "locked").chmod(0o500)
            work.chmod(0o000)
            os.environ["TMPDIR"] = str(root)
            tempfile.tempdir = None
            code = 0 if remove_leftover_dirs(marker) == 1 and not work.exists() else 3
        except BaseException as exc:
            print(f"child: {exc!r}", file=sys.stderr)
        finally:
            os._exit(code)
    try:
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert list(root.iterdir()) == []
    finally:
        shutil.rmtree(root)
