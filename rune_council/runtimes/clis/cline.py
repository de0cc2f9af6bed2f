"""cline: a wrapper CLI in plan mode with auto-approval off and JSON output.

Its backend is the ``model`` of the ``lastUsedProvider`` in ``settings/providers.json`` under
``$CLINE_DATA_DIR`` (else ``$CLINE_DIR/data``, else ``~/.cline/data``). Whether it can answer
is read from the same file: that provider's saved key (or Cline account sign-in), else the
provider's variable. Without either, cline retries against the provider for a minute or
more before it gives up, so that reads as logged out.
"""

from __future__ import annotations

from pathlib import Path

from ..auth import AuthContext, AuthReading, Looked
from ..backend_family import BackendReading, home, loads_jsonc, reading
from ..base import EnvPolicy
from ..cli_adapter import PROVIDER_KEY_NAMES, CliAdapter
from ..parsers import Parsed, json_objects, nonblank, tail
from ..provider_keys import LOCAL_PROVIDERS, is_local_url, key_fix, key_found, missing_words


def parse(stdout: str, stderr: str) -> Parsed:
    for obj in reversed(json_objects(stdout)):
        if obj.get("type") != "run_result":
            continue
        reason = obj.get("finishReason")
        text = nonblank(obj.get("text"))
        if reason not in (None, "completed"):
            # On failure cline puts the error message where the answer would be.
            return Parsed(None, f"cline finished with {reason}: {tail(text or '')}")
        if text is None:
            return Parsed(None, "cline returned an empty result")
        return Parsed(text)
    return Parsed(None, f"no run_result in cline output: {tail(stderr or stdout)}")


def _providers_file(looked: Looked) -> Path:
    env = looked.env
    if env.get("CLINE_DATA_DIR"):
        data = Path(env["CLINE_DATA_DIR"]).expanduser()
    elif env.get("CLINE_DIR"):
        data = Path(env["CLINE_DIR"]).expanduser() / "data"
    else:
        data = home(env) / ".cline" / "data"
    return data / "settings" / "providers.json"


def _current(looked: Looked, path: Path) -> tuple[str | None, dict[str, object] | None]:
    """The provider cline will use (None: no readable settings file) and its settings."""
    text = looked.text(path)
    doc = loads_jsonc(text) if text is not None else None
    if not isinstance(doc, dict):
        return None, None
    providers = doc.get("providers")
    current = doc.get("lastUsedProvider")
    if not isinstance(current, str) or not current.strip():
        current = DEFAULT_PROVIDER
    entry = providers.get(current) if isinstance(providers, dict) else None
    settings = entry.get("settings") if isinstance(entry, dict) else None
    return current, settings if isinstance(settings, dict) else None


def backend(looked: Looked) -> BackendReading | None:
    path = _providers_file(looked)
    _provider, settings = _current(looked, path)
    return reading(settings.get("model"), str(path)) if settings is not None else None


# With nothing chosen, cline runs its own provider, which needs a Cline account.
DEFAULT_PROVIDER = "cline"
LOGIN_FIX = "cline auth"
# The providers of cline 3.0 that take their key from a variable a wrapper is given
# (``apiKeyEnv`` in its provider table), when its settings hold none.
PROVIDER_KEYS: dict[str, tuple[str, ...]] = {
    "cline": ("CLINE_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "openai-native": ("OPENAI_API_KEY",),
    "openai-compatible": ("OPENAI_API_KEY",),
    "gemini": ("GOOGLE_GENERATIVE_AI_API_KEY", "GEMINI_API_KEY"),
    "openrouter": ("OPENROUTER_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "together": ("TOGETHER_API_KEY",),
    "groq": ("GROQ_API_KEY",),
}


def _saved_key(provider: str, settings: dict[str, object] | None) -> bool:
    """Whether the provider's settings hold its credential: the key ``cline auth -k``
    saves, or the Cline account's sign-in. Presence only."""
    if settings is None:
        return False
    key = settings.get("apiKey")
    if isinstance(key, str) and key.strip():
        return True
    signed_in = settings.get("auth") if provider == DEFAULT_PROVIDER else None
    token = signed_in.get("accessToken") if isinstance(signed_in, dict) else None
    return isinstance(token, str) and bool(token.strip())


async def auth(ctx: AuthContext) -> AuthReading:
    """The provider cline last used (its own account when none is set) and whether cline
    has its key: saved in ``providers.json`` by ``cline auth``, or in the provider's
    variable. The settings file and variable names only; no command, since ``cline
    config`` writes a default provider into that file."""
    looked = Looked(ctx.env)
    path = _providers_file(looked)
    current, settings = _current(looked, path)
    provider = current or DEFAULT_PROVIDER
    where = f"provider {provider!r}" + (
        f" (last used, in {path})" if current else f" (no settings in {path})"
    )
    if _saved_key(provider, settings):
        return looked.reading("ready", f"{where}; its key is saved there")
    base = settings.get("baseUrl") if settings is not None else None
    if provider in LOCAL_PROVIDERS or is_local_url(base):
        return looked.reading("unknown", f"{where}; a local provider, which needs no key")
    names = PROVIDER_KEYS.get(provider)
    if names is None:
        return looked.reading("unknown", f"{where}; no offline check knows where its key is")
    if (found := key_found(looked, names)) is not None:
        return looked.reading("ready", f"{where}; {found} is set")
    account = "not signed in to a Cline account and " if provider == DEFAULT_PROVIDER else ""
    return looked.reading(
        "logged-out",
        f"{where}; {account}no key saved, and {missing_words(names)}",
        LOGIN_FIX if provider == DEFAULT_PROVIDER else key_fix(names[0]),
    )


ADAPTER = CliAdapter(
    name="cline",
    executable="cline",
    model_family="unknown",
    family_confidence="unknown",
    args=("--plan", "--auto-approve", "false", "--json"),
    env=EnvPolicy(
        prefixes=("CLINE_",),
        names=PROVIDER_KEY_NAMES,
        fixed={
            # Without local mode cline leaves a hub daemon running after it exits.
            "CLINE_SESSION_BACKEND_MODE": "local",
            "CLINE_NO_AUTO_UPDATE": "1",
        },
    ),
    parse=parse,
    # With --json cline will not run on stdin alone; it reads this, then the piped prompt.
    fixed_prompt_arg="Answer the request given on standard input.",
    wrapper=True,
    backend=backend,
    auth=auth,
)
