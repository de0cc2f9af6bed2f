"""What every runtime of the I/O edge shares: the environment a child process may see,
and the scrubbing of secrets out of whatever is kept.

Every value a runtime scrubs is a secret in play for the whole process: ``redact`` records
it, and the run-file recorder checks every string of a result against all of them once
more before anything is written or printed (``secrets_in_play``). The runtime protocol
itself (``Runtime``, ``RuntimeReply``, ``Answerer``) is in ``rune_council.core.runtime``.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import field

from ..core.records import record
from ..core.redaction import MIN_SECRET_LEN, redactor_for
from ..core.safetext import URL_USERINFO, mask_url_credentials

__all__ = [
    "EnvPolicy",
    "current_env",
    "redact",
    "remember_secrets",
    "secret_values",
    "secrets_in_play",
]

# What any child process may inherit: locale, proxies, certificates and the user's own
# config roots. Keys and tokens are never in this list; each adapter adds its own.
BASE_ENV_NAMES = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TMPDIR",
    "SHELL",
    "SYSTEMROOT",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_RUNTIME_DIR",
)
BASE_ENV_PREFIXES = ("LC_",)
FIXED_ENV = {"NO_COLOR": "1", "TERM": "dumb"}

_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)
_MIN_SECRET_LEN = MIN_SECRET_LEN

# Process-wide: a serve or batch process runs many councils, and a key one of them handed
# out is as secret in the next. Only grows; it holds a handful of values.
_IN_PLAY: set[str] = set()
_IN_PLAY_LOCK = threading.Lock()


@record(frozen=True)
class EnvPolicy:
    """Which variables of the parent environment a child may see."""

    names: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()
    fixed: Mapping[str, str] = field(default_factory=dict)

    def build(self, parent: Mapping[str, str], extra_names: Iterable[str] = ()) -> dict[str, str]:
        allowed = set(BASE_ENV_NAMES) | set(self.names) | set(extra_names)
        prefixes = BASE_ENV_PREFIXES + self.prefixes
        env = {
            k: v
            for k, v in parent.items()
            if k in allowed or any(k.startswith(p) for p in prefixes)
        }
        env.update(FIXED_ENV)
        env.update(self.fixed)
        return env


def merged_path(parent_path: str, extra: Sequence[str]) -> str:
    """The parent's PATH, then any directory only the login shell knew, without repeats."""
    dirs = [d for d in parent_path.split(os.pathsep) if d]
    seen = set(dirs)
    for d in extra:
        if d and d not in seen:
            dirs.append(d)
            seen.add(d)
    return os.pathsep.join(dirs)


def secret_values(env: Mapping[str, str]) -> list[str]:
    """Values that must never be written anywhere: anything named like a credential, and
    the user information of any URL a variable holds (``HTTPS_PROXY=http://u:PASS@host``)."""
    values = {v for k, v in env.items() if _SECRET_NAME.search(k) and len(v) >= _MIN_SECRET_LEN}
    values |= _url_passwords(env)
    return sorted(values, key=len, reverse=True)


def _url_passwords(env: Mapping[str, str]) -> set[str]:
    values: set[str] = set()
    for value in env.values():
        if "@" not in value:
            continue
        for match in URL_USERINFO.finditer(value):
            # The password, as written and decoded; a user name is not secret, and a short
            # password is still masked wherever it appears inside a URL (see redact).
            _user, _, password = match.group(2).partition(":")
            for form in (password, _unquoted(password)):
                if len(form) >= _MIN_SECRET_LEN:
                    values.add(form)
    return values


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` without any of ``secrets`` in any form (escaped, encoded, cut in pieces:
    see ``rune_council.core.redaction``), nor credentials inside URLs. ``secrets`` join the
    secrets in play, so the last net at the output knows them too."""
    values = remember_secrets(secrets)
    if values:
        text = redactor_for(values).text(text)
    # Credentials inside any URL, whoever printed it and whatever variable it came from.
    return mask_url_credentials(text)


def remember_secrets(secrets: Iterable[str]) -> tuple[str, ...]:
    """Record ``secrets`` as in play for this process; returns those long enough to be."""
    values = tuple(v for v in secrets if v and len(v) >= _MIN_SECRET_LEN)
    if values and not _IN_PLAY.issuperset(values):
        with _IN_PLAY_LOCK:
            _IN_PLAY.update(values)
    return values


def secrets_in_play() -> tuple[str, ...]:
    """Every secret this process has handed to a voice or an endpoint (each was scrubbed
    with ``redact``), and the proxy passwords of its own environment, which the HTTP
    client reads from there."""
    with _IN_PLAY_LOCK:
        values = set(_IN_PLAY)
    values |= _url_passwords(os.environ)
    return tuple(sorted(values))


def _unquoted(userinfo: str) -> str:
    from urllib.parse import unquote

    return unquote(userinfo)


def current_env() -> dict[str, str]:
    return dict(os.environ)
