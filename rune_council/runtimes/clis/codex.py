"""Codex CLI (``codex exec``): OpenAI's CLI, read-only sandbox, JSONL events."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ...safefile import read_capped_text
from ..auth import AuthContext, AuthReading, Looked, home, run_status
from ..base import EnvPolicy
from ..cli_adapter import ANSWER_SCHEMA_FILE, CliAdapter
from ..parsers import Parsed, json_objects, one_line, tail

LOGIN_FIX = "codex login"
# Providers built into codex that talk to a local server and send no key.
_LOCAL_PROVIDERS = {"oss", "ollama", "lmstudio"}


def parse(stdout: str, stderr: str) -> Parsed:
    answer: str | None = None
    failure: str | None = None
    for obj in json_objects(stdout):
        kind = obj.get("type")
        item = obj.get("item")
        if kind == "item.completed" and isinstance(item, dict):
            if item.get("type") == "agent_message" and isinstance(item.get("text"), str):
                answer = item["text"]
        elif kind == "turn.failed":
            err = obj.get("error")
            msg = err.get("message") if isinstance(err, dict) else err
            failure = f"codex turn failed: {one_line(str(msg))}"
    if answer is not None and answer.strip():
        return Parsed(answer)
    return Parsed(None, failure or f"no agent message in codex output: {tail(stderr or stdout)}")


def _codex_home(env: Mapping[str, str]) -> Path:
    return Path(env["CODEX_HOME"]).expanduser() if env.get("CODEX_HOME") else home(env) / ".codex"


def _config(env: Mapping[str, str]) -> dict[str, object] | None:
    try:
        text = read_capped_text(_codex_home(env) / "config.toml", 1_000_000)
    except (OSError, ValueError):
        return None
    from ...core.safetoml import loads_toml  # only when the user has a codex config

    try:
        return loads_toml(text, what="codex config")
    except ValueError:
        return None


def provider_key_names(env: Mapping[str, str]) -> list[str]:
    """The key variables the user's codex providers name (``env_key``), so they pass through."""
    config = _config(env)
    if config is None:
        return []
    providers = config.get("model_providers")
    names: list[str] = []
    if isinstance(providers, dict):
        for table in providers.values():
            if isinstance(table, dict) and isinstance(table.get("env_key"), str):
                names.append(table["env_key"])
    return names


async def _login_status(ctx: AuthContext, looked: Looked, why: str) -> AuthReading:
    looked.file(_codex_home(ctx.env) / "auth.json")
    status = await run_status(ctx, ("login", "status"))
    if status.exit_code == 0:
        return looked.reading("ready", f"{why}; `codex login status`: logged in")
    if looked.var("CODEX_API_KEY"):
        return looked.reading("ready", f"{why}; CODEX_API_KEY is set (codex exec reads it)")
    if status.exit_code == 1:
        return looked.reading(
            "logged-out",
            f"{why}; `codex login status`: not logged in, CODEX_API_KEY unset",
            LOGIN_FIX,
        )
    what = status.failure or f"exited {status.exit_code}"
    return looked.reading("unknown", f"{why}; `codex login status` {what}")


async def auth(ctx: AuthContext) -> AuthReading:
    """The model provider the user's config selects decides: a provider table that names
    an ``env_key`` needs that variable, a local one needs nothing, and OpenAI's own (the
    default) needs a login, which ``codex login status`` reports offline."""
    looked = Looked(ctx.env)
    config_path = _codex_home(ctx.env) / "config.toml"
    looked.file(config_path)
    config = _config(ctx.env) or {}
    provider = config.get("model_provider")
    name = provider if isinstance(provider, str) and provider.strip() else "openai"
    tables = config.get("model_providers")
    table = tables.get(name) if isinstance(tables, dict) else None
    if isinstance(table, dict):
        where = f"model provider {name!r} in {config_path}"
        key = table.get("env_key")
        if isinstance(key, str) and key.strip():
            if looked.var(key):
                return looked.reading("ready", f"{where} reads its key from {key}, which is set")
            return looked.reading(
                "logged-out",
                f"{where} reads its key from {key}, which is not set",
                f"export {key}=<your key>",
            )
        if table.get("requires_openai_auth") is True:
            return await _login_status(ctx, looked, f"{where} uses the codex login")
        return looked.reading("ready", f"{where} names no key to send")
    if name in _LOCAL_PROVIDERS:
        return looked.reading("unknown", f"built-in local provider {name!r}: needs no key")
    return await _login_status(ctx, looked, f"model provider {name!r}")


ADAPTER = CliAdapter(
    name="codex",
    executable="codex",
    model_family="openai",
    family_confidence="confirmed",
    args=(
        "exec",
        "--skip-git-repo-check",
        "--ephemeral",
        "--sandbox",
        "read-only",
        "--json",
        "-c",
        "analytics.enabled=false",
        "-c",
        "web_search=disabled",
        # No project instruction files (AGENTS.md from the working directory up to a .git):
        # a voice's directory is empty, so any it could find lie above it, where they are
        # not the user's. The user's own ~/.codex/AGENTS.md still applies.
        "-c",
        "project_doc_max_bytes=0",
        "--disable",
        "plugins",
        "--disable",
        "remote_plugin",
        "--disable",
        "apps",
        "--disable",
        "shell_tool",
        "--disable",
        "goals",
        "--disable",
        "multi_agent",
        "--disable",
        "unified_exec",
    ),
    env=EnvPolicy(prefixes=("OPENAI_", "CODEX_", "AZURE_OPENAI_")),
    parse=parse,
    extra_env_names=provider_key_names,
    auth=auth,
    # The final message is held to the voice answer's schema (strict structured output).
    answer_schema_args=("--output-schema", ANSWER_SCHEMA_FILE),
)
