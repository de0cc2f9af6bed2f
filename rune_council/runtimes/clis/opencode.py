"""opencode (``opencode run``): a wrapper CLI, every tool denied, one retry on an upgrade demand.

Its backend is whatever model the user configured, read (never written) from the sources
opencode 1.18 merges, in its order, the last that names a ``model`` winning:
``config.json``, ``opencode.json``, ``opencode.jsonc`` under ``$XDG_CONFIG_HOME/opencode``
(default ``~/.config/opencode``), the file ``$OPENCODE_CONFIG``, ``~/.opencode/`` and
``$OPENCODE_CONFIG_DIR`` (``opencode.json``, ``opencode.jsonc``), the inline JSON
``$OPENCODE_CONFIG_CONTENT``, and the administrator's ``/etc/opencode``; ``{env:NAME}`` in
any of them is the variable's value, as opencode reads it.

opencode also reads ``opencode.json`` and ``.opencode/`` in every directory above the one
it runs in. A voice runs in a fresh directory under the shared temporary root, where any
local user can leave such a file (naming a model, a server to send the prompt to, an MCP
command to start), so project configs are switched off for every run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

from ..auth import Looked
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


# An administrator's settings, read last: they override the user's (opencode's "managed"
# config).
MANAGED = (Path("/etc/opencode/opencode.json"), Path("/etc/opencode/opencode.jsonc"))


def _config_paths(env: Mapping[str, str]) -> list[Path]:
    """The user's config files, in the order opencode merges them; the inline
    ``$OPENCODE_CONFIG_CONTENT`` comes after these, the managed files after that."""
    base = Path(env.get("XDG_CONFIG_HOME") or home(env) / ".config") / "opencode"
    paths = [base / "config.json", base / "opencode.json", base / "opencode.jsonc"]
    if env.get("OPENCODE_CONFIG"):
        paths.append(Path(env["OPENCODE_CONFIG"]).expanduser())
    dirs = [home(env) / ".opencode"]
    if env.get("OPENCODE_CONFIG_DIR"):
        dirs.append(Path(env["OPENCODE_CONFIG_DIR"]).expanduser())
    return paths + [d / name for d in dirs for name in ("opencode.json", "opencode.jsonc")]


def config_env_names(env: Mapping[str, str]) -> list[str]:
    """Variables the user's opencode config reads through ``{env:NAME}``."""
    texts = [env.get("OPENCODE_CONFIG_CONTENT", "")]
    texts += [t for t in (read_text(p) for p in [*_config_paths(env), *MANAGED]) if t]
    return sorted({m.group(1) for text in texts for m in _ENV_REFERENCE.finditer(text)})


def _model(text: str, env: Mapping[str, str]) -> object:
    doc = loads_jsonc(text)
    model = doc.get("model") if isinstance(doc, dict) else None
    if not isinstance(model, str):
        return model
    # opencode puts each variable's value in place of ``{env:NAME}`` before it parses; only
    # the model's own are read here (an ``apiKey`` may name a credential the same way).
    return _ENV_REFERENCE.sub(lambda m: env.get(m.group(1), ""), model)


def backend(looked: Looked) -> BackendReading | None:
    sources = [(str(p), looked.text(p)) for p in _config_paths(looked.env)]
    sources.append(("$OPENCODE_CONFIG_CONTENT", looked.value("OPENCODE_CONFIG_CONTENT")))
    sources += [(str(p), looked.text(p)) for p in MANAGED]
    chosen: tuple[object, str] | None = None
    for evidence, text in sources:
        model = _model(text, looked.env) if text is not None else None
        if model is not None:
            chosen = (model, evidence)  # a later source overrides an earlier one
    return reading(*chosen) if chosen is not None else None


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
            # No opencode.json, .opencode/ or AGENTS.md from the directories above the run.
            "OPENCODE_DISABLE_PROJECT_CONFIG": "1",
        },
    ),
    parse=parse,
    extra_env_names=config_env_names,
    wrapper=True,
    backend=backend,
    retry_once_when=demands_upgrade,
)
