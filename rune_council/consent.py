"""Consent for sending a question (and the artifact) to the external AI CLIs.

An external CLI ships the prompt to whatever model service its user configured, so the
first external dispatch needs a yes. It comes, in this order, from: the caller
(``CouncilOptions(allow_external=...)``, ``rune council --yes``), the environment variable
``RUNE_COUNCIL_ALLOW_EXTERNAL`` (``1``/``0``), ``allow_external`` under ``[consent]`` in the
user's ``council.toml`` (or in a project's one the user has trusted), or a yes given earlier
at the interactive prompt (remembered in ``<rune dir>/consent.json``). Without any of these
a non-interactive run dispatches nothing external: the council runs on subagents only and says why.
"""

from __future__ import annotations

from collections.abc import Mapping

from .config import CouncilConfig, trust_store
from .core import safejson
from .core.paths import RuneDir
from .core.records import record
from .files import atomic_write_json
from .safefile import read_capped_text

ENV_ALLOW = "RUNE_COUNCIL_ALLOW_EXTERNAL"
REMEMBERED = "consent.json"
_YES = {"1", "true", "yes", "on"}
_NO = {"0", "false", "no", "off"}
HOW_TO_GRANT = (
    f"pass --yes, set {ENV_ALLOW}=1, or put allow_external = true under [consent] in council.toml"
)


@record(frozen=True)
class Consent:
    allowed: bool
    source: str  # who decided, for the run file and the progress output

    def describe(self) -> str:
        return f"{'granted' if self.allowed else 'not granted'} ({self.source})"


def from_config(config: CouncilConfig) -> Consent | None:
    """``[consent] allow_external`` from the settings in force (the project's file wins, but
    only a trusted project file may say yes)."""
    value = config.consent.allow_external
    if value is None:
        return None
    return Consent(value, f"allow_external = {str(value).lower()} in {config.origin['consent']}")


def remembered(rune_dir: RuneDir, env: Mapping[str, str] | None = None) -> Consent | None:
    """A yes given earlier at the prompt. ``consent.json`` in the rune dir says so for the
    project's eyes, but a repository can ship that file: only the record in the user's own
    trust store counts, and deleting either takes the yes back."""
    path = rune_dir.root / REMEMBERED
    try:
        doc = safejson.loads(read_capped_text(path, 64_000), what=str(path))
    except (OSError, ValueError):
        return None
    if not (isinstance(doc, dict) and doc.get("allow_external") is True):
        return None
    granted_at = trust_store(env).consent_granted_at(rune_dir.root)
    if granted_at is None:
        return None
    return Consent(True, f"the user's yes for this project on {granted_at}")


def remember(rune_dir: RuneDir, env: Mapping[str, str] | None = None) -> None:
    """Keep an interactive yes, so later runs in this project do not ask again."""
    stamp = trust_store(env).grant_consent(rune_dir.root)
    atomic_write_json(rune_dir.root / REMEMBERED, {"allow_external": True, "granted_at": stamp})


def decide(
    explicit: bool | None,
    env: Mapping[str, str],
    config: CouncilConfig,
    rune_dir: RuneDir,
    *,
    explicit_source: str = "the caller",
) -> Consent | None:
    """The consent in force, or None when nobody has said (the CLI may then ask)."""
    if explicit is not None:
        return Consent(explicit, explicit_source)
    raw = env.get(ENV_ALLOW, "").strip().lower()
    if raw in _YES:
        return Consent(True, f"{ENV_ALLOW}={env[ENV_ALLOW]}")
    if raw in _NO:
        return Consent(False, f"{ENV_ALLOW}={env[ENV_ALLOW]}")
    return from_config(config) or remembered(rune_dir, env)
