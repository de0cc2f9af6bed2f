"""Where an endpoint's API key comes from: an environment variable or the OS secret store.

The key lives in an ``ApiKey`` whose text form is masked, so printing, logging or dumping
the object by accident shows nothing. Only the HTTP client asks for the value itself.
``keyring`` is an optional dependency: without it, a key that must come from the secret
store produces an error that says so and how to install it.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..core.errors import RuntimeConfigError
from ..runtimes.http import ApiKey
from .config import EndpointSpec

KEYRING_HINT = "pip install 'rune-council[keyring]'"


def _from_keyring(service: str, user: str) -> tuple[str | None, str]:
    """(key, why not) from the OS secret store."""
    try:
        import keyring
        from keyring.errors import KeyringError
    except ImportError:
        return None, (
            "the OS secret store cannot be asked: the optional 'keyring' package is not "
            f"installed ({KEYRING_HINT})"
        )
    try:
        value = keyring.get_password(service, user)
    except KeyringError as exc:
        return None, f"the OS secret store is not usable ({type(exc).__name__}: {exc})"
    if not value:
        return None, f"the OS secret store has no entry for service {service!r}, user {user!r}"
    return value, ""


def resolve_key(spec: EndpointSpec, env: Mapping[str, str]) -> ApiKey | None:
    """The endpoint's key, None when it needs none; RuntimeConfigError when it cannot be had."""
    if not spec.has_key_source:
        return None
    reasons = []
    if spec.key_env:
        value = env.get(spec.key_env, "")
        if value.strip():
            return ApiKey(value.strip(), f"${spec.key_env}")
        reasons.append(f"${spec.key_env} is not set")
    if spec.keyring_service:
        user = spec.keyring_user or spec.name
        found, why = _from_keyring(spec.keyring_service, user)
        if found is not None:
            return ApiKey(found.strip(), f"secret store {spec.keyring_service}/{user}")
        reasons.append(why)
    raise RuntimeConfigError(f"endpoint {spec.name}: no API key: {'; '.join(reasons)}")
