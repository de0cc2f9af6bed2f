"""OpenAI-compatible HTTP endpoints as council voices (NVIDIA NIM, Ollama, vLLM, OpenRouter).

``load_setup`` reads the endpoints ``council.toml`` names, ``setup_from_options`` builds a
run's choice from command-line flags, ``assemble`` turns either into runtimes for the
orchestrator, and ``resolve_model`` gives later stages one endpoint model to ``complete()``
prompts with.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .assembly import Assembly, Survey, assemble, resolve_model, survey
    from .config import (
        PRESETS,
        EndpointSetup,
        EndpointSpec,
        ModelRef,
        configured_endpoints,
        endpoints_from_config,
        load_setup,
        model_ref_from_section,
        setup_from_options,
        spec_from_argument,
        subagent_from_config,
        untrusted_endpoints,
    )
    from .ranking import rank_models

# Loaded on first use: most councils configure no endpoint, and the HTTP client behind
# ``assembly`` should not cost every ``rune council`` start-up.
_HOME = {
    "Assembly": "assembly",
    "Survey": "assembly",
    "assemble": "assembly",
    "resolve_model": "assembly",
    "survey": "assembly",
    "PRESETS": "config",
    "EndpointSetup": "config",
    "EndpointSpec": "config",
    "ModelRef": "config",
    "configured_endpoints": "config",
    "endpoints_from_config": "config",
    "subagent_from_config": "config",
    "untrusted_endpoints": "config",
    "load_setup": "config",
    "model_ref_from_section": "config",
    "setup_from_options": "config",
    "spec_from_argument": "config",
    "rank_models": "ranking",
}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{_HOME[name]}", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "PRESETS",
    "Assembly",
    "EndpointSetup",
    "EndpointSpec",
    "ModelRef",
    "Survey",
    "assemble",
    "configured_endpoints",
    "endpoints_from_config",
    "load_setup",
    "model_ref_from_section",
    "rank_models",
    "resolve_model",
    "setup_from_options",
    "spec_from_argument",
    "subagent_from_config",
    "survey",
    "untrusted_endpoints",
]
