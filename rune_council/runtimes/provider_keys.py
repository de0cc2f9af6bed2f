"""Whether a wrapper CLI has a key for the provider it will call, found out offline.

opencode, aider and cline answer through whichever provider their user set up: their own
config names a model (and so a provider), or, with none named, they pick one by the keys
they find. The big hosted providers each take their key from known variables, so a wrapper
pointed at one of them with its key nowhere the wrapper looks (environment, its own
credential file, a ``.env`` it loads) cannot answer: started, it retries against the
provider or waits at a browser login until the voice's timeout. Such a wrapper reads as
logged out, with the one variable to set (or the wrapper's own login command) as its fix.

A provider these tables do not know, a local server (ollama, LM Studio, anything on
loopback), or a credential kept where no offline check can read it leaves the state
``unknown``: the wrapper is tried as before. Only presence is looked at: no key's value is
kept, compared or recorded.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from urllib.parse import urlsplit

from .auth import Looked

# Providers that serve from the user's own machine and need no key.
LOCAL_PROVIDERS = frozenset(
    {"ollama", "ollama_chat", "lmstudio", "lm_studio", "llamafile", "hosted_vllm"}
)
_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0"})
_DOTENV_LINE = re.compile(
    r"""^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^#\s]*))"""
)


def key_fix(name: str) -> str:
    return f"export {name}=<your key>"


def is_local_url(url: object) -> bool:
    """Whether ``url`` names a server on this machine (a local model server needs no key)."""
    if not isinstance(url, str) or not url.strip():
        return False
    try:
        host = urlsplit(url.strip()).hostname or ""
    except ValueError:
        return False
    return host in _LOCAL_HOSTS or host.endswith(".localhost") or host.startswith("127.")


def user_path(text: str) -> Path:
    """A path as a CLI reads it from a variable, ``~`` expanded; left as given when it names
    no user this machine knows (a bad value must not stop DETECT)."""
    try:
        return Path(text).expanduser()
    except RuntimeError:
        return Path(text)


def dotenv_names(text: str | None) -> set[str]:
    """The names a ``.env`` file sets to something non-blank; the values are not kept."""
    names: set[str] = set()
    for line in (text or "").splitlines():
        found = _DOTENV_LINE.match(line)
        if found and any((v or "").strip() for v in found.groups()[1:]):
            names.add(found.group(1))
    return names


def key_found(looked: Looked, names: Sequence[str], loaded: Iterable[str] = ()) -> str | None:
    """The first of ``names`` the CLI will find set: in its environment, or among the names
    ``loaded`` from files it reads into its environment. Each is noted as looked at."""
    elsewhere = set(loaded)
    for name in names:
        if looked.var(name) or name in elsewhere:
            return name
    return None


def missing_words(names: Sequence[str]) -> str:
    if len(names) == 1:
        return f"{names[0]} is unset"
    return f"none of {', '.join(names)} is set"
