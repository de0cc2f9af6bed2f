"""Install fake AI CLIs under their real names in a bin directory.

The council passes each CLI only its allowlisted environment, so a fake cannot be steered
through variables the test sets; each wrapper script carries its own FAKE_* settings.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

FAKE_CLI = Path(__file__).with_name("fake_cli.py")
FORMATS = {
    "claude": "claude-json",
    "codex": "codex-jsonl",
    "gemini": "gemini-json",
    "qwen": "qwen-json",
    "opencode": "opencode-jsonl",
    "aider": "aider-text",
    "cline": "cline-jsonl",
    "amp": "amp-jsonl",
}


def install_fake(
    bin_dir: Path,
    name: str,
    *,
    answer: str | None = None,
    version: str = "1.2.3",
    **settings: str | float | int,
) -> Path:
    """Write ``bin_dir/name``; ``settings`` become FAKE_* variables (mode="sleep" etc.)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    env = {"FAKE_FORMAT": FORMATS.get(name, "text")}
    if answer is not None:
        answer_file = bin_dir / f".{name}.answer"
        answer_file.write_text(answer, encoding="utf-8")
        env["FAKE_ANSWER_FILE"] = str(answer_file)
    for key, value in settings.items():
        env[f"FAKE_{key.upper()}"] = str(value)
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    script = bin_dir / name
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "--version" ]; then echo "{name} {version}"; exit 0; fi\n'
        f'{exports} exec {shlex.quote(sys.executable)} -S {shlex.quote(str(FAKE_CLI))} "$@"\n',
        encoding="utf-8",
    )
    script.chmod(0o755)
    return script


def path_with(bin_dir: Path) -> str:
    return f"{bin_dir}:/usr/bin:/bin"
