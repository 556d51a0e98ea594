"""envlock.record behaves as a frozen dataclass where envlock relies on it."""

from __future__ import annotations

import copy
import pickle
import subprocess
import sys
from dataclasses import dataclass
from dataclasses import field as dc_field

import pytest

from envlock.record import FrozenInstanceError, build, field, fields, record, replace


@record
class Point:
    """A record with every kind of field."""

    x: int
    y: int = 0
    tags: tuple[str, ...] = field(default=())
    seen: list[int] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.x + self.y


@record
class Pair:
    a: int
    b: tuple[str, ...] = ()


@dataclass(frozen=True)
class DPoint:
    """The same, as a dataclass: the reference."""

    x: int
    y: int = 0
    tags: tuple[str, ...] = dc_field(default=())
    seen: list[int] = dc_field(default_factory=list)


def test_construction_matches_a_frozen_dataclass() -> None:
    cases = [((1,), {}), ((1, 2), {}), ((), {"x": 3, "tags": ("a",)}), ((4,), {"y": 5})]
    for args, kwargs in cases:
        p, d = Point(*args, **kwargs), DPoint(*args, **kwargs)
        assert (p.x, p.y, p.tags, p.seen) == (d.x, d.y, d.tags, d.seen)
    assert Point(1).seen is not Point(1).seen  # a fresh list each time
    assert repr(Point(1, 2)) == "Point(x=1, y=2, tags=(), seen=[])"
    assert Point(1, 2).total == 3


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((), {}, "missing required argument: 'x'"),
        ((1, 2, (), [], 5), {}, "takes 4 positional arguments but 5 were given"),
        ((1,), {"z": 1}, "unexpected keyword argument 'z'"),
        ((1,), {"x": 2}, "multiple values for argument 'x'"),
    ],
)
def test_bad_construction_is_a_type_error(args: tuple, kwargs: dict, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        Point(*args, **kwargs)


def test_frozen_equal_hashable() -> None:
    p = Point(1, 2, ("a",))
    with pytest.raises(FrozenInstanceError):
        p.x = 5  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del p.y  # type: ignore[misc]
    assert p == Point(1, 2, ("a",))
    assert p != Point(1, 3, ("a",))
    assert p != (1, 2, ("a",), [])
    assert hash(Pair(1, ("a",))) == hash(Pair(1, ("a",)))
    assert len({Pair(1), Pair(1), Pair(2)}) == 2
    with pytest.raises(TypeError, match="unhashable"):
        hash(p)  # a list field, as with a frozen dataclass


def test_fields_replace_build_pickle_copy() -> None:
    p = Point(1, 2)
    assert [f.name for f in fields(Point)] == ["x", "y", "tags", "seen"]
    assert [f.name for f in fields(p)] == ["x", "y", "tags", "seen"]
    assert replace(p, y=7) == Point(1, 7)
    with pytest.raises(TypeError, match="no field 'z'"):
        replace(p, z=1)
    assert build(Point, (1, 2, (), [])) == p
    assert pickle.loads(pickle.dumps(p)) == p
    assert copy.deepcopy(p) == p and copy.copy(p) == p
    with pytest.raises(TypeError, match="not a record"):
        fields(DPoint)


def test_a_field_without_default_after_one_with_is_refused() -> None:
    with pytest.raises(TypeError, match="without a default follows one with"):

        @record
        class Bad:
            a: int = 1
            b: int  # type: ignore[misc]


def test_importing_records_imports_neither_dataclasses_nor_typing() -> None:
    code = (
        "import sys, envlock.record, envlock.versions, envlock.model, envlock.matrix, "
        "envlock.matrix.cuda, envlock.matrix.gpus, envlock.resolve;"
        "print(sorted(m for m in ('dataclasses', 'typing', 'packaging.version', 'inspect')"
        " if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
