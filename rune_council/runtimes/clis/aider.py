"""aider: a wrapper CLI in ask mode, no git, dry run, prompt read from stdin as a file.

Its backend is ``AIDER_MODEL``, else a top-level ``model:`` line in ``.aider.conf.yml``, read
the way aider 0.86 reads them: ``AIDER_MODEL`` set in a ``.env`` file (``~/.aider/
oauth-keys.env``, ``~/.env``, then the git root's, the later winning) overrides the
environment's, and the conf file of the git root overrides the home one. The git root is the
one holding the empty directory a voice runs in, if any (that directory itself has no file).
"""

from __future__ import annotations

import re
from pathlib import Path

from ..auth import Looked
from ..backend_family import BackendReading, home, reading, run_dir_ancestors
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


def backend(looked: Looked) -> BackendReading | None:
    where = [home(looked.env)]
    if (root := _git_root()) is not None:
        where.append(root)
    dotenv: tuple[str, str] | None = None
    for path in [where[0] / ".aider" / "oauth-keys.env", *(d / ".env" for d in where)]:
        text = looked.text(path)
        found = _DOTENV_MODEL.findall(text) if text is not None else []
        if found and found[-1]:
            dotenv = (found[-1], f"AIDER_MODEL in {path}")
    if dotenv is not None:
        return reading(*dotenv)
    if (model := looked.value("AIDER_MODEL")) is not None:
        return reading(model, "$AIDER_MODEL")
    chosen: tuple[str, str] | None = None
    for path in (d / ".aider.conf.yml" for d in where):
        text = looked.text(path)
        match = _YAML_MODEL.search(text) if text is not None else None
        if match:
            chosen = (match.group(1), str(path))
    return reading(*chosen) if chosen is not None else None


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
