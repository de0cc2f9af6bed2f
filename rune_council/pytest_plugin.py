"""The ``scripted_council`` pytest fixture, registered through the ``pytest11`` entry point.

Installed with rune-council, so a caller's test suite has it without a conftest line; a
suite that disables plug-in autoloading can ``from rune_council.pytest_plugin import
scripted_council`` in its conftest instead.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .testing import ScriptedCouncil


@pytest.fixture
def scripted_council(tmp_path: Path) -> ScriptedCouncil:
    """An empty council of scripted voices with its own ``.rune`` directory; ``add`` voices,
    then ``convene``."""
    return ScriptedCouncil(tmp_path / ".rune")
