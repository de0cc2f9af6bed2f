"""A CLI's version read from the package that installed it, so DETECT need not start it.

A node CLI takes a second or more to print ``--version``, and seven of them starting at once
on two cores take several. The version is already on disk: npm leaves a ``package.json``
beside the script its ``bin`` names, pip leaves a ``*.dist-info`` whose entry points name the
console script. Only an unambiguous match counts — the package's own ``bin`` entry resolves
to this very file, or exactly one installed distribution declares this script — otherwise
None, and the caller asks the CLI itself. Everything read here is someone else's file:
bounded, parsed as data, never run.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ..core import safejson
from ..safefile import read_capped

_MANIFEST_CAP = 1_000_000
_VERSION = re.compile(r"^\d+\.\d+(?:\.\d+)?(?:[-+.][0-9A-Za-z.+-]*)?$")
# node_modules/<scope>/<pkg>/<dir>/<dir>/script is as deep as CLIs put their entry points.
_LEVELS_UP = 4


def packaged_version(binary: str) -> str | None:
    """The version of the package ``binary`` belongs to, when that is certain."""
    return _npm_version(binary) or _python_version(binary)


def _read_json(path: Path) -> Any:
    try:
        data, cut = read_capped(path, _MANIFEST_CAP)
    except OSError:
        return None
    if cut:
        return None
    try:
        return safejson.loads(data, max_bytes=_MANIFEST_CAP, what=str(path))
    except safejson.UnreadableJSON:
        return None


def _npm_version(binary: str) -> str | None:
    real = Path(os.path.realpath(binary))
    folder = real.parent
    for _ in range(_LEVELS_UP):
        manifest = folder / "package.json"
        if manifest.is_file():
            return _npm_manifest_version(manifest, real)
        if folder.parent == folder:
            break
        folder = folder.parent
    return None


def _npm_manifest_version(manifest: Path, real: Path) -> str | None:
    doc = _read_json(manifest)
    if not isinstance(doc, dict):
        return None
    bins = doc.get("bin")
    targets = list(bins.values()) if isinstance(bins, dict) else [bins]
    for target in targets:
        if not isinstance(target, str):
            continue
        if Path(os.path.realpath(manifest.parent / target)) == real:
            version = doc.get("version")
            if isinstance(version, str) and _VERSION.match(version):
                return version
    return None


def _python_version(binary: str) -> str | None:
    script = Path(os.path.abspath(binary))
    if script.parent.name != "bin":
        return None
    prefix = script.parent.parent
    found: list[str] = []
    for site in prefix.glob("lib/python3*/site-packages"):
        for info in site.glob("*.dist-info"):
            if _declares_script(info / "entry_points.txt", script.name):
                found.append(_dist_version(info / "METADATA") or "")
    if len(found) == 1 and _VERSION.match(found[0]):
        return found[0]
    return None


def _declares_script(entry_points: Path, name: str) -> bool:
    try:
        data, cut = read_capped(entry_points, _MANIFEST_CAP)
    except OSError:
        return False
    if cut:
        return False
    import configparser  # only when a Python CLI is found on PATH

    parser = configparser.ConfigParser(interpolation=None, delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # names keep their case
    try:
        parser.read_string(data.decode("utf-8", errors="replace"))
    except configparser.Error:
        return False
    return parser.has_option("console_scripts", name)


def _dist_version(metadata: Path) -> str | None:
    try:
        data, _cut = read_capped(metadata, _MANIFEST_CAP)
    except OSError:
        return None
    for line in data.decode("utf-8", errors="replace").splitlines():
        if line.startswith("Version:"):
            return line.removeprefix("Version:").strip()
        if not line.strip():
            break  # the headers end at the first blank line
    return None
