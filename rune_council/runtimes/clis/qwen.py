"""Qwen Code (``qwen``): Alibaba's CLI, plan approval mode with every tool excluded."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from ..auth import AuthContext, AuthReading, Looked, home
from ..backend_family import loads_jsonc, read_text
from ..base import EnvPolicy
from ..cli_adapter import CliAdapter
from ..parsers import Parsed, error_message, json_objects, nonblank, one_line, tail

# qwen prints an API failure as the answer text and still says is_error: false.
_API_ERROR = re.compile(r"^\s*\[API Error\b", re.IGNORECASE)

# Every tool qwen 0.15 registers, so plan mode cannot even read files outside the sandbox.
_TOOLS = (
    "read_file,read_many_files,list_directory,grep_search,glob,web_fetch,web_search,"
    "run_shell_command,write_file,edit,replace,save_memory,agent,skill,tool_search,todo_write,"
    "ask_user_question,exit_plan_mode,task_stop,send_message,lsp,monitor,"
    "cron_create,cron_list,cron_delete"
)


def parse(stdout: str, stderr: str) -> Parsed:
    for obj in reversed(json_objects(stdout)):
        if obj.get("type") != "result":
            continue
        result = obj.get("result")
        if obj.get("is_error") or obj.get("subtype") not in (None, "success"):
            message = error_message(obj) if obj.get("error") else None
            message = message or one_line(str(result or obj))
            return Parsed(None, f"qwen reported an error: {message}")
        text = nonblank(result)
        if text is None:
            return Parsed(None, "qwen returned an empty result")
        if _API_ERROR.match(text):
            return Parsed(None, f"qwen reported an API error: {one_line(text)}")
        return Parsed(text)
    return Parsed(None, f"no result element in qwen output: {tail(stdout or stderr)}")


# The variables qwen infers an auth type from when its settings choose none, in its order;
# only those its environment policy passes on can count.
_ENV_AUTH = (("QWEN_OAUTH",), ("OPENAI_API_KEY", "OPENAI_MODEL", "OPENAI_BASE_URL"))
AUTH_FIX = "qwen (then /auth to choose how it signs in)"


def _qwen_dir(env: Mapping[str, str]) -> Path:
    return Path(env["QWEN_HOME"]).expanduser() if env.get("QWEN_HOME") else home(env) / ".qwen"


async def auth(ctx: AuthContext) -> AuthReading:
    """qwen will not run headless without an auth type: its settings'
    ``security.auth.selectedType``, else one inferred from its variables. Whether the chosen
    way works is not told offline, so a choice reads as unknown and no choice as logged out."""
    looked = Looked(ctx.env)
    settings = _qwen_dir(ctx.env) / "settings.json"
    if looked.file(settings):
        doc = loads_jsonc(read_text(settings) or "")
        security = doc.get("security") if isinstance(doc, dict) else None
        chosen = security.get("auth") if isinstance(security, dict) else None
        kind = chosen.get("selectedType") if isinstance(chosen, dict) else None
        if isinstance(kind, str) and kind.strip():
            return looked.reading("unknown", f"auth type {kind!r} selected in {settings}")
    for names in _ENV_AUTH:
        if all([looked.var(n) for n in names]):
            return looked.reading("unknown", f"auth type inferred from {', '.join(names)}")
    return looked.reading(
        "logged-out",
        f"no auth type selected in {settings}, and neither QWEN_OAUTH nor OPENAI_API_KEY with "
        "OPENAI_MODEL and OPENAI_BASE_URL is set",
        AUTH_FIX,
    )


ADAPTER = CliAdapter(
    name="qwen",
    executable="qwen",
    model_family="qwen",
    family_confidence="confirmed",
    args=("--approval-mode", "plan", "--exclude-tools", _TOOLS, "-o", "json"),
    env=EnvPolicy(prefixes=("OPENAI_", "QWEN_", "DASHSCOPE_", "BAILIAN_")),
    parse=parse,
    auth=auth,
)
