"""Generate the committed JSON Schemas from the contract models.

``python -m rune_council.schema`` rewrites ``contracts/*.schema.json``; a test regenerates
them in memory and fails when the committed files drift from the models.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from .contract import SCHEMA_VERSION, CouncilResult, PerspectiveRequest, RuntimesFile, VoiceAnswer

SCHEMAS: dict[str, type[BaseModel]] = {
    "perspective-request": PerspectiveRequest,
    "voice-answer": VoiceAnswer,
    "council-result": CouncilResult,
    "runtimes": RuntimesFile,
}


def schema_for(name: str) -> dict[str, Any]:
    model = SCHEMAS[name]
    schema = model.model_json_schema(mode="serialization")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"rune-council/{name}/v{SCHEMA_VERSION}",
        **schema,
    }


def render_schema(name: str) -> str:
    return json.dumps(schema_for(name), indent=2, sort_keys=True) + "\n"


def write_all(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name in SCHEMAS:
        path = directory / f"{name}.schema.json"
        path.write_text(render_schema(name), encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("contracts")
    for p in write_all(target):
        print(p)
