"""Claude Code (``claude``): Anthropic's CLI, print mode, plan permissions, no tools."""

from __future__ import annotations

from ..base import EnvPolicy
from ..cli_adapter import CliAdapter
from ..parsers import Parsed, json_objects, nonblank, tail


def parse(stdout: str, stderr: str) -> Parsed:
    for obj in reversed(json_objects(stdout)):
        if obj.get("type") == "result" or "result" in obj:
            result = obj.get("result")
            if obj.get("is_error"):
                status = obj.get("api_error_status")
                where = f" (HTTP {status})" if status else ""
                return Parsed(None, f"claude reported an error{where}: {tail(str(result))}")
            if nonblank(result):
                return Parsed(str(result))
            return Parsed(None, "claude returned an empty result")
    return Parsed(None, f"no result object in claude output: {tail(stdout or stderr)}")


ADAPTER = CliAdapter(
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
    parse=parse,
)
