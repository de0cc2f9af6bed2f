"""The command line does not load third-party pydantic plugins unless the user asks for them.

A plugin is a distribution with an entry point in pydantic's group; pydantic imports it the
first time it builds a validator. A real ``rune`` process is run with one planted on its
path whose import leaves a mark.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _plant(site: Path) -> None:
    dist = site / "markplug-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: markplug\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[pydantic]\nmarkplug = markplug_mod:plugin\n")
    (site / "markplug_mod.py").write_text(
        "import os\nopen(os.environ['PLUGIN_MARK'], 'w').write('loaded')\nplugin = None\n"
    )


def _council(tmp_path: Path, **extra: str) -> bool:
    site = tmp_path / "site"
    if not site.exists():
        _plant(site)
    mark = tmp_path / "mark"
    mark.unlink(missing_ok=True)
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "RUNE_COUNCIL_DIR": str(tmp_path / ".rune"),
        "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]),
        "PLUGIN_MARK": str(mark),
        **extra,
    }
    # No voice can be seated here; the ask is validated first, which builds a validator.
    subprocess.run(
        [sys.executable, "-m", "rune_council.cli", "council", "--json", "Is it safe?"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    return mark.exists()


def test_a_council_does_not_import_a_planted_pydantic_plugin(tmp_path: Path) -> None:
    assert not _council(tmp_path)


def test_an_explicit_empty_setting_loads_pydantic_plugins_again(tmp_path: Path) -> None:
    # The same plant is imported once the user says so: the first test's silence is the
    # setting's doing, not a plant pydantic could never find.
    assert _council(tmp_path, PYDANTIC_DISABLE_PLUGINS="")
