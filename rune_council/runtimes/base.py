"""What every runtime of the I/O edge shares: the environment a child process may see,
and the scrubbing of secrets out of whatever is kept.

The runtime protocol itself (``Runtime``, ``RuntimeReply``, ``Answerer``) is part of the
core, in ``rune_council.runtime``; it is re-exported here for older imports.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..runtime import Answerer, ReplyCheck, Runtime, RuntimeReply, is_runtime
from ..safetext import URL_USERINFO, mask_url_credentials

__all__ = [
    "Answerer",
    "EnvPolicy",
    "ReplyCheck",
    "Runtime",
    "RuntimeReply",
    "current_env",
    "is_runtime",
    "redact",
    "secret_values",
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
_MIN_SECRET_LEN = 6


@dataclass(frozen=True)
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


def secret_values(env: Mapping[str, str]) -> list[str]:
    """Values that must never be written anywhere: anything named like a credential, and
    the user information of any URL a variable holds (``HTTPS_PROXY=http://u:PASS@host``)."""
    values = {v for k, v in env.items() if _SECRET_NAME.search(k) and len(v) >= _MIN_SECRET_LEN}
    for value in env.values():
        for match in URL_USERINFO.finditer(value):
            # The password, as written and decoded; a user name is not secret, and a short
            # password is still masked wherever it appears inside a URL (see redact).
            _user, _, password = match.group(2).partition(":")
            for form in (password, _unquoted(password)):
                if len(form) >= _MIN_SECRET_LEN:
                    values.add(form)
    return sorted(values, key=len, reverse=True)


def redact(text: str, secrets: Iterable[str]) -> str:
    for value in secrets:
        if value and value in text:
            text = text.replace(value, "[redacted]")
    # Credentials inside any URL, whoever printed it and whatever variable it came from.
    return mask_url_credentials(text)


def _unquoted(userinfo: str) -> str:
    from urllib.parse import unquote

    return unquote(userinfo)


def current_env() -> dict[str, str]:
    return dict(os.environ)
