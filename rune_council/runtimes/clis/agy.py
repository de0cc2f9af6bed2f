"""agy (Antigravity): Google's agent CLI in print mode inside its sandbox; plain-text output."""

from __future__ import annotations

from ..base import EnvPolicy
from ..cli_adapter import CliAdapter
from ..parsers import parse_plain_text

ADAPTER = CliAdapter(
    name="agy",
    executable="agy",
    model_family="google",
    family_confidence="confirmed",
    args=("--print", "--sandbox"),
    env=EnvPolicy(prefixes=("AGY_", "ANTIGRAVITY_", "GEMINI_", "GOOGLE_")),
    parse=parse_plain_text,
    verified="docs only",
)
