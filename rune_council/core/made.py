"""Models of values this program made itself, taken as they are, and written as they are.

Validation is for what comes in: a request, a voice's answer, a file on disk, an
endpoint's reply. A model the council fills from values it produced and typed itself (a
voice's slot, a run event, a prompt count, a cluster's match) would only be checked against
what its own code already guarantees, and checking it means building that model's
validator, which in a short-lived process costs more than the council's own logic (each
model's schema is generated on first use). ``made`` takes such values as they are
(pydantic's ``model_construct``): defaults and default factories apply, nothing is
converted or copied, so every value must already have its field's type and be a fresh
object the caller does not keep changing elsewhere.

Writing is the same story from the other side. Serializing a model through pydantic builds
its whole schema first, and ``CouncilResult``'s covers every contract model: the largest
single cost of a short council process, paid for a serializer whose job on these models is
plain (the contract declares no aliases, exclusions, computed fields or custom serializers,
and ``tests/test_made_json.py`` fails the day one does). ``made_json`` walks a model's
fields in their declared order into plain values and hands those to pydantic-core's own
JSON writer, so the text is byte for byte what ``model_dump_json`` prints; a process that
writes much more than a single pass does builds the serializer after all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel
from pydantic_core import to_json

M = TypeVar("M", bound=BaseModel)


def made(model: type[M], /, **fields: Any) -> M:
    """``model`` holding ``fields``, which this program produced with their declared types."""
    given = set(fields)
    for name, factory in _factories(model):
        if name not in given:
            fields[name] = factory()
    # The fields set are the caller's, as model_construct alone would record them.
    return model.model_construct(given, **fields)


def empty(model: type[M]) -> Callable[[], M]:
    """A default factory for ``model`` with nothing set: every field at its own default."""

    def nothing_set() -> M:
        return made(model)

    return nothing_set


# pydantic's model_construct asks every default factory it calls whether it takes the
# validated data, by reading the factory's signature, on every call (about 20 us a factory,
# several per model: most of what making a run file's slots costs). Which factories a model
# has, and that none takes data, is looked up once a class; a factory that does take it is
# left to model_construct.
_FACTORIES: dict[type[BaseModel], tuple[tuple[str, Callable[[], Any]], ...]] = {}


def _factories(model: type[BaseModel]) -> tuple[tuple[str, Callable[[], Any]], ...]:
    known = _FACTORIES.get(model)
    if known is None:
        known = _FACTORIES[model] = tuple(
            (name, info.default_factory)  # type: ignore[misc]
            for name, info in model.__pydantic_fields__.items()
            if info.default_factory is not None and not info.default_factory_takes_validated_data
        )
    return known


# Values written as they are: checked by exact type first, the common case by far.
_LEAVES = frozenset({str, int, float, bool, type(None)})


def plain(value: Any) -> Any:
    """``value`` with every model in it turned into a dict of its fields, in field order."""
    kind = type(value)
    if kind in _LEAVES:
        return value
    if isinstance(value, BaseModel):
        held = value.__dict__
        return {
            name: item if type(item := held[name]) in _LEAVES else plain(item)
            for name in kind.__pydantic_fields__
        }
    if isinstance(value, list | tuple):
        return [item if type(item) in _LEAVES else plain(item) for item in value]
    if isinstance(value, dict):
        return {key: item if type(item) in _LEAVES else plain(item) for key, item in value.items()}
    return value


# Walking costs a few microseconds a kilobyte every time; building a model's serializer
# costs tens of milliseconds once. A process that has walked this many characters of one
# model's text (a long deliberation rewriting a large run file) builds its serializer and
# uses it from then on; a single pass stays far below it.
WALK_BUDGET = 1_000_000
_walked: dict[type[BaseModel], int] = {}


def made_json(model: BaseModel, *, indent: int | None = None) -> str:
    """The JSON text ``model.model_dump_json(indent=indent)`` gives, without its schema
    while that is cheaper (``WALK_BUDGET``), through it once it is built.

    Infinities and NaN become null, as pydantic's default writes them; a value of a type
    JSON has no form for raises, as pydantic's serializer would."""
    kind = type(model)
    if kind.__pydantic_complete__:
        return model.model_dump_json(indent=indent)
    text = to_json(plain(model), indent=indent, inf_nan_mode="null").decode("utf-8")
    walked = _walked[kind] = _walked.get(kind, 0) + len(text)
    if walked > WALK_BUDGET:
        kind.model_rebuild()
    return text
