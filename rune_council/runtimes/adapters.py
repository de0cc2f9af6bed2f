"""How each known AI CLI is run headless, read-only, with the prompt on stdin.

An adapter hard-codes only the headless, read-only and output-format flags. Model and
endpoint choices stay in the user's own CLI configuration, which the adapter passes through
(its config directory and its own variables), so a council uses whatever the user set up.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..contract import AttemptOutcome, FamilyConfidence
from .base import EnvPolicy


@dataclass(frozen=True)
class Parsed:
    """What an adapter read out of a finished CLI run."""

    text: str | None
    error: str | None = None  # the CLI reported a failure even if it exited 0


@dataclass(frozen=True)
class CliAdapter:
    name: str
    executable: str
    model_family: str
    family_confidence: FamilyConfidence
    args: tuple[str, ...]
    env: EnvPolicy
    parse: Callable[[str, str], Parsed]
    version_args: tuple[str, ...] = ("--version",)
    extra_env_names: Callable[[Mapping[str, str]], list[str]] = field(default=lambda env: [])

    def argv(self, path: str) -> list[str]:
        return [path, *self.args]


def _tail(text: str, limit: int = 300) -> str:
    text = text.strip()
    return text if len(text) <= limit else "…" + text[-limit:]


def _json_objects(stdout: str) -> list[dict[str, object]]:
    """Whole-output JSON first, else one object per line (JSONL); junk lines are skipped."""
    stripped = stdout.strip()
    try:
        whole = json.loads(stripped)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict):
        return [whole]
    if isinstance(whole, list):
        return [x for x in whole if isinstance(x, dict)]
    found = []
    for line in stripped.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


def parse_claude(stdout: str, stderr: str) -> Parsed:
    for obj in reversed(_json_objects(stdout)):
        if obj.get("type") == "result" or "result" in obj:
            result = obj.get("result")
            if obj.get("is_error"):
                status = obj.get("api_error_status")
                where = f" (HTTP {status})" if status else ""
                return Parsed(None, f"claude reported an error{where}: {_tail(str(result))}")
            if isinstance(result, str) and result.strip():
                return Parsed(result)
            return Parsed(None, "claude returned an empty result")
    return Parsed(None, f"no result object in claude output: {_tail(stdout or stderr)}")


def parse_codex(stdout: str, stderr: str) -> Parsed:
    answer: str | None = None
    failure: str | None = None
    for obj in _json_objects(stdout):
        kind = obj.get("type")
        item = obj.get("item")
        if kind == "item.completed" and isinstance(item, dict):
            if item.get("type") == "agent_message" and isinstance(item.get("text"), str):
                answer = item["text"]
        elif kind == "turn.failed":
            err = obj.get("error")
            msg = err.get("message") if isinstance(err, dict) else err
            failure = f"codex turn failed: {_tail(str(msg))}"
    if answer is not None and answer.strip():
        return Parsed(answer)
    return Parsed(None, failure or f"no agent message in codex output: {_tail(stderr or stdout)}")


def parse_gemini(stdout: str, stderr: str) -> Parsed:
    for obj in reversed(_json_objects(stdout)):
        if "error" in obj and obj.get("error"):
            return Parsed(None, f"gemini reported an error: {_tail(json.dumps(obj['error']))}")
        response = obj.get("response")
        if isinstance(response, str) and response.strip():
            return Parsed(response)
    return Parsed(None, f"no response in gemini output: {_tail(stderr or stdout)}")


def _codex_env_keys(env: Mapping[str, str]) -> list[str]:
    """The key variables the user's codex providers name (``env_key``), so they pass through."""
    home = Path(env.get("CODEX_HOME") or Path(env.get("HOME", "~")).expanduser() / ".codex")
    try:
        config = tomllib.loads((home / "config.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return []
    providers = config.get("model_providers")
    names: list[str] = []
    if isinstance(providers, dict):
        for table in providers.values():
            if isinstance(table, dict) and isinstance(table.get("env_key"), str):
                names.append(table["env_key"])
    return names


CLAUDE = CliAdapter(
    name="claude",
    executable="claude",
    model_family="anthropic",
    family_confidence="confirmed",
    args=(
        "-p",
        "--bare",
        "--permission-mode",
        "plan",
        "--tools",
        "",
        "--no-session-persistence",
        "--output-format",
        "json",
    ),
    env=EnvPolicy(
        prefixes=("ANTHROPIC_", "CLAUDE_CODE_", "CLAUDE_CONFIG_DIR", "DISABLE_", "AWS_", "VERTEX_"),
        names=("CLOUD_ML_REGION", "MAX_THINKING_TOKENS"),
        fixed={
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        },
    ),
    parse=parse_claude,
)

CODEX = CliAdapter(
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
    parse=parse_codex,
    extra_env_names=_codex_env_keys,
)

GEMINI = CliAdapter(
    name="gemini",
    executable="gemini",
    model_family="google",
    family_confidence="confirmed",
    args=("--approval-mode", "plan", "--skip-trust", "-o", "json"),
    env=EnvPolicy(prefixes=("GEMINI_", "GOOGLE_", "CLOUDSDK_")),
    parse=parse_gemini,
)

ADAPTERS: dict[str, CliAdapter] = {a.name: a for a in (CLAUDE, CODEX, GEMINI)}


def classify_exit(exit_code: int | None, parsed: Parsed) -> tuple[AttemptOutcome, str]:
    """Exit code and parsed output together decide whether the voice answered."""
    if exit_code not in (0, None):
        return "exit_nonzero", parsed.error or f"exited {exit_code}"
    if parsed.text is None:
        return "error_reported", parsed.error or "no answer in output"
    return "ok", "answered"


def adapter_env(adapter: CliAdapter, parent: Mapping[str, str] | None = None) -> dict[str, str]:
    parent = dict(os.environ) if parent is None else parent
    return adapter.env.build(parent, adapter.extra_env_names(parent))
