"""Generate the committed JSON Schemas from the contract models.

``python -m rune_council.core.schema`` rewrites ``contracts/*.schema.json``; a test regenerates
them in memory and fails when the committed files drift from the models.

``wire_schema`` is the form of a schema sent to a model server as an output constraint
(``response_format``, ``codex exec --output-schema``): the same shape, written in the small
part of JSON Schema that strict structured outputs and schema-to-grammar converters share.
``contracts/voice-answer.wire.schema.json`` is the voice answer's, committed like the rest,
and a copy of it ships inside the package (``PACKAGED_WIRE``): a council with endpoint voices
reads that file instead of generating the schema from the models in every process.
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


# --------------------------------------------------------------------------- wire form

# What the wire form keeps of each subschema. Everything else pydantic writes (titles,
# defaults, string lengths) is left to the contract check that every answer still passes:
# OpenAI's strict mode refuses some of it, and node-llama-cpp's converter reads an
# ``anyOf`` (which pydantic writes for every optional field) as plain ``null``, so a model
# held to the raw schema could only ever answer ``null`` there.
_WIRE_KEYS = frozenset(
    {
        "type",
        "enum",
        "description",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "maxItems",
    }
)
_WIRE_TYPES = frozenset({"string", "integer", "number", "boolean", "object", "array"})


class WireSchemaError(ValueError):
    """A contract schema uses a construct the wire form has no faithful way to say."""


def _inline(node: Any, defs: dict[str, Any], where: str) -> Any:
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        ref = node["$ref"]
        prefix = "#/$defs/"
        if not isinstance(ref, str) or not ref.startswith(prefix) or ref[len(prefix) :] not in defs:
            raise WireSchemaError(f"{where}: reference {ref!r} is not to a local definition")
        if len(node) > 1:
            raise WireSchemaError(f"{where}: a reference with keywords beside it")
        return _inline(defs[ref[len(prefix) :]], defs, where)
    if "anyOf" in node:
        return _nullable(node, defs, where)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {k: _inline(v, defs, f"{where}.{k}") for k, v in value.items()}
        elif key == "items":
            out[key] = _inline(value, defs, f"{where}[]")
        elif key in _WIRE_KEYS:
            out[key] = value
        elif key in {"oneOf", "allOf", "not", "patternProperties", "prefixItems", "const"}:
            raise WireSchemaError(f"{where}: {key} has no wire form here")
    kind = out.get("type")
    if kind not in _WIRE_TYPES:
        raise WireSchemaError(f"{where}: type {kind!r} is not one the wire form writes")
    if kind == "object":
        # Strict structured outputs want every property listed and nothing else allowed;
        # an optional field is written as one that may be null (see ``_nullable``).
        out["required"] = list(out.get("properties", {}))
        out["additionalProperties"] = False
    return out


def _nullable(node: dict[str, Any], defs: dict[str, Any], where: str) -> dict[str, Any]:
    """``anyOf: [X, null]`` as ``X`` whose type also allows null: the one spelling of an
    optional value that OpenAI's strict mode, llama.cpp and node-llama-cpp all read."""
    options = node["anyOf"]
    others = [o for o in options if o != {"type": "null"}]
    if len(options) != 2 or len(others) != 1:
        raise WireSchemaError(f"{where}: anyOf other than one type or null")
    inner: dict[str, Any] = _inline(others[0], defs, where)
    if inner["type"] in {"object", "array"}:
        raise WireSchemaError(f"{where}: an optional {inner['type']} has no wire form here")
    inner["type"] = [inner["type"], "null"]
    if "enum" in inner:
        inner["enum"] = [*inner["enum"], None]
    return inner


def wire_schema(name: str) -> dict[str, Any]:
    """The schema ``name`` as an output constraint: ``$defs`` inlined, every optional field
    a nullable required one, keys in the models' field order (a grammar writes them in that
    order, so a model states the question before its stance and its claims). Anything it
    accepts the contract accepts too, except string lengths, which the contract checks."""
    schema = SCHEMAS[name].model_json_schema(mode="validation")
    defs = schema.get("$defs", {})
    out: dict[str, Any] = _inline({k: v for k, v in schema.items() if k != "$defs"}, defs, name)
    return out


WIRE_SCHEMAS = ("voice-answer",)
# The wire schemas a council sends, shipped as package data; the same bytes as in contracts/.
PACKAGED_WIRE = {n: Path(__file__).with_name(f"{n}.wire.schema.json") for n in WIRE_SCHEMAS}


def render_wire_schema(name: str) -> str:
    return json.dumps(wire_schema(name), indent=2) + "\n"


def write_all(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name in SCHEMAS:
        path = directory / f"{name}.schema.json"
        path.write_text(render_schema(name), encoding="utf-8")
        written.append(path)
    for name in WIRE_SCHEMAS:
        for path in (directory / f"{name}.wire.schema.json", PACKAGED_WIRE[name]):
            path.write_text(render_wire_schema(name), encoding="utf-8")
            written.append(path)
    return written


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("contracts")
    for p in write_all(target):
        print(p)
