"""The per-user token file of ``rune council serve --require-token``.

On a machine other people use, loopback is not private: every local account can connect
to 127.0.0.1. The token file is what tells this user's browser apart from theirs. It is
made on first use with mode 0600 inside the user's own config directory, and refused (the
way ssh refuses a private key) when anyone else could read or replace it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path

from ..core.errors import RequestError

TOKEN_FILE_NAME = "serve-token"
MIN_TOKEN_CHARS = 16
# A token is one line; anything longer is not a file this program wrote.
_MAX_READ = 4096


class TokenFileError(RequestError):
    """The token file cannot be made or is not safe to trust."""


def default_token_file(env: Mapping[str, str] | None = None) -> Path:
    from ..config import user_config_dir

    return user_config_dir(env) / TOKEN_FILE_NAME


def load_or_create(path: Path) -> str:
    """The token in ``path``, made first (random, mode 0600) when there is no file yet."""
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        # Another server made it between our read and our create: use theirs.
        return _read(path)
    except OSError as exc:
        raise TokenFileError(f"cannot create the token file {path}: {exc.strerror}") from None
    token = secrets.token_urlsafe(32)
    try:
        os.write(fd, (token + "\n").encode())
    finally:
        os.close(fd)
    return token


def _read(path: Path) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise TokenFileError(f"the token file {path} is a symlink; refusing it") from None
        raise TokenFileError(f"cannot read the token file {path}: {exc.strerror}") from None
    try:
        # Checked on the opened file, not the path: nothing can be swapped in between.
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise TokenFileError(f"the token file {path} is not a regular file")
        if info.st_uid != os.getuid():
            raise TokenFileError(f"the token file {path} belongs to another user")
        if info.st_mode & 0o077:
            raise TokenFileError(
                f"the token file {path} can be read by others "
                f"(mode {stat.S_IMODE(info.st_mode):o}): chmod 600 {path}"
            )
        data = os.read(fd, _MAX_READ + 1)
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
    try:
        token = data.decode("ascii").strip()
    except UnicodeDecodeError:
        raise TokenFileError(f"the token file {path} is not one line of ASCII text") from None
    if len(data) > _MAX_READ or not token.isprintable() or any(c.isspace() for c in token):
        raise TokenFileError(f"the token file {path} is not one line of ASCII text")
    if len(token) < MIN_TOKEN_CHARS:
        raise TokenFileError(
            f"the token in {path} is too short: use at least {MIN_TOKEN_CHARS} characters "
            "(or delete the file to get a new one)"
        )
    return token
