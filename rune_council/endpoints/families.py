"""Which model family an endpoint model id speaks for.

Hosted catalogues (NVIDIA NIM, OpenRouter, vLLM with hub ids) name models ``vendor/model``.
A known vendor prefix is the only thing we treat as evidence: the family is ``confirmed``
for those and ``unknown`` for everything else, so a local tag such as ``llama3.1:8b`` (which a
user can attach to any weights) never inflates the decorrelation count.

A vendor that publishes a fine-tune of someone else's base model usually says so in the
name (``nvidia/llama-3.1-nemotron-70b-instruct``, ``deepseek-ai/deepseek-r1-distill-qwen-32b``).
Such a model shares its base model's pre-training, which is what correlates answers, so it
is counted under the base model's family, not the publisher's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..contract import FamilyConfidence

# Vendor prefix (lower case) -> family. Families that also have a CLI use the CLI's name
# (anthropic, google, openai) so an endpoint voice and a CLI voice of one family collide.
VENDOR_FAMILIES: dict[str, str] = {
    "meta": "meta",
    "meta-llama": "meta",
    "facebook": "meta",
    "mistralai": "mistral",
    "nv-mistralai": "mistral",
    "mistral": "mistral",
    "qwen": "qwen",
    "alibaba": "qwen",
    "deepseek-ai": "deepseek",
    "deepseek": "deepseek",
    "google": "google",
    "nvidia": "nvidia",
    "microsoft": "microsoft",
    "openai": "openai",
    "anthropic": "anthropic",
    "ibm": "ibm",
    "ibm-granite": "ibm",
    "x-ai": "xai",
    "xai": "xai",
    "cohere": "cohere",
    "coherelabs": "cohere",
    "01-ai": "01-ai",
    "moonshotai": "moonshot",
    "zhipuai": "zhipu",
    "thudm": "zhipu",
    "z-ai": "zhipu",
    "ai21labs": "ai21",
    "minimaxai": "minimax",
    "minimax": "minimax",
    "baichuan-inc": "baichuan",
    "tiiuae": "tii",
    "snowflake": "snowflake",
    "databricks": "databricks",
    "upstage": "upstage",
    "writer": "writer",
}

# Base-model names that show up inside a derivative's id, by the family that trained them.
_BASE_MODELS: dict[str, re.Pattern[str]] = {
    "meta": re.compile(r"llama"),
    "mistral": re.compile(r"mistral|mixtral|codestral|ministral|mathstral|pixtral"),
    "qwen": re.compile(r"qwen|qwq"),
    "google": re.compile(r"gemma|gemini"),
    "microsoft": re.compile(r"(?:^|[^a-z])phi-?\d"),
    "deepseek": re.compile(r"deepseek"),
    "ibm": re.compile(r"granite"),
}


@dataclass(frozen=True)
class FamilyReading:
    family: str
    confidence: FamilyConfidence
    why: str


def family_of(model_id: str) -> FamilyReading:
    vendor, sep, name = model_id.strip().partition("/")
    if not sep:
        return FamilyReading("unknown", "unknown", "no vendor prefix in the model id")
    publisher = VENDOR_FAMILIES.get(vendor.lower())
    if publisher is None:
        return FamilyReading("unknown", "unknown", f"vendor prefix {vendor!r} is not known")
    lowered = name.lower()
    bases = {f for f, pattern in _BASE_MODELS.items() if pattern.search(lowered)} - {publisher}
    if not bases:
        return FamilyReading(publisher, "confirmed", f"vendor prefix {vendor!r}")
    if len(bases) == 1:
        (base,) = bases
        return FamilyReading(base, "confirmed", f"{vendor!r} model built on a {base} base model")
    return FamilyReading(
        "unknown", "unknown", f"id names several base models ({', '.join(sorted(bases))})"
    )
