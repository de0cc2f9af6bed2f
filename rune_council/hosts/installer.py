"""Install into a host, and uninstall exactly that again.

Every change is planned before anything is written: a file or config entry the user wrote
stops the whole install (unless ``force``), so a refusal leaves everything as it was, and
``dry_run`` returns the plan without touching anything.

A file that is a symlink (a dotfile manager's: stow, chezmoi, a dotfiles repository) is
written through: its target is replaced in one step, from a temporary file beside the
target, keeping the target's mode, so the link stays what the user made it; install and
uninstall alike. A link to nothing, or to anything but a regular file, is refused with one
line, and so is any path of a project install that resolves outside the project.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shlex
import stat
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, NamedTuple

from ..core.errors import HostInstallError
from ..files import atomic_write_bytes
from ..safefile import read_if_present
from . import claude, codex, gemini
from .configs import Found, added, entry_digest, find, is_empty, read_text, removed
from .layout import ConfigEntry, ConfigFormat, FileItem, Layout, Places, Scope, mcp_launch
from .manifest import ConfigRecord, FileRecord, Manifest, load

HOSTS: dict[str, Callable[[Places, Scope], Layout]] = {
    "claude": claude.layout,
    "gemini": gemini.layout,
    "codex": codex.layout,
}
MAX_OWNED_FILE_BYTES = 4 * 1024 * 1024
# Starting the server's interpreter and importing it takes a second or two; a loaded
# machine gets more.
CHECK_TIMEOUT_S = 60.0

Action = Literal["create", "update", "overwrite", "unchanged", "remove", "keep", "gone"]
WRITES: frozenset[str] = frozenset({"create", "update", "overwrite", "remove"})


@dataclass(frozen=True)
class Change:
    action: Action
    path: Path
    what: str
    detail: str = ""


@dataclass(frozen=True)
class ServerCheck:
    """Whether the MCP server an install registers starts, run as the host will run it."""

    starts: bool
    detail: str


@dataclass(frozen=True)
class Outcome:
    host: str
    scope: Scope
    uninstall: bool
    dry_run: bool
    changes: tuple[Change, ...]
    usage: str
    manifest: Path
    notes: tuple[str, ...] = ()
    server: ServerCheck | None = None

    @property
    def changed(self) -> bool:
        return any(c.action in WRITES for c in self.changes)


@dataclass
class _Plan:
    changes: list[Change] = field(default_factory=list)
    conflicts: list[Change] = field(default_factory=list)
    writes: list[Callable[[], None]] = field(default_factory=list)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _layout(host: str, places: Places, scope: Scope) -> Layout:
    try:
        build = HOSTS[host]
    except KeyError:
        raise HostInstallError(
            f"unknown host {host!r}; choose one of {', '.join(sorted(HOSTS))}"
        ) from None
    return build(places, scope)


class _Site(NamedTuple):
    """One host's install in one scope: where it goes, and what an earlier one recorded."""

    scope: Scope
    places: Places
    layout: Layout
    within: Path | None
    """The project of a project install, which nothing written may resolve outside."""
    old: Manifest | None


def _site(host: str, project: bool, env: Mapping[str, str] | None, cwd: Path | None) -> _Site:
    scope: Scope = "project" if project else "user"
    places = Places.from_env(env, cwd)
    layout = _layout(host, places, scope)
    within = places.project if scope == "project" else None
    return _Site(scope, places, layout, within, load(layout.manifest, host, scope))


def _destination(path: Path, within: Path | None) -> Path:
    """The file a write to ``path`` replaces: ``path`` itself, or for a symlink the regular
    file it points to. ``within`` is the project of a project install: a cloned repository
    could link its own ``.mcp.json`` (or ``.claude/``) to a file of the user's, so nothing
    there may resolve outside it."""
    real = Path(os.path.realpath(path))
    if within is not None:
        root = Path(os.path.realpath(within))
        if real != root and root not in real.parents:
            raise HostInstallError(
                f"{path} resolves to {real}, outside the project {within}; not writing there"
            )
    if not path.is_symlink():
        return path
    if not real.exists():
        raise HostInstallError(
            f"{path} is a symlink to {os.readlink(path)}, which does not exist; not writing "
            "through it (point it at a file, or remove it)"
        )
    if not real.is_file():
        raise HostInstallError(
            f"{path} is a symlink to {real}, which is not a regular file; not writing through it"
        )
    return real


def _current_file(path: Path) -> str | None:
    """The text of a file rune may own (None: absent), read where ``_destination`` says;
    anything but a regular file is in the way and refused, even with --force."""
    found = read_if_present(path, MAX_OWNED_FILE_BYTES, HostInstallError)
    if found is None:
        return None
    data, cut = found
    if cut:
        return "\0large"
    return data.decode("utf-8", errors="replace")


def _missing_dirs(path: Path) -> list[Path]:
    missing: list[Path] = []
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        missing.append(parent)
        parent = parent.parent
    return missing


def _write(path: Path, text: str, mode: int) -> None:
    """Replaces ``path``, never a symlink (``_destination`` resolved it while planning)."""
    atomic_write_bytes(path, text.encode("utf-8"))
    os.chmod(path, mode)


def _planned_write(
    plan: _Plan, record: Manifest, path: Path, target: Path, text: str, mode: int
) -> None:
    """Plans writing ``text`` to ``target`` (``path``, or the file its link points to). The
    directories ``path`` lacks are made then and recorded, so uninstall takes them out."""

    def write() -> None:
        for directory in reversed(_missing_dirs(path)):
            directory.mkdir(exist_ok=True)
            if str(directory) not in record.dirs:
                record.dirs.append(str(directory))
        _write(target, text, mode)

    plan.writes.append(write)


def _remove_if_empty(directory: Path) -> None:
    with contextlib.suppress(OSError):
        directory.rmdir()


def _mode_of(path: Path, default: int) -> int:
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return default


def check_server(env: Mapping[str, str]) -> ServerCheck:
    """Run the registered server command with ``--check``: it imports what serving needs
    and exits, so an install never registers a server that cannot start (the ``mcp``
    extra missing, above all) without saying so."""
    command, args = mcp_launch()
    argv = [command, *args, "--check"]
    shown = shlex.join([command, *args])
    try:
        done = subprocess.run(
            argv,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=CHECK_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return ServerCheck(False, f"the MCP server ({shown}) could not be started: {exc}")
    if done.returncode == 0:
        return ServerCheck(True, f"the MCP server starts ({shown})")
    said = done.stderr.strip() or done.stdout.strip() or f"exit code {done.returncode}"
    last = said.splitlines()[-1].removeprefix("rune council: ")[:300]
    into = f"{shlex.quote(command)} -m pip install 'rune-council[mcp]'"
    if "pip install" not in last:
        last += "; the mcp extra is installed with pip install 'rune-council[mcp]'"
    return ServerCheck(
        False,
        f"the MCP server ({shown}) does not start: {last} (into the Python rune runs from: "
        f"{into}), then install again",
    )


def install(
    host: str,
    *,
    project: bool = False,
    force: bool = False,
    dry_run: bool = False,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Outcome:
    scope, places, layout, within, old = _site(host, project, env, cwd)
    record = Manifest(host=host, scope=scope, dirs=list(old.dirs) if old else [])
    plan = _Plan()
    for item in layout.files:
        _plan_file(item, old, force, plan, record, within)
    for entry in layout.configs:
        _plan_config(entry, old, force, plan, record, within)
    if old is not None:
        # Entries an earlier version installed that this one no longer writes stay recorded,
        # so --uninstall still removes them.
        record.files += [f for f in old.files if record.file(Path(f.path)) is None]
        record.configs += [
            c for c in old.configs if record.config(Path(c.path), tuple(c.keys)) is None
        ]
    if plan.conflicts and not force:
        listed = "; ".join(f"{c.path} ({c.what}: {c.detail})" for c in plan.conflicts)
        raise HostInstallError(
            f"not overwriting what is already there: {listed}. Nothing was changed; "
            "rerun with --force to replace it"
        )
    manifest = _destination(layout.manifest, within)
    current_record = _current_file(manifest)
    if plan.writes or current_record != record.to_text():
        action: Action = "create" if current_record is None else "update"
        plan.changes.append(Change(action, layout.manifest, "install record"))
    server = check_server(places.env) if layout.configs else None
    if server is not None and not server.starts and not dry_run:
        raise HostInstallError(f"not installing into {host}: {server.detail}. Nothing was changed")
    outcome = Outcome(
        host,
        scope,
        False,
        dry_run,
        tuple(plan.changes),
        layout.usage,
        layout.manifest,
        layout.notes,
        server,
    )
    if dry_run or not outcome.changed:
        return outcome
    for create_dirs_and_write in plan.writes:
        create_dirs_and_write()
    # Written last: it lists the directories the writes above had to create.
    _write(manifest, record.to_text(), 0o644)
    return outcome


def _plan_file(
    item: FileItem,
    old: Manifest | None,
    force: bool,
    plan: _Plan,
    record: Manifest,
    within: Path | None,
) -> None:
    target = _destination(item.path, within)
    current = _current_file(target)
    new_sha = _sha(item.text)
    earlier = old.file(item.path) if old else None
    if current == item.text:
        # A copy that was there before rune (not recorded) is the user's, and stays theirs.
        if earlier is not None:
            record.files.append(FileRecord(str(item.path), new_sha))
        plan.changes.append(Change("unchanged", item.path, item.what))
        return
    record.files.append(FileRecord(str(item.path), new_sha))
    action: Action
    if current is None:
        action = "create"
    else:
        if earlier is not None and earlier.sha256 == _sha(current):
            action = "update"
        else:
            detail = "changed since it was installed" if earlier else "a file rune did not write"
            if target != item.path:
                detail += f" (the symlink's target {target})"
            conflict = Change("overwrite", item.path, item.what, detail)
            plan.conflicts.append(conflict)
            action = "overwrite"
    plan.changes.append(Change(action, item.path, item.what))
    _planned_write(plan, record, item.path, target, item.text, _mode_of(target, 0o644))


def _plan_config(
    entry: ConfigEntry,
    old: Manifest | None,
    force: bool,
    plan: _Plan,
    record: Manifest,
    within: Path | None,
) -> None:
    target = _destination(entry.path, within)
    text = read_text(target)
    found: Found = find(entry, text)
    want = entry_digest(entry)
    earlier = old.config(entry.path, entry.keys) if old else None
    created_file = earlier.created_file if earlier else not found.exists
    made = list(earlier.made) if earlier else []
    what = f"{entry.what} ({entry.dotted})"
    rec = ConfigRecord(str(entry.path), entry.format, list(entry.keys), want, created_file, made)
    if found.digest == want:
        if earlier is not None:
            record.configs.append(rec)
        plan.changes.append(Change("unchanged", entry.path, what))
        return
    record.configs.append(rec)
    action: Action
    if found.digest is None:
        action = "create" if not found.exists else "update"
    elif earlier is not None and earlier.sha256 == found.digest:
        action = "update"
    else:
        if entry.format == "toml" and not found.ours_marked:
            added(entry, text)  # a table of the user's own: refused even with --force
        detail = "changed since it was installed" if earlier else "an entry rune did not write"
        plan.conflicts.append(Change("overwrite", entry.path, what, detail))
        action = "overwrite"
        if not force:
            plan.changes.append(Change(action, entry.path, what))
            return
    new_text, new_made = added(entry, text)  # raises here, before anything is written
    rec.made = made + [m for m in new_made if m not in made]
    plan.changes.append(Change(action, entry.path, what))
    _planned_write(plan, record, entry.path, target, new_text, _mode_of(target, 0o600))


def uninstall(
    host: str,
    *,
    project: bool = False,
    force: bool = False,
    dry_run: bool = False,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Outcome:
    scope, _, layout, within, old = _site(host, project, env, cwd)
    notes: tuple[str, ...] = ()
    if old is None:
        notes = (f"nothing is recorded as installed for {host} ({scope}) in {layout.manifest}",)
        return Outcome(host, scope, True, dry_run, (), layout.usage, layout.manifest, notes)
    kept = Manifest(host=host, scope=scope, dirs=list(old.dirs))
    changes: list[Change] = []
    writes: list[Callable[[], None]] = []
    whats = {str(item.path): item.what for item in layout.files}
    for rec in old.files:
        path = Path(rec.path)
        what = whats.get(rec.path, "file")
        current = _current_file(_destination(path, within))
        if current is None:
            changes.append(Change("gone", path, what))
        elif path.is_symlink():
            # Removing the link would undo the user's own setup, removing its target would
            # reach into their dotfiles: both stay, and so does the record.
            detail = f"a symlink to {os.path.realpath(path)}; remove it by hand if unwanted"
            changes.append(Change("keep", path, what, detail))
            kept.files.append(rec)
        elif force or _sha(current) == rec.sha256:
            changes.append(Change("remove", path, what))
            writes.append(path.unlink)
        else:
            changes.append(Change("keep", path, what, "changed since it was installed"))
            kept.files.append(rec)
    for crec in old.configs:
        _plan_removal(crec, force, changes, writes, kept, layout, within)
    if kept.is_empty():
        writes.append(lambda: layout.manifest.unlink(missing_ok=True))
        writes.append(lambda: _remove_if_empty(layout.manifest.parent))
    else:
        kept_text = kept.to_text()
        manifest = _destination(layout.manifest, within)
        writes.append(lambda: _write(manifest, kept_text, 0o644))
    outcome = Outcome(
        host, scope, True, dry_run, tuple(changes), layout.usage, layout.manifest, notes
    )
    if dry_run:
        return outcome
    for write in writes:
        write()
    # Directories the install made go too, deepest first, but only once nothing is in them.
    for directory in sorted(old.dirs, key=lambda d: d.count(os.sep), reverse=True):
        _remove_if_empty(Path(directory))
    return outcome


def _plan_removal(
    crec: ConfigRecord,
    force: bool,
    changes: list[Change],
    writes: list[Callable[[], None]],
    kept: Manifest,
    layout: Layout,
    within: Path | None,
) -> None:
    path = Path(crec.path)
    target = _destination(path, within)
    keys = tuple(crec.keys)
    entry = next((c for c in layout.configs if c.path == path and c.keys == keys), None)
    if entry is None:
        # Recorded by another layout (an older version): rebuild enough to find it again.
        fmt: ConfigFormat = "toml" if crec.format == "toml" else "json"
        entry = ConfigEntry(path, fmt, keys, {}, "config entry")
    what = f"{entry.what} ({entry.dotted})"
    text = read_text(target)
    found = find(entry, text)
    if text is None or found.digest is None:
        changes.append(Change("gone", path, what))
        return
    removable = entry.format == "json" or found.ours_marked
    if not removable or not (force or found.digest == crec.sha256):
        why = "changed since it was installed" if removable else "no longer between rune's markers"
        changes.append(Change("keep", path, what, why))
        kept.configs.append(crec)
        return
    new_text = removed(entry, text, crec.made)
    changes.append(Change("remove", path, what))
    if crec.created_file and is_empty(entry, new_text) and target == path:
        writes.append(path.unlink)
    else:
        mode = _mode_of(target, 0o600)
        writes.append(lambda: _write(target, new_text, mode))
