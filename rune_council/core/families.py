"""Which model family a model id speaks for: the one classifier every voice source uses.

The decorrelation stamp counts families, so a CLI voice, a wrapper CLI's configured backend
and an endpoint's model must be sorted by one rule. The rule: the maker of the weights
decides the family, never the host or router serving them. A Mistral model served by
NVIDIA is ``mistral``; a model published as a fine-tune of another maker's base, when its id
names that base (``nvidia/llama-3.1-nemotron-70b-instruct``), counts under the base, since
shared pre-training is what correlates answers.

Ids come in two shapes, and the caller says which (``named_by``):

``"endpoint"``
    An id an endpoint lists (NVIDIA NIM, OpenRouter, vLLM with hub ids, Ollama). The
    segment before the name is the publisher, and only a publisher in ``PUBLISHERS`` is
    evidence. A bare id with no publisher (an Ollama tag such as ``llama3.1:8b``) is the
    server's own name for some weights, which a user can attach to anything: ``unknown``.
``"client"``
    A model a client CLI's own configuration names (aider, opencode, cline). The first
    segment is the client's provider route (``openai/`` in aider means any OpenAI-style
    server), so only the model's name is evidence: ``openai/stub-model`` is ``unknown``.
    A bare name is one the client resolves against the maker's own API (``gpt-4.1``).

In both shapes, a leading router (``openrouter/``, ``nvidia_nim/`` ...) is stripped and the
rest read as the router's catalogue names it, and a local-server route (``ollama/`` ...)
makes the name a local tag, which proves nothing.
"""

from __future__ import annotations

import re
from typing import Literal

from .contract import FamilyConfidence
from .records import record

NamedBy = Literal["endpoint", "client"]

UNKNOWN = "unknown"

# Publisher prefix (lower case) -> family. Families that also have a CLI use the same name
# the CLI declares (anthropic, google, openai, qwen, xai), so an endpoint voice and a CLI
# voice of one maker count once.
PUBLISHERS: dict[str, str] = {
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
    "baidu": "baidu",
    "tiiuae": "tii",
    "snowflake": "snowflake",
    "databricks": "databricks",
    "upstage": "upstage",
    "writer": "writer",
    "bigcode": "bigcode",
    # Hugging Face's own research org publishes the models it trains (SmolLM) under this id;
    # ``huggingface/`` itself is a router (below), the hub serving everyone's models.
    "huggingfacetb": "huggingface",
}

# Routers and hosts that serve other makers' models under the makers' names.
ROUTERS = frozenset(
    {
        "openrouter",
        "nvidia_nim",
        "together_ai",
        "fireworks_ai",
        "deepinfra",
        "groq",
        "bedrock",
        "vertex_ai",
        "azure",
        "azure_ai",
        "huggingface",
        "hf.co",
        "sambanova",
        "cerebras",
    }
)

# Local model servers: the name after them is whatever the user called the weights.
LOCAL_ROUTES = frozenset(
    {"ollama", "ollama_chat", "lm_studio", "lmstudio", "hosted_vllm", "llamafile"}
)

# Model names by the maker that trained them, matched on the name (the last segment,
# lower-cased, without an ``:tag``).
NAMES: dict[str, re.Pattern[str]] = {
    "anthropic": re.compile(r"claude"),
    "openai": re.compile(r"^(gpt-|chatgpt|o[1-9](-|$)|codex)"),
    "google": re.compile(r"gemini|gemma"),
    "qwen": re.compile(r"qwen|qwq"),
    "xai": re.compile(r"grok"),
    "meta": re.compile(r"llama"),
    "mistral": re.compile(
        r"mistral|mixtral|codestral|devstral|magistral|ministral|mathstral|pixtral"
    ),
    "deepseek": re.compile(r"deepseek"),
    "moonshot": re.compile(r"kimi"),
    "zhipu": re.compile(r"^(chat)?glm"),
    "microsoft": re.compile(r"(?:^|[^a-z])phi-?\d"),
    "ibm": re.compile(r"granite"),
    "cohere": re.compile(r"^(command-|c4ai-)"),
    "ai21": re.compile(r"jamba"),
    "huggingface": re.compile(r"smollm"),
}

# Model lines trained from scratch on another maker's architecture, whose names may carry
# that architecture's name: the architecture shares no weights, so it names no base.
# (SmolLM is a Llama-architecture model that Hugging Face pre-trained itself.)
OWN_WEIGHTS: tuple[tuple[re.Pattern[str], str, frozenset[str]], ...] = (
    (re.compile(r"smollm"), "huggingface", frozenset({"meta"})),
)

# Derivatives whose id does not name their base, with the base their maker's card gives.
DERIVATIVES: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (re.compile(r"^wizardlm-2-8x22b"), "mistral", "WizardLM-2 8x22B is tuned from Mixtral 8x22B"),
    (re.compile(r"^mai-ds-r1"), "deepseek", "MAI-DS-R1 is post-trained from DeepSeek-R1"),
    (re.compile(r"^r1-1776"), "deepseek", "R1 1776 is post-trained from DeepSeek-R1"),
    (
        re.compile(r"^openreasoning-nemotron"),
        "qwen",
        "OpenReasoning-Nemotron is distilled into Qwen2.5 base models",
    ),
)

KNOWN_FAMILIES = frozenset(PUBLISHERS.values()) | frozenset(NAMES)


@record(frozen=True)
class FamilyReading:
    family: str
    confidence: FamilyConfidence
    why: str


def _unknown(why: str) -> FamilyReading:
    return FamilyReading(UNKNOWN, "unknown", why)


def _named_families(name: str) -> set[str]:
    found = {family for family, pattern in NAMES.items() if pattern.search(name)}
    for pattern, family, architectures in OWN_WEIGHTS:
        if family in found and pattern.search(name):
            found -= architectures
    return found


def _derivative(name: str) -> tuple[str, str] | None:
    for pattern, family, why in DERIVATIVES:
        if pattern.search(name):
            return family, why
    return None


def _by_publisher(publisher: str, name: str) -> FamilyReading:
    family = PUBLISHERS.get(publisher)
    if family is None:
        return _unknown(f"publisher {publisher!r} is not in the table of known makers")
    bases = _named_families(name) - {family}
    if not bases:
        return FamilyReading(family, "confirmed", f"publisher {publisher!r}")
    if len(bases) == 1:
        (base,) = bases
        return FamilyReading(base, "confirmed", f"{publisher!r} model built on a {base} base")
    return _unknown(f"id names several base models ({', '.join(sorted(bases))})")


def _by_name(name: str) -> FamilyReading:
    families = _named_families(name)
    if len(families) == 1:
        (family,) = families
        return FamilyReading(family, "confirmed", f"model name {name!r}")
    if families:
        # A distillation names its teacher and its base; without a publisher we cannot
        # tell which is which.
        return _unknown(f"model name names several families ({', '.join(sorted(families))})")
    return _unknown(f"model name {name!r} belongs to no known family")


def classify_model(model_id: str, *, named_by: NamedBy = "endpoint") -> FamilyReading:
    """The family ``model_id`` speaks for, how sure that is, and why."""
    segments = [s for s in model_id.strip().lower().split("/") if s]
    if not segments:
        return _unknown("empty model id")
    name = segments[-1].split(":", 1)[0]
    prefixes = segments[:-1]
    routed = False
    if prefixes and prefixes[0] in LOCAL_ROUTES:
        return _unknown(f"{prefixes[0]} serves it under a local name, which any weights can carry")
    if prefixes and prefixes[0] in ROUTERS:
        prefixes, routed = prefixes[1:], True
    elif prefixes and named_by == "client":
        prefixes = prefixes[1:]  # the client's provider route, not a maker
        routed = True
    known = _derivative(name)
    if known is not None and (prefixes or routed or named_by == "client"):
        return FamilyReading(known[0], "confirmed", known[1])
    if prefixes:
        return _by_publisher(prefixes[-1], name)
    if routed or named_by == "client":
        return _by_name(name)
    return _unknown("no publisher in the model id: a server's own name proves nothing")
