"""Codex CLI (``codex exec``): OpenAI's CLI, read-only sandbox, JSONL events."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ... import safejson
from ...safefile import read_capped_text
from ..base import EnvPolicy
from ..cli_adapter import CliAdapter
from ..parsers import Parsed, json_objects, tail


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
            failure = f"codex turn failed: {tail(str(msg))}"
    if answer is not None and answer.strip():
        return Parsed(answer)
    return Parsed(None, failure or f"no agent message in codex output: {tail(stderr or stdout)}")


def provider_key_names(env: Mapping[str, str]) -> list[str]:
    """The key variables the user's codex providers name (``env_key``), so they pass through."""
    home = Path(env.get("CODEX_HOME") or Path(env.get("HOME", "~")).expanduser() / ".codex")
    try:
        text = read_capped_text(home / "config.toml", 1_000_000)
        config = safejson.loads_toml(text, what="codex config")
    except (OSError, ValueError):
        return []
    providers = config.get("model_providers")
    names: list[str] = []
    if isinstance(providers, dict):
        for table in providers.values():
            if isinstance(table, dict) and isinstance(table.get("env_key"), str):
                names.append(table["env_key"])
    return names


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
)
