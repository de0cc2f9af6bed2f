"""A directory no other user can write, nor any above it: what a user's own
``$XDG_RUNTIME_DIR`` or ``~/.cache`` is, and what rune-council keeps its per-user state in.

pytest's ``tmp_path`` is below the shared ``/tmp``, which every user can write, so nothing
under it ever counts as private: a test that needs state kept between two commands (the
endpoints' model lists) gives them an ``XDG_CACHE_HOME`` made here instead.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# Read at import, before any test moves HOME.
REAL_HOME = Path.home()


def _nobody_else_writes(path: Path) -> bool:
    for here in (path, *path.parents):
        st = here.stat()
        if st.st_uid not in (os.getuid(), 0) or st.st_mode & 0o022:
            return False
    return True


@contextlib.contextmanager
def private_base() -> Iterator[Path]:
    """A fresh directory in the home directory of the user running the tests (or the
    working directory), removed afterwards; the test fails if neither is private."""
    home = next((d for d in (REAL_HOME, Path.cwd()) if _nobody_else_writes(d)), None)
    if home is None:
        # Failing, not skipping: without such a directory the private-state rule goes untested.
        pytest.fail(f"neither {REAL_HOME} nor {Path.cwd()} is private to this user")
    base = Path(tempfile.mkdtemp(prefix=".rune-council-test-", dir=home))
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)
