"""amp: a wrapper CLI in execute mode with a settings file that rejects every tool.

amp picks its models itself, per task, so no configuration names its backend: it always
stays ``unknown``.
"""

from __future__ import annotations

import json

from ..base import EnvPolicy
from ..cli_adapter import SUPPORT_DIR, CliAdapter
from ..parsers import Parsed, json_objects, nonblank, tail


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
)
