"""The OpenAPI document, built from the contract models, the intake's ask and the API's own
bodies: the body of ``POST /v1/councils`` is the schema every door's ask has, as a caller
who is not the operator may send it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from ..analytics.aggregate import Stats
from ..core.contract import SCHEMA_VERSION, CouncilResult
from ..council.intake import ask_schema
from .models import (
    Accepted,
    CancelResult,
    ChainView,
    Health,
    Problem,
    RunPage,
    RuntimesView,
    StatsView,
)

_REF = "#/components/schemas/{model}"
# The body's component name: what a caller asks of a council, by any door.
ASK = "CouncilAsk"


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": _REF.format(model=model.__name__)}


def _json(model: type[BaseModel], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(model)}}}


def _problem(description: str) -> dict[str, Any]:
    return _json(Problem, description)


_RUN_ID = {
    "name": "run_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"},
}


# The two forms of the body, as a caller writes them.
_EXAMPLES = {
    "flat": {
        "summary": "The question and its options at the top level",
        "value": {
            "question": "Should we adopt a microservices architecture?",
            "multi_round": {"max_rounds": 2},
        },
    },
    "nested": {
        "summary": "A whole PerspectiveRequest, options beside it",
        "value": {
            "request": {"question": "Should we shard the orders table?", "n": 3},
            "template": "security-review",
            "artifact": {"name": "plan.md", "text": "1. Split orders by customer_id."},
        },
    },
    "chain": {
        "summary": "A chain: a red team, then a council told its risk register",
        "value": {"question": "Should we ship the new login flow?", "chain": "red-team-first"},
    },
}

_SINCE = {
    "name": "since",
    "in": "query",
    "required": False,
    "description": "Only runs started in this window (30d, 12w, 36h) or since a date.",
    "schema": {"type": "string"},
}


def _with_ask(defs: dict[str, Any]) -> dict[str, Any]:
    """The components with the ask and its definitions added; a name both use must mean
    the same schema (a model shared with the run file, as the request's parts are)."""
    ask = ask_schema(trusted_caller=False, ref_template=_REF)
    own: dict[str, Any] = ask.pop("$defs", {})
    for name, schema in own.items():
        if name in defs and defs[name] != schema:
            raise AssertionError(f"the ask's {name} differs from the document's")
    return {**defs, **own, ASK: ask}


def document(version: str) -> dict[str, Any]:
    models: list[type[BaseModel]] = [
        Accepted,
        ChainView,
        CouncilResult,
        RunPage,
        Problem,
        CancelResult,
        RuntimesView,
        Health,
        Stats,
        StatsView,
    ]
    _, defs = models_json_schema([(m, "serialization") for m in models], ref_template=_REF)
    auth: list[dict[str, list[str]]] = [{"bearer": []}]
    busy = {
        "description": "Every council slot and queue place is taken; retry after Retry-After.",
        "headers": {"Retry-After": {"schema": {"type": "integer"}}},
        "content": {"application/json": {"schema": _ref(Problem)}},
    }
    paths: dict[str, Any] = {
        "/v1/councils": {
            "post": {
                "summary": "Convene a council",
                "description": "Takes the ask every door takes: the question and its "
                'options at the top level (`{"question": "...", "multi_round": '
                '{"max_rounds": 2}}`), or a whole PerspectiveRequest under `request` with '
                "options beside it (not both a question and a request). A template fills "
                "what the ask leaves out; a chain runs several councils in order. An unknown "
                "key is refused, naming the closest valid one. The council runs in the "
                "background (queued first when every slot is busy).",
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {"$ref": _REF.format(model=ASK)},
                            "examples": _EXAMPLES,
                        }
                    },
                },
                "responses": {
                    "202": {
                        **_json(
                            Accepted,
                            "Accepted; Location names the run file, or for a chain the list "
                            "of its runs. notes says where the council differs from the ask.",
                        ),
                        "headers": {"Location": {"schema": {"type": "string"}}},
                    },
                    "401": _problem("Missing or wrong bearer token."),
                    "409": _problem("The run id is already used."),
                    "413": _problem("The body is larger than the server accepts."),
                    "415": _problem("The body is not declared Content-Type: application/json."),
                    "422": _problem(
                        "The body is not a valid ask (nor JSON within the size and nesting "
                        "limits): an unknown key (the closest valid one is named), a bad "
                        "value, a question and a request both, no known template or chain; "
                        "the error starts with the key at fault, and fields lists each."
                    ),
                    "429": busy,
                },
            },
            "get": {
                "summary": "Recent runs, newest first",
                "parameters": [
                    {"name": "status", "in": "query", "schema": {"type": "string"}},
                    {
                        "name": "stamp",
                        "in": "query",
                        "schema": {"enum": ["MULTI_FAMILY", "NO_DECORRELATION"]},
                    },
                    {"name": "limit", "in": "query", "schema": {"type": "integer", "default": 20}},
                    {"name": "offset", "in": "query", "schema": {"type": "integer", "default": 0}},
                ],
                "responses": {"200": _json(RunPage, "One page of runs.")},
            },
        },
        "/v1/councils/{run_id}": {
            "get": {
                "summary": "The run file",
                "parameters": [_RUN_ID],
                "responses": {
                    "200": _json(CouncilResult, f"The run file (contract {SCHEMA_VERSION})."),
                    "400": _problem("Not a valid run id."),
                    "404": _problem("No such run."),
                },
            }
        },
        "/v1/councils/{run_id}/events": {
            "get": {
                "summary": "Server-Sent Events of every transition",
                "description": "Frames: status, transition (id = event seq), stalled, end "
                "(final status or abandoned). Send Last-Event-ID to resume. A run this "
                "server holds but has not written yet (a chain's later step) is waited "
                "for: status queued first, end not-run if the chain stops before it.",
                "parameters": [
                    _RUN_ID,
                    {"name": "Last-Event-ID", "in": "header", "schema": {"type": "integer"}},
                ],
                "responses": {
                    "200": {
                        "description": "An event stream.",
                        "content": {"text/event-stream": {"schema": {"type": "string"}}},
                    },
                    "404": _problem("No such run."),
                },
            }
        },
        "/v1/councils/{run_id}/cancel": {
            "post": {
                "summary": "Cancel a council this server runs",
                "parameters": [_RUN_ID],
                "responses": {
                    "200": _json(CancelResult, "The status the run file ended with."),
                    "404": _problem("No such run."),
                    "409": _problem("The run already ended, or another process runs it."),
                },
            }
        },
        "/v1/chains/{run_id}": {
            "get": {
                "summary": "A chain's runs, in order",
                "description": "Each step's template, run id, status (queued until its "
                "run file is written) and where to read and follow it.",
                "parameters": [_RUN_ID],
                "responses": {
                    "200": _json(ChainView, "The chain's runs."),
                    "400": _problem("Not a valid run id."),
                    "404": _problem("No chain of that id."),
                },
            }
        },
        "/v1/runtimes": {
            "get": {
                "summary": "What DETECT found, and the endpoints a council may name",
                "responses": {"200": _json(RuntimesView, "Runtimes and endpoint names.")},
            }
        },
        "/v1/stats": {
            "get": {
                "summary": "Statistics over the run history (rune council stats --json)",
                "parameters": [_SINCE],
                "responses": {
                    "200": _json(Stats, "Consensus, families, runtimes, deliberation."),
                    "400": _problem("since is neither a span nor a date."),
                },
            }
        },
        "/v1/stats/tables": {
            "get": {
                "summary": "The same statistics as the tables the stats page shows",
                "parameters": [_SINCE],
                "responses": {
                    "200": _json(StatsView, "Tables and the pictures' addresses."),
                    "400": _problem("since is neither a span nor a date."),
                },
            }
        },
        "/v1/stats/pictures/{name}": {
            "get": {
                "summary": "One statistics picture as PNG",
                "parameters": [
                    {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}},
                    _SINCE,
                ],
                "responses": {
                    "200": {"description": "The picture.", "content": {"image/png": {}}},
                    "404": _problem("No picture of that name."),
                    "501": _problem("matplotlib (rune-council[analytics]) is not installed."),
                },
            }
        },
        "/healthz": {
            "get": {
                "summary": "Liveness and load",
                "security": [],
                "responses": {"200": _json(Health, "The server is up.")},
            }
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "rune-council",
            "version": version,
            "description": "Convene councils of independent AI voices and follow their run "
            f"files. Run files follow voice contract {SCHEMA_VERSION}. Every request must "
            "carry a Host the server answers to (400 otherwise) and, from a browser, the "
            "server's own Origin (403 otherwise); bodies are application/json only (415).",
        },
        "paths": paths,
        "components": {
            "schemas": _with_ask(defs["$defs"]),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": auth,
    }
