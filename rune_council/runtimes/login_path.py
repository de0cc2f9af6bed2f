"""The PATH the user's login shell would give, for CLIs a bare agent-host PATH misses.

An agent host often starts ``rune`` with a minimal PATH, while the user's AI CLIs live
where only their shell start-up files look: nvm, volta, pipx, ``~/.local/bin``. We ask the
login shell once (shellingham says which shell the user runs; ``$SHELL`` otherwise) and
the answer is cached with the detection report.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass

from .base import BASE_ENV_NAMES, BASE_ENV_PREFIXES
from .process import run_process

LOGIN_SHELL_TIMEOUT_S = 5.0
# Start-up files can print anything; the PATH is fenced by markers so noise is ignored.
_BEGIN, _END = "__rune_path_begin__", "__rune_path_end__"
_FENCED = re.compile(re.escape(_BEGIN) + r"(.*?)" + re.escape(_END), re.DOTALL)
_SUPPORTED = {"bash", "zsh", "sh", "dash", "ksh", "fish"}
# Set to 0 to never ask (for example where start-up files are slow or interactive).
ENV_SWITCH = "RUNE_COUNCIL_LOGIN_SHELL"


@dataclass(frozen=True)
class LoginPath:
    shell: str | None
    dirs: tuple[str, ...]
    detail: str


def which_shell(env: Mapping[str, str]) -> tuple[str, str] | None:
    """(name, path) of the user's shell: the one running us, else ``$SHELL``."""
    candidates: list[tuple[str, str]] = []
    try:
        import shellingham  # type: ignore[import-untyped]  # it ships no type information

        candidates.append(shellingham.detect_shell())
    except Exception:  # shellingham raises its own ShellDetectionFailure, or OSError
        pass
    shell = env.get("SHELL", "")
    candidates.append((os.path.basename(shell), shell))
    search = f"{env.get('PATH', '')}{os.pathsep}{os.defpath}"
    for name, path in candidates:
        if name not in _SUPPORTED:
            continue
        # shellingham may report a bare command name ("bash") rather than a path.
        resolved = path if os.path.isabs(path) else shutil.which(path or name, path=search)
        if resolved and os.access(resolved, os.X_OK):
            return name, resolved
    return None


def _command(name: str, path: str) -> list[str]:
    if name == "fish":
        script = f"printf '%s' {_BEGIN}; string join : $PATH; printf '%s' {_END}"
    else:
        script = f'printf "%s%s%s" {_BEGIN} "$PATH" {_END}'
    return [path, "-l", "-c", script]


async def login_shell_path(env: Mapping[str, str]) -> LoginPath:
    """Ask the login shell for its PATH; any failure is reported, never raised."""
    if env.get(ENV_SWITCH) == "0":
        return LoginPath(None, (), f"not asked (${ENV_SWITCH}=0)")
    found = which_shell(env)
    if found is None:
        return LoginPath(None, (), "no supported login shell found")
    name, path = found
    # The shell gets the same neutral environment as any child: no keys, no tokens.
    allowed = set(BASE_ENV_NAMES)
    child = {
        k: v
        for k, v in env.items()
        if k in allowed or any(k.startswith(p) for p in BASE_ENV_PREFIXES)
    }
    child.setdefault("PATH", os.defpath)
    result = await run_process(
        _command(name, path),
        stdin=b"",
        env=child,
        timeout_s=LOGIN_SHELL_TIMEOUT_S,
        max_stdout=256_000,
        kill_grace_s=0.5,
    )
    match = _FENCED.search(result.stdout.decode("utf-8", errors="replace"))
    if result.outcome != "ok" or match is None:
        return LoginPath(name, (), f"{name} -l gave no PATH: {result.detail}")
    dirs = tuple(d for d in match.group(1).strip().split(":") if os.path.isabs(d))
    return LoginPath(path, dirs, f"{len(dirs)} PATH entries from {name} -l")
