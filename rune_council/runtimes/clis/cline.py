"""cline: a wrapper CLI in plan mode with auto-approval off and JSON output.

Its backend is the ``model`` of the ``lastUsedProvider`` in ``settings/providers.json`` under
``$CLINE_DATA_DIR`` (else ``$CLINE_DIR/data``, else ``~/.cline/data``).
"""

from __future__ import annotations

from pathlib import Path

from ..auth import Looked
from ..backend_family import BackendReading, home, loads_jsonc, reading
from ..base import EnvPolicy
from ..cli_adapter import PROVIDER_KEY_NAMES, CliAdapter
from ..parsers import Parsed, json_objects, nonblank, tail


def parse(stdout: str, stderr: str) -> Parsed:
    for obj in reversed(json_objects(stdout)):
        if obj.get("type") != "run_result":
            continue
        reason = obj.get("finishReason")
        text = nonblank(obj.get("text"))
        if reason not in (None, "completed"):
            # On failure cline puts the error message where the answer would be.
            return Parsed(None, f"cline finished with {reason}: {tail(text or '')}")
        if text is None:
            return Parsed(None, "cline returned an empty result")
        return Parsed(text)
    return Parsed(None, f"no run_result in cline output: {tail(stderr or stdout)}")


def backend(looked: Looked) -> BackendReading | None:
    env = looked.env
    if env.get("CLINE_DATA_DIR"):
        data = Path(env["CLINE_DATA_DIR"]).expanduser()
    elif env.get("CLINE_DIR"):
        data = Path(env["CLINE_DIR"]).expanduser() / "data"
    else:
        data = home(env) / ".cline" / "data"
    path = data / "settings" / "providers.json"
    text = looked.text(path)
    doc = loads_jsonc(text) if text is not None else None
    if not isinstance(doc, dict):
        return None
    providers = doc.get("providers")
    current = doc.get("lastUsedProvider")
    if not isinstance(providers, dict) or not isinstance(current, str):
        return None
    entry = providers.get(current)
    settings = entry.get("settings") if isinstance(entry, dict) else None
    if not isinstance(settings, dict):
        return None
    return reading(settings.get("model"), str(path))


ADAPTER = CliAdapter(
    name="cline",
    executable="cline",
    model_family="unknown",
    family_confidence="unknown",
    args=("--plan", "--auto-approve", "false", "--json"),
    env=EnvPolicy(
        prefixes=("CLINE_",),
        names=PROVIDER_KEY_NAMES,
        fixed={
            # Without local mode cline leaves a hub daemon running after it exits.
            "CLINE_SESSION_BACKEND_MODE": "local",
            "CLINE_NO_AUTO_UPDATE": "1",
        },
    ),
    parse=parse,
    # With --json cline will not run on stdin alone; it reads this, then the piped prompt.
    fixed_prompt_arg="Answer the request given on standard input.",
    wrapper=True,
    backend=backend,
)
