"""Where rune-council keeps its files, and the guards that keep them there: run ids stay
inside the run directory, and nothing is read or written through a directory that is a
symlink when it could have come with the files of a project."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import RunFileError, RunIdError
from .records import record

ENV_RUNE_DIR = "RUNE_COUNCIL_DIR"
HOW_TO_NAME = "name the directory to use with --rune-dir or RUNE_COUNCIL_DIR"


@record(frozen=True)
class RuneDir:
    root: Path

    @classmethod
    def resolve(cls, explicit: str | os.PathLike[str] | None = None) -> RuneDir:
        """``explicit``, else ``$RUNE_COUNCIL_DIR``, else ``.rune`` in the working directory.

        A directory the user names is theirs, symlink or not. The ``.rune`` found in the
        working directory may have come with a cloned repository, and git keeps symlinks: as
        one it would send every run file, index and batch result wherever its author chose,
        so it is refused (RunFileError) instead of followed.
        """
        chosen = explicit or os.environ.get(ENV_RUNE_DIR)
        if chosen:
            return cls(Path(chosen).absolute())
        root = Path.cwd() / ".rune"
        if root.is_symlink():
            raise RunFileError(
                f"{root} is a symbolic link, and a .rune that came with the files here is "
                f"not followed (what it holds would be written where it points): remove it, "
                f"or {HOW_TO_NAME}"
            )
        return cls(root)

    def subdir(self, name: str) -> Path:
        """The directory ``name`` inside the rune directory; refused (RunFileError) when it
        is a symlink, since whatever is inside a rune directory may have come with it."""
        path = self.root / name
        if path.is_symlink():
            raise RunFileError(
                f"{path} is a symbolic link, and rune-council reads and writes nothing "
                f"through one: replace it with a directory, or {HOW_TO_NAME}"
            )
        return path

    @property
    def runtimes_file(self) -> Path:
        return self.root / "runtimes.json"

    @property
    def council_dir(self) -> Path:
        return self.subdir("council")

    @property
    def batch_dir(self) -> Path:
        """Where a batch keeps its results file unless told another."""
        return self.subdir("batch")

    def run_file(self, run_id: str) -> Path:
        # Here, not at the top: a listing resolves no run id and need not load the contract.
        from .contract import is_safe_run_id

        if not is_safe_run_id(run_id):
            raise RunIdError(
                f"run id {run_id!r} is not a safe file name "
                "(allowed: A-Z a-z 0-9 . _ -, starting with a letter or digit, no '..')"
            )
        council = self.council_dir
        path = council / f"run-{run_id}.json"
        # Belt and braces: even a valid-looking id must land directly in council_dir.
        if path.parent != council:
            raise RunIdError(f"run id {run_id!r} resolves outside {council}")
        return path
