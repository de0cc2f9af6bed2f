"""Isolated, user-style configuration for the real AI CLIs pinned in package.json.

Each CLI is pointed at a ModelServer the way a user would point it at a model:
through its own config files under a fresh HOME and through environment
variables. Nothing here adds model or endpoint flags to a command line, so the
commands the tests run are exactly the product's commands.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Protocol

E2E_DIR = Path(__file__).resolve().parent
STUB_MODEL = "stub-model"
STUB_KEY = "stub-key-not-secret"
CLI_NAMES = ("claude", "codex", "gemini")
INSTALL_HINT = "run `npm ci --prefix tests/e2e` to install the pinned claude, codex and gemini CLIs"


class _Server(Protocol):
    @property
    def base_url(self) -> str: ...


def node_bin_dir() -> Path:
    return E2E_DIR / "node_modules" / ".bin"


def real_clis_installed() -> bool:
    bin_dir = node_bin_dir()
    return all((bin_dir / name).exists() for name in CLI_NAMES) and shutil.which("node") is not None


def cli_environment(tmp_path: Path, server: _Server) -> dict[str, str]:
    """A complete environment (not a patch of os.environ) for running claude, codex and gemini.

    Built from scratch so that a developer's own keys, base URLs and proxies never
    leak into a test run.
    """
    base_url = server.base_url
    # Reported elsewhere: gemini ignores settings below a world-writable directory.
    # Not reproduced with 0.61.0 (as root or not), but private dirs cost nothing.
    tmp_path.chmod(0o700)
    home = tmp_path / "home"
    home.mkdir(mode=0o700, exist_ok=True)
    scratch = tmp_path / "tmp"
    scratch.mkdir(mode=0o700, exist_ok=True)

    codex_home = home / ".codex"
    codex_home.mkdir(mode=0o700, exist_ok=True)
    (codex_home / "config.toml").write_text(_codex_config(base_url))

    gemini_dir = home / ".gemini"
    gemini_dir.mkdir(mode=0o700, exist_ok=True)
    (gemini_dir / "settings.json").write_text(json.dumps(_gemini_settings(), indent=2))

    system_path = os.environ.get("PATH") or os.defpath
    env = {
        "PATH": os.pathsep.join([str(node_bin_dir()), system_path]),
        "HOME": str(home),
        "USER": os.environ.get("USER", "tester"),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
        "TMPDIR": str(scratch),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        "NO_COLOR": "1",
        # codex
        "CODEX_HOME": str(codex_home),
        "OPENAI_API_KEY": STUB_KEY,
        # claude
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": STUB_KEY,
        "ANTHROPIC_MODEL": STUB_MODEL,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_MAX_RETRIES": "0",
        # gemini
        "GEMINI_API_KEY": STUB_KEY,
        "GOOGLE_GEMINI_BASE_URL": base_url,
        "GEMINI_CLI_HOME": str(home),
    }
    return env


def _codex_config(base_url: str) -> str:
    return f"""\
model = "{STUB_MODEL}"
model_provider = "stub"
check_for_update_on_startup = false

[analytics]
enabled = false

[model_providers.stub]
name = "stub"
base_url = "{base_url}/v1"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
"""


def _gemini_settings() -> dict[str, object]:
    return {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "model": {"name": STUB_MODEL},
        "general": {
            "maxAttempts": 1,
            "enableAutoUpdate": False,
            "enableAutoUpdateNotification": False,
        },
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
    }
