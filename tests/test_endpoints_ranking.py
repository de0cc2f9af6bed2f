"""Families from model ids, and which models an endpoint offers the council in which order."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from rune_council.core.families import classify_model
from rune_council.endpoints import rank_models
from rune_council.runtimes.http import ModelChoice

# Model ids as NVIDIA's catalogue, OpenRouter and Ollama list them. The base model behind each
# derivative is the one its publisher's model card names (e.g. NVIDIA's card for
# llama-3.1-nemotron-70b-instruct: "built on Llama-3.1-70B-Instruct"; DeepSeek's R1 distills
# are fine-tunes of Qwen2.5 and Llama 3 checkpoints).
FAMILIES = [
    ("meta/llama-3.3-70b-instruct", "meta", "confirmed"),
    ("meta-llama/llama-3.1-405b-instruct", "meta", "confirmed"),
    ("mistralai/mixtral-8x22b-instruct-v0.1", "mistral", "confirmed"),
    ("qwen/qwen2.5-coder-32b-instruct", "qwen", "confirmed"),
    ("qwen/qwq-32b", "qwen", "confirmed"),
    ("deepseek-ai/deepseek-r1", "deepseek", "confirmed"),
    ("google/gemma-2-27b-it", "google", "confirmed"),
    ("nvidia/nemotron-4-340b-instruct", "nvidia", "confirmed"),
    ("microsoft/phi-3-medium-128k-instruct", "microsoft", "confirmed"),
    ("openai/gpt-4o", "openai", "confirmed"),
    ("anthropic/claude-3.5-sonnet", "anthropic", "confirmed"),
    # Derivatives count under the base model's family, not the publisher's.
    ("nvidia/llama-3.1-nemotron-70b-instruct", "meta", "confirmed"),
    ("nvidia/mistral-nemo-minitron-8b-8k-instruct", "mistral", "confirmed"),
    ("deepseek-ai/deepseek-r1-distill-qwen-32b", "qwen", "confirmed"),
    ("deepseek-ai/deepseek-r1-distill-llama-8b", "meta", "confirmed"),
    # Unknown vendors and bare local tags say nothing we can rely on.
    ("nousresearch/hermes-3-llama-3.1-405b", "unknown", "unknown"),
    ("llama3.1:8b", "unknown", "unknown"),
    ("qwen2.5:7b-instruct", "unknown", "unknown"),
    ("gpt-4o-mini", "unknown", "unknown"),
]


@pytest.mark.parametrize(("model", "family", "confidence"), FAMILIES)
def test_family_comes_from_a_known_vendor_prefix_only(
    model: str, family: str, confidence: str
) -> None:
    reading = classify_model(model)
    assert (reading.family, reading.confidence) == (family, confidence)
    assert reading.why


NIM_LIKE = [
    "nvidia/nv-embedqa-e5-v5",
    "meta/llama-3.1-8b-instruct",
    "baai/bge-m3",
    "mistralai/mistral-large-2-instruct",
    "nvidia/llama-3.2-nv-rerankqa-1b-v2",
    "qwen/qwen2.5-72b-instruct",
    "meta/llama-guard-4-12b",
    "google/gemma-2-27b-it",
    "snowflake/arctic-embed-l",
    "meta/llama-3.3-70b-instruct",
]


def ids(models: Sequence[ModelChoice]) -> list[str]:
    return [m.model for m in models]


def test_embedding_reranking_and_guard_models_never_sit() -> None:
    ranked = ids(rank_models(NIM_LIKE))
    assert ranked == [
        "meta/llama-3.1-8b-instruct",
        "mistralai/mistral-large-2-instruct",
        "qwen/qwen2.5-72b-instruct",
        "google/gemma-2-27b-it",
        "meta/llama-3.3-70b-instruct",
    ]
    # Not even when a user names one.
    forced = rank_models(NIM_LIKE, prefer=["nvidia/nv-embedqa-e5-v5"], configured=["baai/bge-m3"])
    assert "nvidia/nv-embedqa-e5-v5" not in ids(forced)
    assert "baai/bge-m3" not in ids(forced)


def test_preferences_first_then_configured_order_then_the_servers_order() -> None:
    ranked = rank_models(
        NIM_LIKE,
        prefer=["google/*", "meta/llama-3.3-70b-instruct"],
        exclude=["meta/llama-3.1-8b-instruct"],
        configured=["qwen/qwen2.5-72b-instruct", "deepseek-ai/deepseek-r1"],
    )
    assert ids(ranked) == [
        "google/gemma-2-27b-it",
        "meta/llama-3.3-70b-instruct",
        "qwen/qwen2.5-72b-instruct",
        # Configured but not listed by the server: the user named it, so it stays.
        "deepseek-ai/deepseek-r1",
        "mistralai/mistral-large-2-instruct",
    ]
    assert [m.family for m in ranked] == ["google", "meta", "qwen", "deepseek", "mistral"]


def test_exclusions_take_globs_and_beat_preferences() -> None:
    ranked = rank_models(NIM_LIKE, prefer=["meta/*"], exclude=["meta/*", "*large*"])
    assert ids(ranked) == ["qwen/qwen2.5-72b-instruct", "google/gemma-2-27b-it"]


def test_duplicates_and_blank_ids_are_ignored() -> None:
    ranked = rank_models(["meta/a", " meta/a ", "", "qwen/b", "meta/a"])
    assert ids(ranked) == ["meta/a", "qwen/b"]
