"""Gemini CLI (``gemini``): Google's CLI, plan approval mode, JSON output."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ..auth import AuthContext, AuthReading, Looked, home
from ..backend_family import loads_jsonc, read_text
from ..base import EnvPolicy
from ..cli_adapter import CliAdapter
from ..parsers import Parsed, error_message, json_objects, nonblank, one_line, tail

KEY_FIX = "export GEMINI_API_KEY=<your key>"


def parse(stdout: str, stderr: str) -> Parsed:
    for obj in reversed(json_objects(stdout)):
        if "error" in obj and obj.get("error"):
            message = error_message(obj) or one_line(str(obj["error"]))
            return Parsed(None, f"gemini reported an error: {message}")
        response = nonblank(obj.get("response"))
        if response:
            return Parsed(response)
    # On a failure gemini prints its JSON error object on stderr, over several lines.
    for obj in reversed(json_objects(stderr)):
        found = error_message(obj) if obj.get("error") else None
        if found:
            return Parsed(None, f"gemini reported an error: {found}")
    return Parsed(None, f"no response in gemini output: {one_line(tail(stderr or stdout))}")


def _gemini_dir(env: Mapping[str, str]) -> Path:
    base = Path(env["GEMINI_CLI_HOME"]).expanduser() if env.get("GEMINI_CLI_HOME") else home(env)
    return base / ".gemini"


def _selected_type(looked: Looked) -> tuple[str | None, str]:
    """The auth type gemini will use in a headless run, and where that choice was found:
    settings.json's ``security.auth.selectedType``, else the variables gemini reads, in the
    order it reads them."""
    settings = _gemini_dir(looked.env) / "settings.json"
    if looked.file(settings):
        doc = loads_jsonc(read_text(settings) or "")
        security = doc.get("security") if isinstance(doc, dict) else None
        auth = security.get("auth") if isinstance(security, dict) else None
        chosen = auth.get("selectedType") if isinstance(auth, dict) else None
        if isinstance(chosen, str) and chosen.strip():
            return chosen, f"auth type {chosen!r} selected in {settings}"
    flags = (
        ("GOOGLE_GENAI_USE_GCA", "oauth-personal"),
        ("GOOGLE_GENAI_USE_VERTEXAI", "vertex-ai"),
    )
    for name, kind in flags:
        looked.var(name)
        if looked.env.get(name) == "true":
            return kind, f"{name}=true"
    if looked.var("GOOGLE_GEMINI_BASE_URL"):
        return "gateway", "GOOGLE_GEMINI_BASE_URL is set"
    if looked.var("GEMINI_API_KEY"):
        return "gemini-api-key", "GEMINI_API_KEY is set"
    return None, f"no auth type selected in {settings} and no GEMINI_API_KEY"


def _dotenv_names(looked: Looked) -> set[str]:
    """Variable names (never values) gemini's own .env file sets."""
    path = _gemini_dir(looked.env) / ".env"
    if not looked.file(path):
        return set()
    names = set()
    for line in (read_text(path) or "").splitlines():
        key, sep, value = line.removeprefix("export ").partition("=")
        if sep and key.strip() and value.strip():
            names.add(key.strip())
    return names


async def auth(ctx: AuthContext) -> AuthReading:
    """Mirrors gemini's own headless check (an auth type, then what that type needs)
    over files and variable names only: no command, since gemini has no status command."""
    looked = Looked(ctx.env)
    kind, why = _selected_type(looked)
    if kind is None:
        return looked.reading("logged-out", why, KEY_FIX)
    dotenv = _dotenv_names(looked)

    def has(name: str) -> bool:
        return looked.var(name) or name in dotenv

    if kind == "gemini-api-key":
        if has("GEMINI_API_KEY"):
            return looked.reading("ready", f"{why}; GEMINI_API_KEY is set")
        return looked.reading(
            "unknown",
            f"{why}; GEMINI_API_KEY unset (a key saved in gemini's own store is not looked at)",
        )
    if kind == "vertex-ai":
        if (has("GOOGLE_CLOUD_PROJECT") and has("GOOGLE_CLOUD_LOCATION")) or has("GOOGLE_API_KEY"):
            return looked.reading("ready", f"{why}; the Vertex AI project or key is set")
        return looked.reading(
            "logged-out",
            f"{why}; neither GOOGLE_CLOUD_PROJECT with GOOGLE_CLOUD_LOCATION nor GOOGLE_API_KEY "
            "is set",
            "export GOOGLE_CLOUD_PROJECT=<project> GOOGLE_CLOUD_LOCATION=<region>",
        )
    if kind == "oauth-personal" and looked.file(_gemini_dir(ctx.env) / "oauth_creds.json"):
        return looked.reading("ready", f"{why}; a Google login is saved")
    return looked.reading("unknown", f"{why}; nothing offline tells whether it is signed in")


ADAPTER = CliAdapter(
    name="gemini",
    executable="gemini",
    model_family="google",
    family_confidence="confirmed",
    args=("--approval-mode", "plan", "--skip-trust", "-o", "json"),
    env=EnvPolicy(prefixes=("GEMINI_", "GOOGLE_", "CLOUDSDK_")),
    parse=parse,
    auth=auth,
)
