"""User-style configuration for the OpenAI-compatible real CLIs: qwen, opencode and aider.

Extends the environment from clis.py (same HOME, same loopback ModelServer): each CLI is
pointed at the server's ``/v1/chat/completions`` through its own config files and
variables, never through flags, so the commands the council runs are the product's own.
qwen and opencode come from tests/e2e/node_modules, aider from its own virtualenv
(``tests/e2e/install.sh`` makes both).

cline is pinned too but not driven end to end: even with telemetry off it resolves an
outside host name on every run, and this suite sends nothing beyond 127.0.0.1.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Protocol

from tests.e2e.clis import E2E_DIR, STUB_KEY, STUB_MODEL, node_bin_dir

# Outside tests/: a virtualenv carries other projects' test files that are not ours to run.
AIDER_VENV = E2E_DIR.parents[1] / ".e2e" / "aider-venv"
OPENAI_CLI_NAMES = ("qwen", "opencode", "aider")
INSTALL_HINT = "run tests/e2e/install.sh to install the pinned CLIs (npm) and aider (PyPI)"


class _Server(Protocol):
    @property
    def base_url(self) -> str: ...


def aider_bin_dir() -> Path:
    return AIDER_VENV / "bin"


def openai_clis_installed() -> bool:
    return (
        all((node_bin_dir() / n).exists() for n in ("qwen", "opencode"))
        and (aider_bin_dir() / "aider").exists()
    )


def cli_bin(name: str) -> Path:
    return (aider_bin_dir() if name == "aider" else node_bin_dir()) / name


def add_openai_clis(
    env: dict[str, str], server: _Server, *, opencode_model: str = STUB_MODEL
) -> None:
    """Configure qwen, opencode and aider under ``env["HOME"]``; updates ``env`` in place.

    ``opencode_model`` is the model id opencode's own config names; the stub server
    answers whatever model is asked for.
    """
    home = Path(env["HOME"])
    base = f"{server.base_url}/v1"

    qwen = home / ".qwen"
    qwen.mkdir(mode=0o700, exist_ok=True)
    (qwen / "settings.json").write_text(
        json.dumps(
            {
                "security": {"auth": {"selectedType": "openai"}},
                "model": {"name": STUB_MODEL},
                "privacy": {"usageStatisticsEnabled": False},
                "telemetry": {"enabled": False},
                "memory": {"enableManagedAutoMemory": False},
            }
        )
    )

    opencode = Path(env.get("XDG_CONFIG_HOME") or home / ".config") / "opencode"
    (opencode / "node_modules").mkdir(parents=True, exist_ok=True)
    # opencode installs its plugin package from npm into its config directory unless
    # node_modules exists and package.json and package-lock.json both list it.
    plugin = {"@opencode-ai/plugin": "1.18.33"}
    (opencode / "package.json").write_text(json.dumps({"dependencies": plugin}))
    (opencode / "package-lock.json").write_text(
        json.dumps({"lockfileVersion": 3, "packages": {"": {"dependencies": plugin}}})
    )
    (opencode / "opencode.json").write_text(
        json.dumps(
            {
                "model": f"stub/{opencode_model}",
                "provider": {
                    "stub": {
                        "npm": "@ai-sdk/openai-compatible",
                        "name": "stub",
                        "options": {"baseURL": base, "apiKey": "{env:STUB_API_KEY}"},
                        "models": {opencode_model: {"name": opencode_model}},
                    }
                },
            }
        )
    )

    caches = home / ".aider" / "caches"
    caches.mkdir(parents=True, exist_ok=True)
    # A local price list: without one aider downloads it from the internet.
    (caches / "model_prices_and_context_window.json").write_text(
        json.dumps(
            {
                f"openai/{STUB_MODEL}": {
                    "max_input_tokens": 100000,
                    "max_output_tokens": 4096,
                    "input_cost_per_token": 0,
                    "output_cost_per_token": 0,
                    "litellm_provider": "openai",
                    "mode": "chat",
                }
            }
        )
    )
    (home / ".aider.conf.yml").write_text(f"model: openai/{STUB_MODEL}\n")

    env.update(
        {
            "PATH": os.pathsep.join([str(aider_bin_dir()), env["PATH"]]),
            # qwen and aider read the OpenAI variables; opencode reads the key its config names.
            "OPENAI_BASE_URL": base,
            "OPENAI_API_BASE": base,
            "STUB_API_KEY": STUB_KEY,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
        }
    )


def only_these_clis(env: dict[str, str], names: tuple[str, ...], where: Path) -> None:
    """Restrict the real CLIs a council can find to ``names`` (symlinks in ``where``)."""
    where.mkdir(parents=True, exist_ok=True)
    for name in names:
        link = where / name
        if not link.exists():
            link.symlink_to(cli_bin(name))
    hidden = {str(node_bin_dir()), str(aider_bin_dir())}
    rest = [d for d in env["PATH"].split(os.pathsep) if d and d not in hidden]
    env["PATH"] = os.pathsep.join([str(where), *rest])
