"""Install fake AI CLIs under their real names in a bin directory.

The council passes each CLI only its allowlisted environment, so a fake cannot be steered
through variables the test sets; each wrapper script carries its own FAKE_* settings.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

FAKE_CLI = Path(__file__).with_name("fake_cli.py")
# The fake run directly, without site-packages (it needs none): as a voice starts it.
FAKE_ARGV = [sys.executable, "-S", str(FAKE_CLI)]
# What the real CLIs' offline status commands print (claude 2.1.197, codex 0.171.0), as
# (ready, logged-out) pairs of (stdout, exit code). A fake is logged in unless told otherwise.
_STATUS = {
    "claude": (
        "auth",
        '{"loggedIn": true, "authMethod": "api_key", "apiKeySource": "ANTHROPIC_API_KEY"}',
        '{"loggedIn": false, "authMethod": "none", "apiProvider": "firstParty"}',
    ),
    "codex": ("login", "API key configured - ***", "Not logged in"),
}
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
    auth: str = "ready",
    **settings: str | float | int,
) -> Path:
    """Write ``bin_dir/name``; ``settings`` become FAKE_* variables (mode="sleep" etc.).

    ``auth`` (ready, logged-out, unknown) is what the CLI's offline auth check will find:
    claude's and codex's status commands answer it (unknown: an exit status neither uses);
    gemini and qwen, which have none, get the files their checks read under ``bin_dir``'s
    parent, the HOME most tests give it. So do the wrappers (opencode, aider, cline, amp)
    when ready: a saved login that names no model, unless the test wrote one already."""
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
    status = ""
    if name in _STATUS:
        verb, ready, out = _STATUS[name]
        text, code = {"ready": (ready, 0), "logged-out": (out, 1)}.get(auth, ("no status", 2))
        status = (
            f'if [ "$1 $2" = "{verb} status" ]; then echo {shlex.quote(text)}; exit {code}; fi\n'
        )
    if name == "gemini":
        _gemini_home(bin_dir.parent / ".gemini", auth)
    if name in _WRAPPER_LOGINS and auth == "ready":
        _wrapper_login(bin_dir.parent, name)
    if name == "qwen" and auth != "logged-out":
        # qwen's check never says ready: an auth type chosen is as far as it can tell.
        (bin_dir.parent / ".qwen").mkdir(parents=True, exist_ok=True)
        settings = json.dumps({"security": {"auth": {"selectedType": "openai"}}})
        (bin_dir.parent / ".qwen" / "settings.json").write_text(settings, encoding="utf-8")
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "--version" ]; then echo "{name} {version}"; exit 0; fi\n'
        f"{status}"
        f'{exports} exec {shlex.quote(sys.executable)} -S {shlex.quote(str(FAKE_CLI))} "$@"\n',
        encoding="utf-8",
    )
    script.chmod(0o755)
    return script


def _gemini_home(gemini_dir: Path, auth: str) -> None:
    """A saved Google login (ready), an API-key choice without the key (unknown), or
    nothing at all (logged out)."""
    if auth == "logged-out":
        return
    gemini_dir.mkdir(parents=True, exist_ok=True)
    kind = "oauth-personal" if auth == "ready" else "gemini-api-key"
    settings = json.dumps({"security": {"auth": {"selectedType": kind}}})
    (gemini_dir / "settings.json").write_text(settings, encoding="utf-8")
    if auth == "ready":
        (gemini_dir / "oauth_creds.json").write_text("{}", encoding="utf-8")


def path_with(bin_dir: Path) -> str:
    return f"{bin_dir}:/usr/bin:/bin"


# Where each wrapper keeps a saved login, under HOME, and one that names no model (so the
# family a test gives the wrapper through its config is left as the test wrote it).
_ANY_PROVIDER = ("anthropic", "openai", "google", "openrouter", "opencode")
_WRAPPER_LOGINS: dict[str, tuple[str, str]] = {
    "opencode": (
        ".local/share/opencode/auth.json",
        json.dumps({p: {"type": "api", "key": "fake-key"} for p in _ANY_PROVIDER}),
    ),
    "aider": (
        ".aider/oauth-keys.env",
        "".join(
            f"{n}=fake-key\n"
            for n in ("OPENROUTER_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY")
        ),
    ),
    "cline": (
        ".cline/data/settings/providers.json",
        json.dumps(
            {
                "version": 1,
                "lastUsedProvider": "openai-compatible",
                "providers": {
                    "openai-compatible": {
                        "settings": {
                            "provider": "openai-compatible",
                            "apiKey": "fake-key",
                            "model": "stub-model",
                        }
                    }
                },
            }
        ),
    ),
    "amp": (".local/share/amp/secrets.json", json.dumps({"apiKey": "fake-key"})),
}


def _wrapper_login(home: Path, name: str) -> None:
    where, content = _WRAPPER_LOGINS[name]
    path = home / where
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")
