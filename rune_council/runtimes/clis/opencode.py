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

from ..auth import AuthContext, AuthReading, Looked
from ..backend_family import BackendReading, home, loads_jsonc, read_text, reading
from ..base import EnvPolicy
from ..cli_adapter import PROVIDER_KEY_NAMES, CliAdapter
from ..parsers import Parsed, json_objects, tail
from ..provider_keys import LOCAL_PROVIDERS, is_local_url, key_fix, key_found, missing_words

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


def _model(doc: object, env: Mapping[str, str]) -> object:
    model = doc.get("model") if isinstance(doc, dict) else None
    if not isinstance(model, str):
        return model
    # opencode puts each variable's value in place of ``{env:NAME}`` before it parses; only
    # the model's own are read here (an ``apiKey`` may name a credential the same way).
    return _ENV_REFERENCE.sub(lambda m: env.get(m.group(1), ""), model)


def _documents(looked: Looked) -> list[tuple[str, object]]:
    """Every config source, parsed, with where it came from, in the order opencode merges
    them (a later one overriding an earlier one)."""
    sources = [(str(p), looked.text(p)) for p in _config_paths(looked.env)]
    sources.append(("$OPENCODE_CONFIG_CONTENT", looked.value("OPENCODE_CONFIG_CONTENT")))
    sources += [(str(p), looked.text(p)) for p in MANAGED]
    return [(evidence, loads_jsonc(text)) for evidence, text in sources if text is not None]


def _chosen(looked: Looked, documents: list[tuple[str, object]]) -> tuple[object, str] | None:
    """The model the merged config names, and where; None when none names one."""
    chosen: tuple[object, str] | None = None
    for evidence, doc in documents:
        model = _model(doc, looked.env)
        if model is not None:
            chosen = (model, evidence)  # a later source overrides an earlier one
    return chosen


def backend(looked: Looked) -> BackendReading | None:
    chosen = _chosen(looked, _documents(looked))
    return reading(*chosen) if chosen is not None else None


# The hosted providers opencode 1.18 takes a key for from the environment (its bundled
# models.dev table), those whose variables a wrapper is given. opencode's own provider
# serves its free models without a key, so without one it is not known to be logged out.
PROVIDER_KEYS: dict[str, tuple[str, ...]] = {
    "anthropic": ("ANTHROPIC_API_KEY",),
    "openai": ("OPENAI_API_KEY",),
    "google": ("GOOGLE_API_KEY", "GOOGLE_GENERATIVE_AI_API_KEY", "GEMINI_API_KEY"),
    "openrouter": ("OPENROUTER_API_KEY",),
    "groq": ("GROQ_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "togetherai": ("TOGETHER_API_KEY",),
    "fireworks-ai": ("FIREWORKS_API_KEY",),
}
OWN_KEY = ("OPENCODE_API_KEY",)
LOGIN_FIX = "opencode auth login"


def _auth_file(env: Mapping[str, str]) -> Path:
    """Where ``opencode auth login`` keeps its credentials (what ``opencode auth list`` reads)."""
    data = Path(env.get("XDG_DATA_HOME") or home(env) / ".local" / "share")
    return data / "opencode" / "auth.json"


def _logins(looked: Looked) -> set[str]:
    """Providers with a saved credential: the auth file's entries and the inline
    ``$OPENCODE_AUTH_CONTENT``; only which providers, never what is saved for them."""
    found: set[str] = set()
    for text in (looked.text(_auth_file(looked.env)), looked.value("OPENCODE_AUTH_CONTENT")):
        doc = loads_jsonc(text) if text is not None else None
        if isinstance(doc, dict):
            found.update(k for k, v in doc.items() if isinstance(k, str) and v)
    return found


def _provider_options(documents: list[tuple[str, object]], provider: str) -> dict[str, object]:
    """``provider.<id>.options`` merged over every config source, the later winning."""
    merged: dict[str, object] = {}
    for _evidence, doc in documents:
        block = doc.get("provider") if isinstance(doc, dict) else None
        entry = block.get(provider) if isinstance(block, dict) else None
        options = entry.get("options") if isinstance(entry, dict) else None
        if isinstance(options, dict):
            merged.update(options)
    return merged


def _declared(documents: list[tuple[str, object]]) -> set[str]:
    found: set[str] = set()
    for _evidence, doc in documents:
        block = doc.get("provider") if isinstance(doc, dict) else None
        if isinstance(block, dict):
            found.update(k for k in block if isinstance(k, str))
    return found


def _configured_key(looked: Looked, options: dict[str, object]) -> tuple[bool, list[str]]:
    """Whether the config's own ``apiKey`` for a provider resolves to something, and the
    variables it names through ``{env:NAME}``."""
    key = options.get("apiKey")
    if not isinstance(key, str) or not key.strip():
        return False, []
    names = [m.group(1) for m in _ENV_REFERENCE.finditer(key)]
    if not names:
        return True, []  # written in the config itself (or read from a file by opencode)
    return all([looked.var(n) for n in names]), names


async def auth(ctx: AuthContext) -> AuthReading:
    """The provider of the model opencode's config names, and whether opencode has a key
    for it: a login saved by ``opencode auth login`` (the file ``opencode auth list``
    reads), the config's own ``apiKey``, or the provider's variable. Files and variable
    names only; no command, so nothing is written into opencode's data."""
    looked = Looked(ctx.env)
    documents = _documents(looked)
    logins = _logins(looked)
    store = _auth_file(ctx.env)
    model, evidence = _chosen(looked, documents) or (None, "")
    if not isinstance(model, str):
        everyone = {**PROVIDER_KEYS, "opencode": OWN_KEY}
        keyed = sorted(logins) + [
            p for p, names in everyone.items() if key_found(looked, names) is not None
        ]
        if keyed:
            return looked.reading(
                "ready",
                f"no model named; opencode picks its default among the providers it has a "
                f"key for ({', '.join(dict.fromkeys(keyed))})",
            )
        if _declared(documents):
            return looked.reading("unknown", "no model named; its config declares providers")
        return looked.reading(
            "logged-out",
            f"no login in {store}, no provider key set and no model named in its config; it "
            "would fall back to opencode's anonymous free models, which a council seats only "
            'when the config names one ("model": "opencode/...")',
            LOGIN_FIX,
        )
    provider, _, rest = model.partition("/")
    where = f"model {model!r} named in {evidence}"
    if not rest:
        return looked.reading("unknown", f"{where} names no provider")
    if provider in logins:
        return looked.reading("ready", f"{where}; a login for {provider} is saved in {store}")
    options = _provider_options(documents, provider)
    configured, refs = _configured_key(looked, options)
    if configured:
        return looked.reading("ready", f"{where}; its config gives {provider} a key")
    if refs:
        return looked.reading(
            "logged-out",
            f"{where}; the key its config gives {provider} reads {missing_words(refs)}",
            key_fix(refs[0]),
        )
    if provider in LOCAL_PROVIDERS or is_local_url(options.get("baseURL")):
        return looked.reading("unknown", f"{where}; a local provider, which needs no key")
    names = PROVIDER_KEYS.get(provider)
    if provider == "opencode" and (found := key_found(looked, OWN_KEY)) is not None:
        return looked.reading("ready", f"{where}; {found} is set")
    if names is None:
        how = "the free ones need no key" if provider == "opencode" else "no offline check"
        return looked.reading("unknown", f"{where}; provider {provider!r}: {how}")
    if (found := key_found(looked, names)) is not None:
        return looked.reading("ready", f"{where}; {found} is set")
    return looked.reading(
        "logged-out",
        f"{where}; no login for {provider} in {store} and {missing_words(names)}",
        key_fix(names[0]),
    )


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
    auth=auth,
)
