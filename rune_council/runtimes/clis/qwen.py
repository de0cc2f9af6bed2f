"""Qwen Code (``qwen``): Alibaba's CLI, plan approval mode with every tool excluded."""

from __future__ import annotations

import re

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


ADAPTER = CliAdapter(
    name="qwen",
    executable="qwen",
    model_family="qwen",
    family_confidence="confirmed",
    args=("--approval-mode", "plan", "--exclude-tools", _TOOLS, "-o", "json"),
    env=EnvPolicy(prefixes=("OPENAI_", "QWEN_", "DASHSCOPE_", "BAILIAN_")),
    parse=parse,
)
