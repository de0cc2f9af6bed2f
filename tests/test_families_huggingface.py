"""SmolLM speaks for Hugging Face, which trained it, whatever architecture its name carries."""

from __future__ import annotations

import pytest

from rune_council.core.families import KNOWN_FAMILIES, classify_model


@pytest.mark.parametrize(
    ("model", "named_by"),
    [
        # As an endpoint lists it (our real-model tier's server, vLLM or TGI with hub ids).
        ("HuggingFaceTB/SmolLM2-135M-Instruct", "endpoint"),
        ("HuggingFaceTB/SmolLM3-3B", "endpoint"),
        # Behind the hub's router, which is stripped like any router.
        ("huggingface/HuggingFaceTB/SmolLM2-1.7B-Instruct", "endpoint"),
        # A client config's route, where only the name is evidence.
        ("openai/smollm2-135m-instruct", "client"),
    ],
)
def test_smollm_is_hugging_faces(model: str, named_by: str) -> None:
    reading = classify_model(model, named_by=named_by)  # type: ignore[arg-type]
    assert (reading.family, reading.confidence) == ("huggingface", "confirmed"), reading.why
    assert "huggingface" in KNOWN_FAMILIES


@pytest.mark.parametrize(
    ("model", "named_by"),
    [
        ("HuggingFaceTB/SmolLM2-135M-Instruct-llama-arch", "endpoint"),
        ("openrouter/smollm2-llama-135m", "client"),
    ],
)
def test_the_llama_in_a_smollm_name_is_its_architecture_not_a_meta_base(
    model: str, named_by: str
) -> None:
    # SmolLM is pre-trained from scratch on a Llama architecture: no Meta weights in it.
    reading = classify_model(model, named_by=named_by)  # type: ignore[arg-type]
    assert reading.family == "huggingface", reading.why


def test_the_hub_is_still_no_maker_and_a_llama_it_publishes_is_metas() -> None:
    # huggingface/ routes to other makers' models: the family is theirs, not the hub's.
    assert classify_model("huggingface/meta-llama/Llama-3.1-8B", named_by="client").family == (
        "meta"
    )
    # A Llama fine-tune Hugging Face publishes shares Meta's pre-training.
    assert classify_model("HuggingFaceTB/llama-3.1-8b-tuned").family == "meta"


def test_a_smollm_without_a_known_publisher_is_not_vouched_for() -> None:
    # A re-upload's publisher is no evidence, and a bare local tag proves nothing.
    assert classify_model("someone/SmolLM2-135M-Instruct-GGUF").family == "unknown"
    assert classify_model("smollm2:135m").family == "unknown"
    assert classify_model("ollama/smollm2:135m", named_by="client").family == "unknown"


def test_gemma_stays_googles() -> None:
    assert classify_model("google/gemma-3-270m").family == "google"
