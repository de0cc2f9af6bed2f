"""Claude Code (``claude``): Anthropic's CLI, print mode, plan permissions, no tools."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ..auth import AuthContext, AuthReading, Looked, home, run_status
from ..base import EnvPolicy
from ..cli_adapter import CliAdapter
from ..parsers import Parsed, json_objects, nonblank, one_line, tail

KEY_FIX = "export ANTHROPIC_API_KEY=<your key>"
# What ``claude auth status`` may name; anything else it prints (an e-mail, an org) is never
# read into the report.
_METHODS = {
    "api_key": "an API key",
    "api_key_helper": "an apiKeyHelper",
    "third_party": "a third-party provider's own credentials",
    "claude.ai": "a claude.ai login",
    "oauth_token": "an OAuth token",
}


def parse(stdout: str, stderr: str) -> Parsed:
    for obj in reversed(json_objects(stdout)):
        if obj.get("type") == "result" or "result" in obj:
            result = obj.get("result")
            if obj.get("is_error"):
                status = obj.get("api_error_status")
                where = f" (HTTP {status})" if status else ""
                return Parsed(None, f"claude reported an error{where}: {one_line(str(result))}")
            if nonblank(result):
                return Parsed(str(result))
            return Parsed(None, "claude returned an empty result")
    return Parsed(None, f"no result object in claude output: {tail(stdout or stderr)}")


def _config_dir(env: Mapping[str, str]) -> Path:
    return (
        Path(env["CLAUDE_CONFIG_DIR"]).expanduser()
        if env.get("CLAUDE_CONFIG_DIR")
        else (home(env) / ".claude")
    )


async def auth(ctx: AuthContext) -> AuthReading:
    """``claude auth status`` as the council runs claude: with ``--bare`` (CLAUDE_CODE_SIMPLE),
    where only ANTHROPIC_API_KEY, an apiKeyHelper given by --settings, or a third-party
    provider's own credentials count; a ``claude /login`` session is not read."""
    looked = Looked(ctx.env)
    bare = AuthContext(ctx.path, {**ctx.env, "CLAUDE_CODE_SIMPLE": "1"}, ctx.timeout_s)
    status = await run_status(bare, ("auth", "status", "--json"))
    if status.exit_code is None:
        return looked.reading("unknown", f"`claude auth status` did not finish: {status.failure}")
    doc = next(iter(json_objects(status.stdout)), {})
    logged_in = doc.get("loggedIn")
    method = _METHODS.get(str(doc.get("authMethod")), "")
    source = doc.get("apiKeySource")
    source_words = f" from {source}" if isinstance(source, str) and source.isidentifier() else ""
    if logged_in is True and status.exit_code == 0:
        how = f" with {method}{source_words}" if method else ""
        return looked.reading("ready", f"`claude auth status` (as --bare): logged in{how}")
    if logged_in is False:
        session = looked.file(_config_dir(ctx.env) / ".credentials.json")
        note = (
            "; a claude.ai login was found, but the council runs claude --bare, which reads "
            "only ANTHROPIC_API_KEY or an apiKeyHelper"
            if session
            else ""
        )
        return looked.reading(
            "logged-out", f"`claude auth status` (as --bare): not logged in{note}", KEY_FIX
        )
    return looked.reading(
        "unknown", f"`claude auth status` exited {status.exit_code} without a login state"
    )


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
    auth=auth,
)
