"""amp: a wrapper CLI in execute mode with a settings file that rejects every tool.

amp picks its models itself, per task, so no configuration names its backend: it always
stays ``unknown``. It answers only for a signed-in Amp account: ``$AMP_API_KEY`` (an access
token, for scripts) or the key ``amp login`` saves in ``~/.local/share/amp/secrets.json``
(under ``$XDG_DATA_HOME`` when set), as its documentation says; this is not checked against
a real binary.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..auth import AuthContext, AuthReading, Looked, home
from ..base import EnvPolicy
from ..cli_adapter import SUPPORT_DIR, CliAdapter
from ..parsers import Parsed, json_objects, nonblank, tail

LOGIN_FIX = "amp login"


def parse(stdout: str, stderr: str) -> Parsed:
    # amp's --stream-json follows claude's stream format: the last line is the result.
    for obj in reversed(json_objects(stdout)):
        if obj.get("type") != "result":
            continue
        result = obj.get("result")
        if obj.get("is_error") or obj.get("subtype") not in (None, "success"):
            return Parsed(None, f"amp reported an error: {tail(str(result or obj))}")
        text = nonblank(result)
        return Parsed(text) if text else Parsed(None, "amp returned an empty result")
    return Parsed(None, f"no result in amp output: {tail(stdout or stderr)}")


async def auth(ctx: AuthContext) -> AuthReading:
    """An access token in the environment, else the saved login; files and names only."""
    looked = Looked(ctx.env)
    if looked.var("AMP_API_KEY"):
        return looked.reading("ready", "AMP_API_KEY is set")
    data = Path(looked.env.get("XDG_DATA_HOME") or home(looked.env) / ".local" / "share")
    secrets = data / "amp" / "secrets.json"
    if looked.file(secrets):
        return looked.reading("ready", f"a login is saved in {secrets}")
    return looked.reading(
        "logged-out", f"AMP_API_KEY is unset and no login is saved in {secrets}", LOGIN_FIX
    )


ADAPTER = CliAdapter(
    name="amp",
    executable="amp",
    model_family="unknown",
    family_confidence="unknown",
    args=("--execute", "--stream-json", "--settings-file", f"{SUPPORT_DIR}/settings.json"),
    env=EnvPolicy(prefixes=("AMP_",)),
    parse=parse,
    # Read-only the documented way: a permission rule that rejects every tool call.
    support_files={
        "settings.json": json.dumps({"amp.permissions": [{"tool": "*", "action": "reject"}]})
    },
    wrapper=True,
    verified="docs only",
    auth=auth,
)
