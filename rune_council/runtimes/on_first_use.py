"""psutil, imported the first time something of it is used.

Only CLI voices start processes; a council of endpoints never touches one, and importing
psutil costs every council about 7 ms. The modules that watch process trees take ``psutil``
from here: a stand-in that imports the real module on its first attribute lookup.
"""

from __future__ import annotations

from typing import Any


class _OnFirstUse:
    def __getattr__(self, name: str) -> Any:
        import psutil

        return getattr(psutil, name)


psutil = _OnFirstUse()
