"""Where rune-council keeps its files, and the guard that keeps run ids inside them."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .contract import is_safe_run_id
from .errors import RunIdError

ENV_RUNE_DIR = "RUNE_COUNCIL_DIR"


@dataclass(frozen=True)
class RuneDir:
    root: Path

    @classmethod
    def resolve(cls, explicit: str | os.PathLike[str] | None = None) -> RuneDir:
        """``explicit``, else ``$RUNE_COUNCIL_DIR``, else ``.rune`` in the working directory."""
        chosen = explicit or os.environ.get(ENV_RUNE_DIR) or Path.cwd() / ".rune"
        return cls(Path(chosen).absolute())

    @property
    def runtimes_file(self) -> Path:
        return self.root / "runtimes.json"

    @property
    def council_dir(self) -> Path:
        return self.root / "council"

    def run_file(self, run_id: str) -> Path:
        if not is_safe_run_id(run_id):
            raise RunIdError(
                f"run id {run_id!r} is not a safe file name "
                "(allowed: A-Z a-z 0-9 . _ -, starting with a letter or digit, no '..')"
            )
        path = self.council_dir / f"run-{run_id}.json"
        # Belt and braces: even a valid-looking id must land directly in council_dir.
        if path.parent != self.council_dir:
            raise RunIdError(f"run id {run_id!r} resolves outside {self.council_dir}")
        return path
