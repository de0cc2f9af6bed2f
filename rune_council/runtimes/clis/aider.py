"""aider: a wrapper CLI in ask mode, no git, dry run, prompt read from stdin as a file.

Its backend is ``$AIDER_MODEL``, else a top-level ``model:`` line in ``~/.aider.conf.yml``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..backend_family import BackendReading, home, read_text, reading
from ..base import EnvPolicy
from ..cli_adapter import PROVIDER_KEY_NAMES, CliAdapter
from ..parsers import Parsed, tail

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


def backend(env: Mapping[str, str]) -> BackendReading | None:
    if env.get("AIDER_MODEL"):
        return reading(env["AIDER_MODEL"], "$AIDER_MODEL")
    path = home(env) / ".aider.conf.yml"
    text = read_text(path)
    if text is None:
        return None
    match = _YAML_MODEL.search(text)
    return reading(match.group(1), str(path)) if match else None


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
)
