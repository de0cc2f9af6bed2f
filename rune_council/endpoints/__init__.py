"""OpenAI-compatible HTTP endpoints as council voices (NVIDIA NIM, Ollama, vLLM, OpenRouter).

``load_setup`` reads the endpoints ``council.toml`` names, ``setup_from_options`` builds a
run's choice from command-line flags, ``assemble`` turns either into runtimes for the
orchestrator, and ``resolve_model`` gives later stages one endpoint model to ``complete()``
prompts with.
"""

from __future__ import annotations

from .assembly import Assembly, Survey, assemble, resolve_model, survey
from .config import (
    PRESETS,
    EndpointSetup,
    EndpointSpec,
    ModelRef,
    configured_endpoints,
    load_setup,
    model_ref_from_section,
    setup_from_options,
    spec_from_argument,
)
from .families import family_of
from .ranking import rank_models

__all__ = [
    "PRESETS",
    "Assembly",
    "EndpointSetup",
    "EndpointSpec",
    "ModelRef",
    "Survey",
    "assemble",
    "configured_endpoints",
    "family_of",
    "load_setup",
    "model_ref_from_section",
    "rank_models",
    "resolve_model",
    "setup_from_options",
    "spec_from_argument",
    "survey",
]
