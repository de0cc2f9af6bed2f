"""grok: xAI's CLI. Detected so the report can say why it is never dispatched."""

from __future__ import annotations

from ..base import EnvPolicy
from ..cli_adapter import CliAdapter
from ..parsers import parse_plain_text

ADAPTER = CliAdapter(
    name="grok",
    executable="grok",
    model_family="xai",
    family_confidence="confirmed",
    args=(),
    env=EnvPolicy(prefixes=("GROK_", "XAI_")),
    parse=parse_plain_text,
    ineligible=(
        "takes the prompt only as a command-line argument (visible to every local user in "
        "ps) and approves every tool, shell included, in headless mode: no read-only mode"
    ),
)
