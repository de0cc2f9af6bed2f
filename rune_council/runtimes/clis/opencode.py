"""opencode (``opencode run``): a wrapper CLI, every tool denied, one retry on an upgrade demand.

Its backend is whatever model the user configured, read (never written) from
``$OPENCODE_CONFIG_CONTENT`` (inline JSON), else the file ``$OPENCODE_CONFIG``, else
``opencode.json`` / ``opencode.jsonc`` / ``config.json`` under ``$XDG_CONFIG_HOME/opencode``
(default ``~/.config/opencode``); key ``model``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

from ..backend_family import BackendReading, home, loads_jsonc, read_text, reading
from ..base import EnvPolicy
from ..cli_adapter import PROVIDER_KEY_NAMES, CliAdapter
from ..parsers import Parsed, json_objects, tail

# A hosted provider can tell opencode that the client is too old; wording varies, so any
# demand to upgrade or update opencode (or an HTTP 426) counts.
_UPGRADE_DEMAND = re.compile(
    r"(upgrade|update)\W+(to\W+)?(the\W+latest\W+)?(version\W+of\W+)?opencode"
    r"|opencode\W+(upgrade|update)\W+(is\W+)?required"
    r"|requires?\W+a\W+newer\W+(version\W+of\W+)?opencode"
    r"|\b426\b|upgrade required",
    re.IGNORECASE,
)
_ENV_REFERENCE = re.compile(r"\{env:([A-Za-z_][A-Za-z0-9_]*)\}")


def demands_upgrade(stdout: str, stderr: str) -> bool:
    return bool(_UPGRADE_DEMAND.search(stdout) or _UPGRADE_DEMAND.search(stderr))


def _error(obj: dict[str, object]) -> str:
    err = obj.get("error")
    if isinstance(err, dict):
        data = err.get("data")
        if isinstance(data, dict) and data.get("message"):
            status = data.get("statusCode")
            where = f" (HTTP {status})" if status else ""
            return f"{err.get('name', 'error')}{where}: {tail(str(data['message']))}"
        return tail(json.dumps(err))
    return tail(str(err))


def parse(stdout: str, stderr: str) -> Parsed:
    pieces: list[str] = []
    for obj in json_objects(stdout):
        kind = obj.get("type")
        if kind == "error":
            return Parsed(None, f"opencode reported an error: {_error(obj)}")
        part = obj.get("part")
        if kind == "text" and isinstance(part, dict) and isinstance(part.get("text"), str):
            pieces.append(part["text"])
    text = "".join(pieces)
    if text.strip():
        return Parsed(text)
    return Parsed(None, f"no text in opencode output: {tail(stderr or stdout)}")


def _config_paths(env: Mapping[str, str]) -> list[Path]:
    paths = [Path(env["OPENCODE_CONFIG"]).expanduser()] if env.get("OPENCODE_CONFIG") else []
    base = Path(env.get("XDG_CONFIG_HOME") or home(env) / ".config") / "opencode"
    return [*paths, base / "opencode.json", base / "opencode.jsonc", base / "config.json"]


def config_env_names(env: Mapping[str, str]) -> list[str]:
    """Variables the user's opencode config reads through ``{env:NAME}``."""
    texts = [env.get("OPENCODE_CONFIG_CONTENT", "")]
    texts += [t for t in (read_text(p) for p in _config_paths(env)) if t is not None]
    return sorted({m.group(1) for text in texts for m in _ENV_REFERENCE.finditer(text)})


def backend(env: Mapping[str, str]) -> BackendReading | None:
    inline = env.get("OPENCODE_CONFIG_CONTENT")
    if inline:
        doc = loads_jsonc(inline)
        if isinstance(doc, dict) and "model" in doc:
            return reading(doc["model"], "$OPENCODE_CONFIG_CONTENT")
    for path in _config_paths(env):
        text = read_text(path)
        if text is None:
            continue
        doc = loads_jsonc(text)
        if isinstance(doc, dict) and "model" in doc:
            return reading(doc["model"], str(path))
    return None


ADAPTER = CliAdapter(
    name="opencode",
    executable="opencode",
    model_family="unknown",
    family_confidence="unknown",
    args=("run", "--pure", "--title", "council", "--format", "json"),
    env=EnvPolicy(
        prefixes=("OPENCODE_",),
        names=PROVIDER_KEY_NAMES,
        fixed={
            # Every tool denied, whatever the user's own permission settings say.
            "OPENCODE_PERMISSION": json.dumps({"*": "deny"}),
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_SHARE": "1",
        },
    ),
    parse=parse,
    extra_env_names=config_env_names,
    wrapper=True,
    backend=backend,
    retry_once_when=demands_upgrade,
)
