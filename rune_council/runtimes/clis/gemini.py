"""Gemini CLI (``gemini``): Google's CLI, plan approval mode, JSON output."""

from __future__ import annotations

import json

from ..base import EnvPolicy
from ..cli_adapter import CliAdapter
from ..parsers import Parsed, json_objects, nonblank, tail


def parse(stdout: str, stderr: str) -> Parsed:
    for obj in reversed(json_objects(stdout)):
        if "error" in obj and obj.get("error"):
            return Parsed(None, f"gemini reported an error: {tail(json.dumps(obj['error']))}")
        response = nonblank(obj.get("response"))
        if response:
            return Parsed(response)
    return Parsed(None, f"no response in gemini output: {tail(stderr or stdout)}")


ADAPTER = CliAdapter(
    name="gemini",
    executable="gemini",
    model_family="google",
    family_confidence="confirmed",
    args=("--approval-mode", "plan", "--skip-trust", "-o", "json"),
    env=EnvPolicy(prefixes=("GEMINI_", "GOOGLE_", "CLOUDSDK_")),
    parse=parse,
)
