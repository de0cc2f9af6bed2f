"""Which model family a wrapper CLI really talks to, read from the CLI's own configuration.

cline, amp, opencode and aider front whatever model their user configured, so their brand
says nothing about the backend: they count as ``unknown``. When the CLI's own config names
the model it will use, and ``rune_council.families`` (read as a client's model name) puts it
in a known family, the wrapper is promoted to that family.

Files read (nothing else, and never written):

- opencode: ``$OPENCODE_CONFIG_CONTENT`` (inline JSON), else the file ``$OPENCODE_CONFIG``,
  else ``opencode.json`` / ``opencode.jsonc`` / ``config.json`` under
  ``$XDG_CONFIG_HOME/opencode`` (default ``~/.config/opencode``); key ``model``.
- aider: ``$AIDER_MODEL``, else a top-level ``model:`` line in ``~/.aider.conf.yml``.
- cline: ``settings/providers.json`` under ``$CLINE_DATA_DIR`` (else ``$CLINE_DIR/data``,
  else ``~/.cline/data``); the ``model`` of the ``lastUsedProvider``.
- amp: none. amp picks its models itself, per task, so it always stays ``unknown``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .. import safejson
from ..families import classify_model

_READ_CAP = 1_000_000


@dataclass(frozen=True)
class BackendReading:
    family: str
    model: str
    evidence: str  # where the model name was found, for the detect report


def _home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or "~").expanduser()


def _read_text(path: Path) -> str | None:
    try:
        with path.open("rb") as handle:
            return handle.read(_READ_CAP).decode("utf-8", errors="replace")
    except OSError:
        return None


def _loads_jsonc(text: str) -> object:
    try:
        return safejson.loads(text, what="config")
    except json.JSONDecodeError:
        pass
    # JSON with comments: drop whole-line and block comments and trailing commas.
    stripped = re.sub(r"/\*.*?\*/", "", text, flags=re.DOTALL)
    stripped = re.sub(r"(?m)^\s*//.*$", "", stripped)
    stripped = re.sub(r",(\s*[}\]])", r"\1", stripped)
    try:
        return safejson.loads(stripped, what="config")
    except json.JSONDecodeError:
        return None


def _reading(model: object, evidence: str) -> BackendReading | None:
    if not isinstance(model, str) or not model.strip():
        return None
    reading = classify_model(model, named_by="client")
    if reading.confidence != "confirmed":
        return None
    return BackendReading(reading.family, model, evidence)


def opencode_backend(env: Mapping[str, str]) -> BackendReading | None:
    inline = env.get("OPENCODE_CONFIG_CONTENT")
    if inline:
        doc = _loads_jsonc(inline)
        if isinstance(doc, dict) and "model" in doc:
            return _reading(doc["model"], "$OPENCODE_CONFIG_CONTENT")
    candidates: list[Path] = []
    if env.get("OPENCODE_CONFIG"):
        candidates.append(Path(env["OPENCODE_CONFIG"]).expanduser())
    base = Path(env.get("XDG_CONFIG_HOME") or _home(env) / ".config") / "opencode"
    candidates += [base / "opencode.json", base / "opencode.jsonc", base / "config.json"]
    for path in candidates:
        text = _read_text(path)
        if text is None:
            continue
        doc = _loads_jsonc(text)
        if isinstance(doc, dict) and "model" in doc:
            return _reading(doc["model"], str(path))
    return None


_YAML_MODEL = re.compile(r"""^model\s*:\s*["']?([^"'#\s]+)["']?\s*(?:#.*)?$""", re.MULTILINE)


def aider_backend(env: Mapping[str, str]) -> BackendReading | None:
    if env.get("AIDER_MODEL"):
        return _reading(env["AIDER_MODEL"], "$AIDER_MODEL")
    path = _home(env) / ".aider.conf.yml"
    text = _read_text(path)
    if text is None:
        return None
    match = _YAML_MODEL.search(text)
    return _reading(match.group(1), str(path)) if match else None


def cline_backend(env: Mapping[str, str]) -> BackendReading | None:
    if env.get("CLINE_DATA_DIR"):
        data = Path(env["CLINE_DATA_DIR"]).expanduser()
    elif env.get("CLINE_DIR"):
        data = Path(env["CLINE_DIR"]).expanduser() / "data"
    else:
        data = _home(env) / ".cline" / "data"
    path = data / "settings" / "providers.json"
    text = _read_text(path)
    doc = _loads_jsonc(text) if text is not None else None
    if not isinstance(doc, dict):
        return None
    providers = doc.get("providers")
    current = doc.get("lastUsedProvider")
    if not isinstance(providers, dict) or not isinstance(current, str):
        return None
    entry = providers.get(current)
    settings = entry.get("settings") if isinstance(entry, dict) else None
    if not isinstance(settings, dict):
        return None
    return _reading(settings.get("model"), str(path))


BackendReader = Callable[[Mapping[str, str]], BackendReading | None]
