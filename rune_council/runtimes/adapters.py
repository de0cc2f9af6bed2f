"""How each known AI CLI is run headless, read-only, with the prompt on stdin.

An adapter hard-codes only the headless, read-only and output-format flags. Model and
endpoint choices stay in the user's own CLI configuration, which the adapter passes through
(its config directory and its own variables), so a council uses whatever the user set up.

Which flags were checked against the real binary (pinned in ``tests/e2e/package.json`` or
the aider venv) and which come from the vendor's documentation only is noted per adapter;
``references/dispatch-protocol.md`` has the table.
"""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from .. import safejson
from ..contract import AttemptOutcome, FamilyConfidence
from ..safefile import read_capped, read_capped_text
from .backend_family import BackendReader, aider_backend, cline_backend, opencode_backend
from .base import EnvPolicy
from .parsers import (
    Parsed,
    parse_aider,
    parse_amp,
    parse_claude,
    parse_cline,
    parse_codex,
    parse_gemini,
    parse_opencode,
    parse_plain_text,
    parse_qwen,
)

__all__ = [
    "ADAPTERS",
    "CliAdapter",
    "Parsed",
    "adapter_env",
    "classify_exit",
]

PromptVia = Literal["stdin", "file"]
# In an adapter's args, these stand for the private support directory and the prompt file.
SUPPORT_DIR = "{support_dir}"
PROMPT_FILE = "{prompt_file}"

# Keys a wrapper CLI may need, depending on which provider its user configured. A wrapper
# gets these (and only these) besides its own variables.
PROVIDER_KEY_NAMES = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_API_BASE",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_GENERATIVE_AI_API_KEY",
    "OPENROUTER_API_KEY",
    "GROQ_API_KEY",
    "DEEPSEEK_API_KEY",
    "MISTRAL_API_KEY",
    "XAI_API_KEY",
    "TOGETHER_API_KEY",
    "FIREWORKS_API_KEY",
    "AZURE_API_KEY",
    "AZURE_API_BASE",
    "AZURE_API_VERSION",
    "OLLAMA_API_BASE",
    "OLLAMA_HOST",
)


def _no_names(env: Mapping[str, str]) -> list[str]:
    return []


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
    extra_env_names: Callable[[Mapping[str, str]], list[str]] = field(default=_no_names)
    # A constant argument some CLIs insist on beside stdin (cline's --json mode). It is
    # part of the adapter, never anything from the question.
    fixed_prompt_arg: str | None = None
    prompt_via: PromptVia = "stdin"
    # Files written into a private directory for the run only; SUPPORT_DIR in args names it.
    support_files: Mapping[str, str] = field(default_factory=dict)
    # Set when the CLI cannot meet the dispatch safety rules: detected, never dispatched.
    ineligible: str | None = None
    # A wrapper fronts a model its user chose; ``backend`` reads that choice, if it can.
    wrapper: bool = False
    backend: BackendReader | None = None
    # Output that calls for exactly one more try of the same run (opencode's upgrade demand).
    retry_once_when: Callable[[str, str], bool] | None = None
    verified: Literal["real binary", "docs only"] = "real binary"

    def argv(
        self, path: str, support_dir: str | None = None, prompt_file: str | None = None
    ) -> list[str]:
        def fill(arg: str) -> str:
            if support_dir is not None:
                arg = arg.replace(SUPPORT_DIR, support_dir)
            if prompt_file is not None:
                arg = arg.replace(PROMPT_FILE, prompt_file)
            return arg

        argv = [path, *(fill(a) for a in self.args)]
        if self.fixed_prompt_arg is not None:
            argv.append(self.fixed_prompt_arg)
        return argv

    @property
    def needs_support_dir(self) -> bool:
        return bool(self.support_files) or self.prompt_via == "file"


def _codex_env_keys(env: Mapping[str, str]) -> list[str]:
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


_ENV_REFERENCE = re.compile(r"\{env:([A-Za-z_][A-Za-z0-9_]*)\}")


def _opencode_env_keys(env: Mapping[str, str]) -> list[str]:
    """Variables the user's opencode config reads through ``{env:NAME}``."""
    texts = [env.get("OPENCODE_CONFIG_CONTENT", "")]
    paths = [Path(env["OPENCODE_CONFIG"]).expanduser()] if env.get("OPENCODE_CONFIG") else []
    base = Path(env.get("XDG_CONFIG_HOME") or Path(env.get("HOME", "~")).expanduser() / ".config")
    paths += [base / "opencode" / n for n in ("opencode.json", "opencode.jsonc", "config.json")]
    for path in paths:
        try:
            data, _cut = read_capped(path, 1_000_000)
            texts.append(data.decode("utf-8", errors="replace"))
        except OSError:
            continue
    return sorted({m.group(1) for text in texts for m in _ENV_REFERENCE.finditer(text)})


# opencode can be told by a hosted provider that the client is too old; wording varies,
# so any demand to upgrade or update opencode (or an HTTP 426) counts.
_UPGRADE_DEMAND = re.compile(
    r"(upgrade|update)\W+(to\W+)?(the\W+latest\W+)?(version\W+of\W+)?opencode"
    r"|opencode\W+(upgrade|update)\W+(is\W+)?required"
    r"|requires?\W+a\W+newer\W+(version\W+of\W+)?opencode"
    r"|\b426\b|upgrade required",
    re.IGNORECASE,
)


def opencode_demands_upgrade(stdout: str, stderr: str) -> bool:
    return bool(_UPGRADE_DEMAND.search(stdout) or _UPGRADE_DEMAND.search(stderr))


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

# Every tool qwen 0.15 registers, so plan mode cannot even read files outside the sandbox.
_QWEN_TOOLS = (
    "read_file,read_many_files,list_directory,grep_search,glob,web_fetch,web_search,"
    "run_shell_command,write_file,edit,replace,save_memory,agent,skill,tool_search,todo_write,"
    "ask_user_question,exit_plan_mode,task_stop,send_message,lsp,monitor,"
    "cron_create,cron_list,cron_delete"
)

QWEN = CliAdapter(
    name="qwen",
    executable="qwen",
    model_family="qwen",
    family_confidence="confirmed",
    args=("--approval-mode", "plan", "--exclude-tools", _QWEN_TOOLS, "-o", "json"),
    env=EnvPolicy(prefixes=("OPENAI_", "QWEN_", "DASHSCOPE_", "BAILIAN_")),
    parse=parse_qwen,
)

OPENCODE = CliAdapter(
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
    parse=parse_opencode,
    extra_env_names=_opencode_env_keys,
    wrapper=True,
    backend=opencode_backend,
    retry_once_when=opencode_demands_upgrade,
)

AIDER = CliAdapter(
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
    parse=parse_aider,
    wrapper=True,
    backend=aider_backend,
)

CLINE = CliAdapter(
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
    parse=parse_cline,
    # With --json cline will not run on stdin alone; it reads this, then the piped prompt.
    fixed_prompt_arg="Answer the request given on standard input.",
    wrapper=True,
    backend=cline_backend,
)

AMP = CliAdapter(
    name="amp",
    executable="amp",
    model_family="unknown",
    family_confidence="unknown",
    args=("--execute", "--stream-json", "--settings-file", f"{SUPPORT_DIR}/settings.json"),
    env=EnvPolicy(prefixes=("AMP_",)),
    parse=parse_amp,
    # Read-only the documented way: a permission rule that rejects every tool call.
    support_files={
        "settings.json": json.dumps({"amp.permissions": [{"tool": "*", "action": "reject"}]})
    },
    wrapper=True,
    verified="docs only",
)

AGY = CliAdapter(
    name="agy",
    executable="agy",
    model_family="google",
    family_confidence="confirmed",
    args=("--print", "--sandbox"),
    env=EnvPolicy(prefixes=("AGY_", "ANTIGRAVITY_", "GEMINI_", "GOOGLE_")),
    parse=parse_plain_text,
    verified="docs only",
)

GROK = CliAdapter(
    name="grok",
    executable="grok",
    model_family="xai",
    family_confidence="confirmed",
    args=(),
    env=EnvPolicy(prefixes=("GROK_", "XAI_")),
    parse=parse_plain_text,
    ineligible=(
        "takes the prompt only as a command-line argument (visible to every local user in "
        "ps) and approves every tool, shell included, in headless mode: no read-only mode"
    ),
)

ADAPTERS: dict[str, CliAdapter] = {
    a.name: a for a in (CLAUDE, CODEX, GEMINI, QWEN, OPENCODE, AIDER, CLINE, AMP, AGY, GROK)
}


def _exit_words(code: int) -> str:
    if code >= 0:
        return f"exited {code}"
    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"killed by signal {-code}"


def classify_exit(exit_code: int | None, parsed: Parsed) -> tuple[AttemptOutcome, str]:
    """Exit code and parsed output together decide whether the voice answered."""
    if exit_code not in (0, None):
        how = _exit_words(exit_code)
        return "exit_nonzero", f"{how}: {parsed.error}" if parsed.error else how
    if parsed.text is None:
        return "error_reported", parsed.error or "no answer in output"
    return "ok", "answered"


def adapter_env(
    adapter: CliAdapter,
    parent: Mapping[str, str] | None = None,
    allow: tuple[str, ...] = (),
) -> dict[str, str]:
    """The exact environment the adapter's CLI gets; ``allow`` adds names the user allows."""
    parent = dict(os.environ) if parent is None else parent
    return adapter.env.build(parent, [*adapter.extra_env_names(parent), *allow])
