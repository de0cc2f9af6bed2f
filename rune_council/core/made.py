"""Models of values this program made itself, taken as they are.

Validation is for what comes in: a request, a voice's answer, a file on disk, an
endpoint's reply. A model the council fills from values it produced and typed itself (a
voice's slot, a run event, a prompt count, a cluster's match) would only be checked against
what its own code already guarantees, and checking it means building that model's
validator, which in a short-lived process costs more than the council's own logic (each
model's schema is generated on first use). ``made`` takes such values as they are
(pydantic's ``model_construct``): defaults and default factories apply, nothing is
converted or copied, so every value must already have its field's type and be a fresh
object the caller does not keep changing elsewhere.

What the model writes is the same either way: a run file or ``--json`` is serialized by the
``CouncilResult`` that holds these models, whose schema covers them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


def made(model: type[M], /, **fields: Any) -> M:
    """``model`` holding ``fields``, which this program produced with their declared types."""
    return model.model_construct(**fields)


def empty(model: type[M]) -> Callable[[], M]:
    """A default factory for ``model`` with nothing set: every field at its own default."""
    return model.model_construct
