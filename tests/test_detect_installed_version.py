"""DETECT reads a CLI's version from the package that installed it instead of starting it,
only when that is unambiguous; an upgraded CLI makes the cached report stale."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from rune_council.discovery.installed_version import packaged_version

SPAWN_LOG = "spawned.log"


def _script(path: Path, version_line: str) -> Path:
    """A CLI that notes every start in a log beside it and prints ``version_line``."""
    log = path.parent / SPAWN_LOG
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\necho "$@" >> {log}\necho "{version_line}"\n', encoding="utf-8")
    path.chmod(0o755)
    return path


def npm_install(root: Path, name: str, version: str, *, bin_target: str = "bin/cli.js") -> Path:
    """What `npm install -g` leaves: the package, its manifest and a bin link to its script."""
    package = root / "lib" / "node_modules" / "@vendor" / name
    _script(package / "bin" / "cli.js", f"{name} 0.0.1 (printed)")
    (package / "package.json").write_text(
        json.dumps({"name": f"@vendor/{name}", "version": version, "bin": {name: bin_target}}),
        encoding="utf-8",
    )
    link = root / "bin" / name
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(package / "bin" / "cli.js", link.parent))
    return link


def pip_install(prefix: Path, dist: str, script: str, version: str) -> Path:
    """What pip leaves in a virtual environment: a console script and the dist-info."""
    info = prefix / "lib" / "python3.11" / "site-packages" / f"{dist}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n\nThe description.\n"
    )
    (info / "entry_points.txt").write_text(f"[console_scripts]\n{script} = {dist}.main:main\n")
    return _script(prefix / "bin" / script, f"{script} 0.0.1 (printed)")


def test_an_npm_cli_version_comes_from_its_manifest(tmp_path: Path) -> None:
    link = npm_install(tmp_path, "claude", "2.1.197")
    assert packaged_version(str(link)) == "2.1.197"


def test_a_manifest_whose_bin_names_another_file_is_not_trusted(tmp_path: Path) -> None:
    link = npm_install(tmp_path, "claude", "2.1.197", bin_target="bin/other.js")
    assert packaged_version(str(link)) is None


def test_a_hostile_manifest_is_read_as_data_and_ignored(tmp_path: Path) -> None:
    link = npm_install(tmp_path, "claude", "1.0.0")
    manifest = next(tmp_path.rglob("package.json"))
    doc = json.loads(manifest.read_text())
    for version in ("$(touch pwned)", "1.0.0\nrm -rf /", 7):
        manifest.write_text(json.dumps({**doc, "version": version}))
        assert packaged_version(str(link)) is None
    manifest.write_text("[" * 100_000)
    assert packaged_version(str(link)) is None
    manifest.write_bytes(b"{" + b" " * 2_000_000 + b"}")
    assert packaged_version(str(link)) is None
    assert not (tmp_path / "pwned").exists()


def test_a_python_console_script_version_comes_from_its_dist_info(tmp_path: Path) -> None:
    script = pip_install(tmp_path / "venv", "aider_chat", "aider", "0.86.2")
    assert packaged_version(str(script)) == "0.86.2"


def test_two_distributions_declaring_one_script_is_ambiguous(tmp_path: Path) -> None:
    script = pip_install(tmp_path / "venv", "aider_chat", "aider", "0.86.2")
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    fork = site / "aider_fork-9.9.9.dist-info"
    fork.mkdir()
    (fork / "METADATA").write_text("Metadata-Version: 2.1\nName: aider_fork\nVersion: 9.9.9\n")
    (fork / "entry_points.txt").write_text("[console_scripts]\naider = aider_fork:main\n")
    assert packaged_version(str(script)) is None


def _detect(tmp_path: Path, path: Path) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-m", "rune_council.cli", "council", "detect", "--json"],
        cwd=tmp_path,
        env={
            "PATH": f"{path}:/usr/bin:/bin",
            "HOME": str(tmp_path),
            "RUNE_COUNCIL_LOGIN_SHELL": "0",
            "RUNE_COUNCIL_DIR": str(tmp_path / ".rune"),
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    doc = json.loads(out.stdout)
    entries = doc["detected"] if isinstance(doc, dict) else doc
    return {"doc": doc, "claude": next(e for e in entries if e["runtime"] == "claude")}


def test_detect_does_not_start_a_cli_whose_version_is_on_disk_and_an_upgrade_reprobes(
    tmp_path: Path,
) -> None:
    link = npm_install(tmp_path / "npm", "claude", "2.1.197")
    log = Path(os.path.realpath(link)).parent / SPAWN_LOG
    first = _detect(tmp_path, link.parent)["claude"]
    assert isinstance(first, dict)
    assert first["status"] == "available" and first["version"] == "2.1.197"
    started = log.read_text().splitlines() if log.exists() else []
    assert "--version" not in started

    # Upgraded in place: a new version and a new file time; today's cache must not be used.
    manifest = next((tmp_path / "npm").rglob("package.json"))
    manifest.write_text(manifest.read_text().replace("2.1.197", "2.2.0"))
    script = Path(os.path.realpath(link))
    later = time.time() + 5
    os.utime(script, (later, later))
    again = _detect(tmp_path, link.parent)["claude"]
    assert isinstance(again, dict) and again["version"] == "2.2.0"


def test_without_a_manifest_detect_asks_the_cli_itself(tmp_path: Path) -> None:
    bare = _script(tmp_path / "plain" / "claude", "claude 3.0.0 (printed)")
    entry = _detect(tmp_path, bare.parent)["claude"]
    assert isinstance(entry, dict) and entry["version"] == "3.0.0"
    assert "--version" in (bare.parent / SPAWN_LOG).read_text().splitlines()
