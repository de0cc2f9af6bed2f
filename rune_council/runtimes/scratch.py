"""The one place every directory a voice process is given lives: a root only this user can
write, and none of whose ancestors anyone else can write either.

A CLI looks for instruction files by walking up from the directory it runs in (codex reads
``AGENTS.md``, claude ``CLAUDE.md``, gemini ``GEMINI.md``, qwen ``QWEN.md``, opencode an
``opencode.json`` in every directory above). Any directory on that walk that another local
user can write is a place to plant instructions for the user's voices, and the shared
temporary root (``/tmp``: writable by everyone, sticky) is exactly such a place. So voices
run under, in this order:

1. ``$XDG_RUNTIME_DIR/rune-council``, when the variable names a directory this user owns with
   mode 0700 (what a login session provides);
2. ``$XDG_CACHE_HOME/rune-council/scratch``, else ``~/.cache/rune-council/scratch``, created
   0700;

each only if no directory from it up to ``/`` can be written by another user: a directory
owned by someone other than this user or root, writable by every user, or writable by a group
someone else is in, fails. When neither qualifies, a 0700 directory of the user's own under
the temporary root is the last resort, and ``scratch_note`` says what that leaves open.

A council killed before its run file records its marker (during DETECT, say) leaves its
directories where no reader of run files will look for them. So before a process first
makes a directory in a root (and again every few minutes, for a long-lived server), it
removes every directory a dead council left (``sweep_abandoned``): by the rule leftover
directories of an abandoned run are removed with, applied to each run that has a directory
older than ``ABANDONED_AFTER_S`` and whose marker no live process of this user carries.

What the user's own commands keep between runs and a project must not supply (the model
lists endpoints served) goes in a directory of its own found by the same rule
(``private_dir``): ``$XDG_RUNTIME_DIR/rune-council/<name>``, else
``~/.cache/rune-council/<name>``; with neither, it is not kept at all.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import threading
import time
from collections.abc import Mapping

from ..core import shapes
from ..core.records import record

__all__ = [
    "ABANDONED_AFTER_S",
    "FALLBACK_PREFIX",
    "ScratchRoot",
    "private_dir",
    "scratch_note",
    "scratch_root",
    "sweep_abandoned",
    "sweep_roots",
]

_DIR_FLAGS = (
    os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
)
# The last resort is ``<temporary root>/rune-council-scratch-<uid>``.
FALLBACK_PREFIX = "rune-council-scratch-"
_APP = "rune-council"
# The voices' own root has no name of its own under $XDG_RUNTIME_DIR, and "scratch" under
# the cache directory.
_SCRATCH = "scratch"
# Each directory is made a moment before the process it is for starts, and that process and
# everything it starts carry the run's marker until they end. A directory this old whose
# run's marker no live process carries has outlived its council; the margin covers the
# moments around a process's start and end, when its directory exists without it.
ABANDONED_AFTER_S = 15 * 60
_SWEEP_EVERY_S = 5 * 60
_sweep_lock = threading.Lock()
_swept_at: float | None = None


@record(frozen=True)
class ScratchRoot:
    """Where a voice's directories go; ``why`` is set when no private root qualified and
    says why the ones tried did not."""

    path: str
    why: str | None = None

    @property
    def private(self) -> bool:
        return self.why is None


def scratch_root() -> ScratchRoot:
    """The root a voice's directories are made in now, created if it is missing."""
    if not hasattr(os, "getuid"):
        return ScratchRoot(tempfile.gettempdir())  # a per-user temporary root elsewhere
    _sweep_now_and_then()
    chosen = _choose(os.environ, None)
    if chosen.private:
        return chosen
    fallback = _fallback()
    return ScratchRoot(fallback if _own_private_dir(fallback, create=True) else _temp(), chosen.why)


def sweep_abandoned(now: float | None = None) -> int:
    """Remove the directories of every run whose council died without a run file naming
    them; how many were removed.

    A run counts as dead when one of its directories (a real directory of this user's, by
    an entry's own status, never a link's target) sits directly in a root
    (``sweep_roots``), is older than ``ABANDONED_AFTER_S``, and no live process of this
    user carries the run's marker. Its directories are then removed exactly as an abandoned
    run's are (``process.remove_leftover_dirs``): only names of that run's shape, each
    checked again on a handle opened without following a link, and emptied through it.
    """
    # Here, not at the top: the process module makes its directories through this one.
    from . import lineage
    from .process import remove_leftover_dirs

    moment = time.time() if now is None else now
    old: set[str] = set()
    for where in sweep_roots():
        old.update(_old_runs(where, moment))
    if not old:
        return 0
    # A council run as a voice of another carries that one's marker: its runs are alive.
    live = {os.environ.get(lineage.MARKER_VAR, "").rsplit(".", 1)[0]}
    for proc in lineage.marked_processes("", prefix=True):
        with contextlib.suppress(Exception):  # gone, or not ours to read: nothing to add
            live.add(str(proc.environ().get(lineage.MARKER_VAR, "")).rsplit(".", 1)[0])
    return sum(remove_leftover_dirs(run) for run in sorted(old - live))


def _old_runs(where: str, now: float) -> set[str]:
    """The runs with a directory in root ``where`` older than ``ABANDONED_AFTER_S``."""
    found: set[str] = set()
    try:
        # The roots come from the user's own settings, and may be reached through a link.
        root = os.open(where, _DIR_FLAGS & ~getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return found
    try:
        for name in os.listdir(root):
            run = _run_of(name)
            if run is None:
                continue
            try:
                st = os.stat(name, dir_fd=root, follow_symlinks=False)
            except OSError:
                continue
            mine = stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()
            if mine and now - st.st_mtime > ABANDONED_AFTER_S:
                found.add(run)
    except OSError:
        pass
    finally:
        os.close(root)
    return found


def _run_of(name: str) -> str | None:
    """The run a directory of this name was made for, when it has the exact shape."""
    if not name.startswith(shapes.SCRATCH_PREFIX):
        return None
    run = name[len(shapes.SCRATCH_PREFIX) :].split(".", 1)[0]
    return run if shapes.is_scratch_dir_name(name, run) else None


def _sweep_now_and_then() -> None:
    """``sweep_abandoned`` on this process's first use of the roots, then at most every
    ``_SWEEP_EVERY_S``; a sweep that fails costs nothing but the leftovers staying."""
    global _swept_at
    now = time.monotonic()
    if _swept_at is not None and now - _swept_at < _SWEEP_EVERY_S:
        return
    if not _sweep_lock.acquire(blocking=False):
        return  # another thread is sweeping
    try:
        _swept_at = now
        with contextlib.suppress(Exception):
            sweep_abandoned()
    finally:
        _sweep_lock.release()


def private_dir(name: str, env: Mapping[str, str] | None = None) -> str | None:
    """A directory only this user can write, for state named ``name`` that this user's own
    commands keep and no project may supply, found under ``env`` (default: this process's)
    by the scratch root's rule and created if missing: ``$XDG_RUNTIME_DIR/rune-council/<name>``,
    else ``<cache>/rune-council/<name>``, each only when nothing above it can be written by
    another user. None when neither qualifies: such state is optional, so unlike a voice's
    directory it gets no last resort and is simply not kept."""
    if not name or os.sep in name or name in (os.curdir, os.pardir, _SCRATCH):
        raise ValueError(f"not a directory name of its own: {name!r}")
    if not hasattr(os, "getuid"):
        return None
    chosen = _choose(os.environ if env is None else env, name)
    return chosen.path if chosen.private else None


def _choose(env: Mapping[str, str], name: str | None) -> ScratchRoot:
    """The first private candidate (for ``name``, or the voices' root), made if missing; or
    why none qualified."""
    refused: list[str] = []
    for path, unfit in _candidates(env, name):
        problem = unfit or _make_private(path)
        if problem is None:
            return ScratchRoot(path)
        refused.append(problem)
    return ScratchRoot(
        "", "; ".join(refused) or "neither $XDG_RUNTIME_DIR nor a home directory is set"
    )


def scratch_note() -> str | None:
    """A run's note when its voices could not be given a private root; None when they were."""
    root = scratch_root()
    if root.private:
        return None
    exposure = _exposed(root.path) or "not a private directory"
    return (
        f"voices run in directories under {root.path} ({exposure}): an instruction file "
        "another local user leaves above them (AGENTS.md, CLAUDE.md, GEMINI.md, QWEN.md, "
        f"opencode.json) can reach the voices. No private root was found ({root.why}); set "
        "XDG_RUNTIME_DIR to a 0700 directory of yours, or XDG_CACHE_HOME to one no other "
        "user can write"
    )


def sweep_roots() -> list[str]:
    """Every existing root a voice's directories may be in, for the sweep after a killed
    council: the private roots (whichever this command's environment names, since the
    council's may have named another), the last resort and the temporary root itself.
    Nothing is created; a root that is not a private directory of this user's is left out,
    except the temporary root, where the sweep's own checks still hold."""
    found: list[str] = []
    if hasattr(os, "getuid"):
        for path, unfit in _candidates(os.environ, None):
            if unfit is None and _own_private_dir(path, create=False):
                found.append(path)
        if _own_private_dir(_fallback(), create=False):
            found.append(_fallback())
    found.append(_temp())
    return list(dict.fromkeys(found))


def _temp() -> str:
    return tempfile.gettempdir()


def _fallback() -> str:
    return os.path.join(_temp(), f"{FALLBACK_PREFIX}{os.getuid()}")


def _candidates(env: Mapping[str, str], name: str | None) -> list[tuple[str, str | None]]:
    """The private places in order (for ``name``, or the voices' root), each with why it
    cannot be one before anything is made (None when it may)."""
    found: list[tuple[str, str | None]] = []
    runtime = env.get("XDG_RUNTIME_DIR", "")
    if runtime:
        unfit = (
            None
            if _runtime_dir_ok(runtime)
            else (f"$XDG_RUNTIME_DIR ({runtime}) is not a 0700 directory of this user's")
        )
        found.append((os.path.join(runtime, _APP, *([name] if name else [])), unfit))
    cache = env.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(cache):
        home = env.get("HOME") or os.path.expanduser("~")
        cache = os.path.join(home, ".cache") if os.path.isabs(home) else ""
    if cache:
        found.append((os.path.join(cache, _APP, name or _SCRATCH), None))
    return found


def _runtime_dir_ok(path: str) -> bool:
    if not os.path.isabs(path):
        return False
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and st.st_mode & 0o777 == 0o700


def _exposed(path: str) -> str | None:
    """Why another user could write ``path`` or a directory above it; None if nobody can.

    Both the path as named and the path it resolves to are walked: a symlink on the way is
    only as safe as the directory holding it, and a CLI walks up from the resolved one."""
    for start in (os.path.abspath(path), os.path.realpath(path)):
        here = start
        while True:
            try:
                st = os.stat(here)
            except OSError as exc:
                return f"{here}: {exc.strerror}"
            if st.st_uid not in (os.getuid(), 0):
                return f"{here} belongs to another user"
            if st.st_mode & stat.S_IWOTH:
                return f"{here} is writable by every user"
            if st.st_mode & stat.S_IWGRP and not _private_group(st.st_gid):
                return f"{here} is writable by its group"
            parent = os.path.dirname(here)
            if parent == here:
                break
            here = parent
    return None


def _private_group(gid: int) -> bool:
    """A group no other user is in (the per-user group many systems give each user)."""
    if gid != os.getgid():
        return False
    try:
        import grp
        import pwd

        me = pwd.getpwuid(os.getuid()).pw_name
        members = set(grp.getgrgid(gid).gr_mem) - {me}
        others = {p.pw_name for p in pwd.getpwall() if p.pw_gid == gid} - {me}
    except (ImportError, KeyError, OSError):
        return False
    return not members and not others


def _make_private(path: str) -> str | None:
    """Make ``path`` a directory of this user's, mode 0700, below directories nobody else
    can write (the missing ones created 0700 on the way); why not, or None."""
    base, missing = path, list[str]()
    while not os.path.isdir(base) and os.path.dirname(base) != base:
        base, missing = os.path.dirname(base), [os.path.basename(base), *missing]
    problem = _exposed(base)
    if problem is not None:
        return problem
    here = base
    for part in missing:
        here = os.path.join(here, part)
        with contextlib.suppress(OSError):
            os.mkdir(here, 0o700)
    # Only the root itself is held to 0700 (and set so when it is this user's): the user's
    # own ~/.cache keeps the mode they gave it, being safe enough once nobody else can write.
    if not _own_private_dir(path, create=True):
        return f"{path} is not a private directory of this user's"
    return None


def _own_private_dir(path: str, *, create: bool) -> bool:
    """``path`` is (made, with ``create``) a real directory of this user's, mode 0700: checked
    on a handle opened without following a symlink, so a link planted in its place fails."""
    if create:
        with contextlib.suppress(OSError):
            os.mkdir(path, 0o700)
    try:
        fd = os.open(path, _DIR_FLAGS)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            return False
        if st.st_mode & 0o777 != 0o700:
            if not create:
                return False
            os.fchmod(fd, 0o700)  # ours: a looser mode was left by the user or a umask
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
