"""``@record`` classes are dataclasses in everything a caller can see, made on first use.

Each check is made on a class nothing has used yet, against the same class written with
``dataclasses.dataclass``, so what is compared is what the standard library gives.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
import subprocess
import sys
import threading
from dataclasses import field
from pathlib import Path
from typing import Any

import pytest

from rune_council.core.records import make, make_all, record


def _pair(**params: Any) -> tuple[type, type]:
    """The same class twice: as a ``@record`` (not yet used) and as a dataclass."""

    def body() -> type:
        class Point:
            x: int
            y: int = 0
            tags: list[str] = field(default_factory=list)

        return Point

    return record(**params)(body()), dataclasses.dataclass(**params)(body())


def _unmade(cls: type) -> bool:
    return "__dataclass_params__" not in cls.__dict__


@pytest.mark.parametrize(
    "params", [{}, {"frozen": True}, {"eq": False}, {"order": True}, {"kw_only": True}]
)
def test_a_record_behaves_as_the_dataclass_it_stands_for(params: dict[str, Any]) -> None:
    lazy, eager = _pair(**params)
    assert _unmade(lazy)
    a, b = lazy(x=1, tags=["t"]), eager(x=1, tags=["t"])
    assert not _unmade(lazy)
    assert repr(a) == repr(b)
    assert (a == lazy(x=1, tags=["t"])) == (b == eager(x=1, tags=["t"]))
    assert (lazy.__hash__ is None) == (eager.__hash__ is None)
    if params.get("frozen"):
        assert hash(lazy(x=1, tags=())) == hash(eager(x=1, tags=()))
    assert [f.name for f in dataclasses.fields(lazy)] == [f.name for f in dataclasses.fields(eager)]
    assert lazy.__dataclass_params__.__repr__() == eager.__dataclass_params__.__repr__()
    assert lazy.__match_args__ == eager.__match_args__
    assert lazy.__doc__ == eager.__doc__
    assert dataclasses.asdict(a) == dataclasses.asdict(b)
    assert repr(dataclasses.replace(a, y=5)) == repr(dataclasses.replace(b, y=5))
    if params.get("order"):
        assert lazy(x=1) < lazy(x=2)


def test_a_frozen_record_refuses_to_change() -> None:
    lazy, _ = _pair(frozen=True)
    point = lazy(x=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        point.x = 2  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del point.x  # type: ignore[attr-defined]
    assert len({lazy(x=1, tags=()), lazy(x=1, tags=())}) == 1


def test_wrong_arguments_fail_as_a_dataclass_does() -> None:
    lazy, eager = _pair()
    with pytest.raises(TypeError) as lazy_error:
        lazy()
    with pytest.raises(TypeError) as eager_error:
        eager()
    assert str(lazy_error.value).split(".")[-1] == str(eager_error.value).split(".")[-1]
    # Failing to make an instance still made the class: the next call is a dataclass's.
    assert lazy(3).x == 3


def test_looking_at_the_fields_makes_the_class() -> None:
    lazy, _ = _pair()
    assert dataclasses.is_dataclass(lazy)
    assert not _unmade(lazy)
    assert lazy(x=2, y=3).y == 3


def test_subclasses_make_their_bases() -> None:
    base, _ = _pair(frozen=True)

    @record(frozen=True)
    class Labelled(base):  # type: ignore[valid-type,misc]
        label: str = "l"

    class Plain(base):  # type: ignore[valid-type,misc]
        pass

    labelled = Labelled(1, 2, [], "here")
    assert repr(labelled).startswith("test_subclasses_make_their_bases.<locals>.Labelled(x=1")
    assert [f.name for f in dataclasses.fields(Labelled)] == ["x", "y", "tags", "label"]
    assert Plain(4).x == 4 and Plain(4) == Plain(4)


def test_copies_and_pickles_come_back_as_the_same_values() -> None:
    point = Sample(1, ["a"])
    assert copy.copy(point) == point and copy.deepcopy(point) == point
    assert pickle.loads(pickle.dumps(point)) == point


def test_an_instance_unpickled_where_its_class_was_never_used_is_a_full_record() -> None:
    data = pickle.dumps(Sample(7, ["b"]))
    probe = (
        "import pickle, sys, dataclasses\n"
        "import tests.test_records as m\n"
        "assert '__dataclass_params__' not in m.Sample.__dict__\n"
        "p = pickle.loads(sys.stdin.buffer.read())\n"
        "assert p == m.Sample(7, ['b']) and repr(p) == \"Sample(n=7, items=['b'])\"\n"
        "try:\n    p.n = 1\nexcept dataclasses.FrozenInstanceError:\n    print('frozen')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        input=data,
        capture_output=True,
        check=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert out.stdout.strip() == b"frozen"


def test_threads_making_the_same_class_at_once_make_it_once() -> None:
    lazy, _ = _pair(frozen=True)
    made: list[Any] = []
    start = threading.Barrier(8)

    def one(i: int) -> None:
        start.wait()
        made.append(lazy(x=i))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(p.x for p in made) == list(range(8))
    assert [f.name for f in dataclasses.fields(lazy)] == ["x", "y", "tags"]


def test_make_all_makes_a_modules_records_ahead_of_use() -> None:
    lazy, eager = _pair()
    make_all({"Point": lazy, "other": eager, "n": 1})
    assert not _unmade(lazy)
    assert make(eager) is eager


def test_a_class_with_its_own_init_is_made_at_once() -> None:
    @record
    class Own:
        x: int

        def __init__(self, x: int) -> None:
            self.x = x * 2

    assert not _unmade(Own)
    assert Own(2).x == 4 and Own(2) == Own(2)


@record(frozen=True)
class Sample:
    n: int
    items: list[str] = field(default_factory=list)


def test_every_record_in_the_package_is_one_dataclass_accepts() -> None:
    """A class is only made on first use: this makes each one the package defines, in a
    process where nothing has used them yet, so one ``dataclass`` would refuse fails here
    rather than in some user's council."""
    probe = (
        "import dataclasses, importlib, pkgutil, rune_council\n"
        "from rune_council.core.records import make\n"
        "records = set()\n"
        "for info in pkgutil.walk_packages(rune_council.__path__, 'rune_council.'):\n"
        "    if info.name.endswith('__main__'):\n"
        "        continue\n"
        "    module = importlib.import_module(info.name)\n"
        "    records |= {v for v in list(vars(module).values())\n"
        "                if isinstance(v, type) and '__record_params__' in v.__dict__}\n"
        "for cls in records:\n"
        "    assert dataclasses.is_dataclass(make(cls)), cls\n"
        "print(len(records))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert out.returncode == 0, out.stderr
    # Those nothing had made by merely importing the package: most of them.
    assert int(out.stdout) >= 40
