"""``@record``: a dataclass whose methods are generated the first time the class is used.

``dataclasses.dataclass`` writes and compiles a class's ``__init__``, ``__repr__``, ``__eq__``
(and ``__hash__``, ``__setattr__``, ``__delattr__`` when frozen) as the class is defined: some
0.2-0.5 ms a class, paid by every process that imports the module, whether or not it ever
makes one (a single pass imports about sixty such classes and makes forty). ``@record(...)``
takes the same arguments and gives exactly the same class, by calling ``dataclass`` itself,
but on first use: the first instance made (its ``__init__``, or the state ``copy`` and
unpickling hand an instance they made without it), or the first look at its fields
(``dataclasses.fields``, ``is_dataclass``, ``replace``, ``asdict``, a dataclass subclass,
pydantic). Until then no instance exists, so nothing can tell it from a dataclass by what
its instances do.

The type checker sees ``dataclasses.dataclass`` itself. A class that needs its generated
methods before any instance exists (one under ``functools.total_ordering``) is written with
``dataclass``; one that defines its own ``__new__``, ``__init__`` or ``__setstate__``, or asks
for ``slots`` (for which ``dataclass`` makes a new class), is made at once, as ``dataclass``
would. A class ``dataclass`` refuses (a field without a default after one with) is refused
at its first use instead of at import, so a test makes every one in the package.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import TYPE_CHECKING, Any

__all__ = ["make", "make_all", "record"]

# Held while a class is made: two threads asking for the same class at once make it once.
_making = threading.RLock()
_LAZY = "__record_params__"

if TYPE_CHECKING:
    from dataclasses import dataclass as record
else:

    def record(cls: type | None = None, /, **params: Any) -> Any:
        """``@record`` or ``@record(frozen=True, ...)``: ``dataclass``, made on first use."""

        def wrap(cls: type) -> type:
            own = cls.__dict__
            if params.get("slots") or any(
                k in own for k in ("__new__", "__init__", "__setstate__")
            ):
                return dataclasses.dataclass(cls, **params)
            setattr(cls, _LAZY, params)
            cls.__dataclass_fields__ = _FieldsOnFirstLook(cls)
            cls.__init__ = _init_on_first_instance(cls)
            cls.__setstate__ = _setstate_on_first_copy(cls)
            return cls

        return wrap if cls is None else wrap(cls)


class _FieldsOnFirstLook:
    """Stands for ``__dataclass_fields__`` until the class is made: whatever reads it (every
    function of ``dataclasses``, a subclass being made, pydantic) makes the class first."""

    def __init__(self, owner: type) -> None:
        self.owner = owner

    def __get__(self, instance: object, kind: type | None = None) -> Any:
        return make(self.owner).__dict__["__dataclass_fields__"]


def _init_on_first_instance(owner: type) -> Any:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        make(owner)
        owner.__init__(self, *args, **kwargs)  # type: ignore[misc]

    return __init__


def _setstate_on_first_copy(owner: type) -> Any:
    # ``copy`` and unpickling make an instance without calling __init__, then hand it its
    # state: the class is made first, and the state is put back as they do for a class
    # without __setstate__ (a dataclass has none): into __dict__, slots by object.__setattr__.
    def __setstate__(self: Any, state: Any) -> None:
        make(owner)
        slots = None
        if isinstance(state, tuple) and len(state) == 2:
            state, slots = state
        if state:
            self.__dict__.update(state)
        for name, value in (slots or {}).items():
            object.__setattr__(self, name, value)

    return __setstate__


def make(cls: type) -> type:
    """Generate ``cls``'s dataclass methods now if it is a ``@record`` not yet made."""
    if _LAZY in cls.__dict__:
        with _making:
            params = cls.__dict__.get(_LAZY)
            if params is not None:
                for stand_in in ("__init__", "__setstate__", "__dataclass_fields__", _LAZY):
                    delattr(cls, stand_in)
                dataclasses.dataclass(cls, **params)
    return cls


def make_all(namespace: dict[str, Any]) -> None:
    """Make every ``@record`` class a module defines (its ``vars()``), ahead of its use."""
    for value in list(namespace.values()):
        if isinstance(value, type) and _LAZY in value.__dict__:
            make(value)
