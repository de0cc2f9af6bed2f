"""aider: a wrapper CLI in ask mode, no git, dry run, prompt read from stdin as a file.

Its backend is ``AIDER_MODEL``, else a top-level ``model:`` line in ``.aider.conf.yml``, read
the way aider 0.86 reads them: ``AIDER_MODEL`` set in a ``.env`` file (``~/.aider/
oauth-keys.env``, ``~/.env``, the git root's, then ``$AIDER_ENV_FILE``'s, the later winning)
overrides the environment's, and the conf file of the git root overrides the home one. The
git root is the one holding the empty directory a voice runs in, if any (that directory
itself has no file).

Whether it can answer is read from the same sources: the provider that model belongs to and
whether its key is set where aider finds keys (``runtimes/provider_keys.py``). With no model
named and no key at all, aider would offer OpenRouter's browser sign-in and wait on it until
the voice's timeout, so that reads as logged out.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..auth import AuthContext, AuthReading, Looked
from ..backend_family import BackendReading, home, reading, run_dir_ancestors
from ..base import EnvPolicy
from ..cli_adapter import PROVIDER_KEY_NAMES, CliAdapter
from ..parsers import Parsed, tail
from ..provider_keys import (
    LOCAL_PROVIDERS,
    dotenv_names,
    key_fix,
    key_found,
    missing_words,
    user_path,
)

# aider has no JSON mode. Its start-up banner is a handful of known lines, the answer
# follows, and a "Tokens: ..." line closes a turn that reached the model.
_BANNER = re.compile(
    r"^(Aider v|Model:|Main model:|Weak model:|Editor model:|Git repo:|Repo-map:|"
    r"Analytics have been|Detected dumb terminal|Warning|You can skip this check|"
    r"Added .* to the chat|Use /help|https://aider\.chat)"
)
_TOKENS = re.compile(r"^Tokens: ")
_ERROR = re.compile(
    r"(litellm\.\w+(Error|Exception)|\w+Exception - |APIConnectionError|"
    r"The API provider|Retrying in [\d.]+ seconds|^Error:)",
    re.MULTILINE,
)
_YAML_MODEL = re.compile(r"""^model\s*:\s*["']?([^"'#\s]+)["']?\s*(?:#.*)?$""", re.MULTILINE)
_DOTENV_MODEL = re.compile(
    r"""^\s*(?:export\s+)?AIDER_MODEL\s*=\s*["']?([^"'#\s]*)["']?\s*(?:#.*)?$""", re.MULTILINE
)


def parse(stdout: str, stderr: str) -> Parsed:
    lines = stdout.splitlines()
    end = next((i for i in range(len(lines) - 1, -1, -1) if _TOKENS.match(lines[i])), None)
    if end is None:
        found = _ERROR.search(stdout) or _ERROR.search(stderr)
        reason = "aider reported an API error" if found else "aider printed no answer"
        return Parsed(None, f"{reason}: {tail(stdout or stderr)}")
    start = 0
    while start < end and (not lines[start].strip() or _BANNER.match(lines[start])):
        start += 1
    text = "\n".join(lines[start:end]).strip()
    if not text:
        return Parsed(None, "aider returned an empty answer")
    return Parsed(text)


def _git_root() -> Path | None:
    found = run_dir_ancestors()
    return found[-1] if found and (found[-1] / ".git").exists() else None


def _dotenv_files(looked: Looked) -> list[Path]:
    """The ``.env`` files aider loads into its environment, in its order (a later one
    overriding an earlier one): ``~/.aider/oauth-keys.env``, ``~/.env``, the git root's, and
    the one ``$AIDER_ENV_FILE`` names."""
    where = [home(looked.env)]
    if (root := _git_root()) is not None:
        where.append(root)
    files = [where[0] / ".aider" / "oauth-keys.env", *(d / ".env" for d in where)]
    if (named := looked.value("AIDER_ENV_FILE")) is not None:
        files.append(user_path(named))
    return files


def _conf_files(looked: Looked) -> list[Path]:
    """The conf files aider reads, the git root's overriding the home one."""
    where = [home(looked.env)]
    if (root := _git_root()) is not None:
        where.append(root)
    return [d / ".aider.conf.yml" for d in where]


def _configured_model(looked: Looked) -> tuple[str, str] | None:
    """The model aider will use, as its config names it, and where; None when none does."""
    dotenv: tuple[str, str] | None = None
    for path in _dotenv_files(looked):
        text = looked.text(path)
        found = _DOTENV_MODEL.findall(text) if text is not None else []
        if found and found[-1]:
            dotenv = (found[-1], f"AIDER_MODEL in {path}")
    if dotenv is not None:
        return dotenv
    if (model := looked.value("AIDER_MODEL")) is not None:
        return model, "$AIDER_MODEL"
    chosen: tuple[str, str] | None = None
    for path in _conf_files(looked):
        text = looked.text(path)
        match = _YAML_MODEL.search(text) if text is not None else None
        if match:
            chosen = (match.group(1), str(path))
    return chosen


def backend(looked: Looked) -> BackendReading | None:
    chosen = _configured_model(looked)
    return reading(*chosen) if chosen is not None else None


# aider 0.86's own key check (``Model.fast_validate_environment``): the provider prefix of
# the model name, else the bare names of OpenAI's and Anthropic's models; its aliases first.
_PROVIDER_KEYS = {
    "openrouter": "OPENROUTER_API_KEY",
    "openai": "OPENAI_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "groq": "GROQ_API_KEY",
    "fireworks_ai": "FIREWORKS_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "xai": "XAI_API_KEY",
}
_BARE = (
    (re.compile(r"^(gpt-|o[134]\b|o[134]-|chatgpt-)"), "openai"),
    (re.compile(r"^claude-"), "anthropic"),
)
_ALIASES = {
    "sonnet": "anthropic", "haiku": "anthropic", "opus": "anthropic",
    "4": "openai", "4o": "openai", "4-turbo": "openai", "35turbo": "openai",
    "35-turbo": "openai", "3": "openai",
    "deepseek": "deepseek", "r1": "deepseek",
    "flash": "gemini", "flash-lite": "gemini", "gemini": "gemini", "gemini-2.5-pro": "gemini",
    "gemini-3-pro-preview": "gemini", "gemini-exp": "gemini",
    "quasar": "openrouter", "optimus": "openrouter", "grok3": "xai",
}  # fmt: skip
# With no model named, aider picks one by the first of these it finds set; with none, it
# offers OpenRouter's browser sign-in and waits for it.
_DEFAULT_KEYS = (
    "OPENROUTER_API_KEY",
    "ANTHROPIC_API_KEY",
    "DEEPSEEK_API_KEY",
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
)
# The conf file's own key settings, and the variables aider reads them from.
_CONF_KEYS = {"openai-api-key": "OPENAI_API_KEY", "anthropic-api-key": "ANTHROPIC_API_KEY"}
_CONF_LINE = re.compile(r"^([a-z][a-z0-9-]*)\s*:\s*\S", re.MULTILINE)
# Settings that can set any key under any name, which only their values would tell.
_OPAQUE = ("api-key", "set-env")


def _provider(model: str) -> str | None:
    if model in _ALIASES:
        return _ALIASES[model]
    prefix, slash, _rest = model.partition("/")
    if slash:
        return prefix
    return next((p for pattern, p in _BARE if pattern.match(model)), None)


def _loaded_keys(looked: Looked) -> tuple[set[str], str | None]:
    """The key names aider will find besides its environment (from the ``.env`` files it
    loads, its ``AIDER_*`` variables and its conf files), and what hides any other key
    from an offline check, if anything does."""
    names: set[str] = set()
    for path in _dotenv_files(looked):
        names |= dotenv_names(looked.text(path))
    for name in _CONF_KEYS.values():
        if looked.var(f"AIDER_{name}"):
            names.add(name)
    hidden = next((f"${n}" for n in ("AIDER_API_KEY", "AIDER_SET_ENV") if looked.var(n)), None)
    for path in _conf_files(looked):
        settings = set(_CONF_LINE.findall(looked.text(path) or ""))
        names |= {_CONF_KEYS[s] for s in settings & set(_CONF_KEYS)}
        if hidden is None and (opaque := settings & set(_OPAQUE)):
            hidden = f"{sorted(opaque)[0]} in {path}"
    return names, hidden


async def auth(ctx: AuthContext) -> AuthReading:
    """The key aider needs for the model its config names, found the way aider finds it:
    its environment, the ``.env`` files it loads, its own key settings. With no model
    named, whether any key it picks a model by is there. Files and names only."""
    looked = Looked(ctx.env)
    chosen = _configured_model(looked)
    loaded, hidden = _loaded_keys(looked)
    if chosen is None:
        found = key_found(looked, _DEFAULT_KEYS, loaded)
        if found is not None:
            return looked.reading("ready", f"no model named; aider picks one by {found}, set")
        if hidden is not None:
            return looked.reading("unknown", f"no model named; keys are set through {hidden}")
        return looked.reading(
            "logged-out",
            f"no model named ($AIDER_MODEL, .aider.conf.yml) and {missing_words(_DEFAULT_KEYS)}: "
            "aider would offer OpenRouter's browser sign-in and wait for it",
            key_fix("ANTHROPIC_API_KEY"),
        )
    model, evidence = chosen
    where = f"model {model!r} from {evidence}"
    provider = _provider(model)
    if provider in LOCAL_PROVIDERS:
        return looked.reading("unknown", f"{where}; a local provider, which needs no key")
    name = _PROVIDER_KEYS.get(provider or "")
    if name is None:
        return looked.reading("unknown", f"{where}; no offline check knows its provider's key")
    if key_found(looked, (name,), loaded) is not None:
        return looked.reading("ready", f"{where}; {name} is set")
    if hidden is not None:
        return looked.reading(
            "unknown", f"{where}; {name} unset, but keys are set through {hidden}"
        )
    return looked.reading("logged-out", f"{where}; {missing_words((name,))}", key_fix(name))


ADAPTER = CliAdapter(
    name="aider",
    executable="aider",
    model_family="unknown",
    family_confidence="unknown",
    args=(
        "--message-file",
        "/dev/stdin",
        "--chat-mode",
        "ask",
        "--no-git",
        "--yes-always",
        "--no-auto-commits",
        "--dry-run",
        "--no-stream",
        "--no-pretty",
        "--no-check-update",
        "--analytics-disable",
        "--no-show-model-warnings",
        "--map-tokens",
        "0",
        "--no-detect-urls",
        "--no-fancy-input",
        "--no-show-release-notes",
        "--chat-history-file",
        "/dev/null",
        "--input-history-file",
        "/dev/null",
        "--no-restore-chat-history",
    ),
    env=EnvPolicy(
        prefixes=("AIDER_", "LITELLM_"),
        names=PROVIDER_KEY_NAMES,
        # aider wraps its output to the console width (80 without a terminal), which breaks
        # long lines inside the JSON answer; a wide console keeps them whole.
        fixed={"COLUMNS": "65535"},
    ),
    parse=parse,
    wrapper=True,
    backend=backend,
    auth=auth,
)
