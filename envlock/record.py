"""Frozen records: the immutable data classes of envlock's start-up path.

``@record`` makes a class behave as ``@dataclass(frozen=True)`` does for the
way envlock uses it (keyword or positional construction, defaults and
``field(default_factory=...)``, equality, hashing, ``repr``, no assignment
after construction, pickling, ``fields()`` and ``replace()``), and mypy checks
it as a frozen dataclass (PEP 681 ``dataclass_transform``).

Why not ``dataclasses``: ``envlock resolve`` must start within 2.5x of a bare
``python -c pass`` (issue #2). Importing ``dataclasses`` (which imports
``inspect``, ``ast``, ``dis``, ``tokenize``) and compiling six generated
methods per class (``exec``) cost ~25 ms on a 2-core machine for the 20
classes resolve needs: more than the whole budget. Here each class gets the
same few generic methods, made once; nothing is compiled at import. The price
is a slower ``__init__`` (a loop instead of generated code: microseconds per
object, for the few hundred objects of a run). Modules off the start-up path
keep using ``dataclasses``.

No ``typing`` at run time either (it costs ~6 ms to import): the names mypy
needs are imported under ``TYPE_CHECKING``, a plain constant here.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    from typing_extensions import dataclass_transform

    _T = TypeVar("_T")

__all__ = ["FrozenInstanceError", "Field", "build", "field", "fields", "record", "replace"]

_MISSING = object()


class FrozenInstanceError(AttributeError):
    """Assignment to a field of a frozen record."""


class Field:
    """One field of a record: its name and default (``field()`` makes these)."""

    __slots__ = ("default", "default_factory", "name", "type")

    def __init__(self, default: Any = _MISSING, default_factory: Any = _MISSING) -> None:
        if default is not _MISSING and default_factory is not _MISSING:
            raise ValueError("cannot give both default and default_factory")
        self.name = ""
        self.type: Any = None  # the annotation (text, under postponed evaluation)
        self.default = default
        self.default_factory = default_factory

    def __repr__(self) -> str:
        return f"Field(name={self.name!r})"


def _field(*, default: Any = _MISSING, default_factory: Any = _MISSING) -> Any:
    """A field with a default made by ``default_factory`` (or a plain ``default``)."""
    return Field(default, default_factory)


def _frozen_setattr(self: object, name: str, value: object) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r} of a frozen record")


def _frozen_delattr(self: object, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r} of a frozen record")


def _values(self: object) -> tuple[Any, ...]:
    d = self.__dict__
    return tuple([d[name] for name in type(self).__record_names__])  # type: ignore[attr-defined]


def _eq(self: object, other: object) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    return _values(self) == _values(other)


def _hash(self: object) -> int:
    return hash(_values(self))


def _repr(self: object) -> str:
    d = self.__dict__
    inner = ", ".join(f"{n}={d[n]!r}" for n in type(self).__record_names__)  # type: ignore[attr-defined]
    return f"{type(self).__qualname__}({inner})"


def _init(self: object, *args: Any, **kwargs: Any) -> None:
    cls = type(self)
    names: tuple[str, ...] = cls.__record_names__  # type: ignore[attr-defined]
    if len(args) > len(names):
        raise TypeError(
            f"{cls.__name__}() takes {len(names)} positional arguments but {len(args)} were given"
        )
    d = self.__dict__
    for name, value in zip(names, args, strict=False):
        d[name] = value
    if kwargs:
        for name, value in kwargs.items():
            if name not in names:
                raise TypeError(f"{cls.__name__}() got an unexpected keyword argument {name!r}")
            if name in d:
                raise TypeError(f"{cls.__name__}() got multiple values for argument {name!r}")
            d[name] = value
    if len(d) < len(names):
        defaults: dict[str, Field] = cls.__record_defaults__  # type: ignore[attr-defined]
        for name in names:
            if name in d:
                continue
            spec = defaults.get(name)
            if spec is None:
                raise TypeError(f"{cls.__name__}() missing required argument: {name!r}")
            d[name] = spec.default_factory() if spec.default is _MISSING else spec.default
    post = getattr(self, "__post_init__", None)
    if post is not None:
        post()


def _reduce(self: object) -> tuple[Any, ...]:
    return (build, (type(self), _values(self)))


def build(cls: type[_T], values: tuple[Any, ...]) -> _T:
    """A record from its field values in order, without ``__init__``'s checks
    (for data that was a valid record before: the matrix cache, pickles)."""
    obj = object.__new__(cls)
    obj.__dict__.update(zip(cls.__record_names__, values, strict=False))  # type: ignore[attr-defined]
    return obj


def _is_classvar(annotation: object) -> bool:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    return isinstance(text, str) and text.split("[")[0].rsplit(".", 1)[-1] == "ClassVar"


def _record(cls: type[_T]) -> type[_T]:
    names: list[str] = []
    defaults: dict[str, Field] = {}
    for base in reversed(cls.__mro__[1:]):
        names.extend(n for n in getattr(base, "__record_names__", ()) if n not in names)
        defaults.update(getattr(base, "__record_defaults__", {}))
    annotations: dict[str, Any] = {}
    for base in reversed(cls.__mro__[1:]):
        annotations.update(getattr(base, "__record_types__", {}))
    own = cls.__dict__.get("__annotations__")
    if own is None and "__annotate__" in cls.__dict__:
        # Python 3.14 without `from __future__ import annotations` (PEP 649):
        # the annotations are made on first access
        own = cls.__annotations__
    for name, annotation in (own or {}).items():
        if _is_classvar(annotation):
            continue
        annotations[name] = annotation
        if name not in names:
            names.append(name)
        value = cls.__dict__.get(name, _MISSING)
        if isinstance(value, Field):
            value.name = name
            value.type = annotation
            defaults[name] = value
            if value.default is _MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, value.default)
        elif value is not _MISSING:
            spec = Field(value)
            spec.name = name
            spec.type = annotation
            defaults[name] = spec
        elif defaults and name not in defaults:
            raise TypeError(f"{cls.__name__}: field {name!r} without a default follows one with")
    cls.__record_names__ = tuple(names)  # type: ignore[attr-defined]
    cls.__record_defaults__ = defaults  # type: ignore[attr-defined]
    cls.__record_types__ = annotations  # type: ignore[attr-defined]
    cls.__match_args__ = tuple(names)  # type: ignore[attr-defined,misc]
    for attr, fn in (
        ("__init__", _init),
        ("__setattr__", _frozen_setattr),
        ("__delattr__", _frozen_delattr),
        ("__eq__", _eq),
        ("__hash__", _hash),
        ("__repr__", _repr),
        ("__reduce__", _reduce),
    ):
        if attr not in cls.__dict__ or attr in ("__eq__", "__hash__", "__setattr__", "__delattr__"):
            setattr(cls, attr, fn)
    return cls


if TYPE_CHECKING:

    def field(*, default: Any = ..., default_factory: Callable[[], Any] = ...) -> Any: ...

    @dataclass_transform(frozen_default=True, field_specifiers=(field,))
    def record(cls: type[_T]) -> type[_T]: ...

else:
    field = _field
    record = _record


def fields(obj: object) -> tuple[Field, ...]:
    """The fields of a record class or instance, in order."""
    cls = obj if isinstance(obj, type) else type(obj)
    try:
        names: tuple[str, ...] = cls.__record_names__  # type: ignore[attr-defined]
    except AttributeError:
        raise TypeError(f"{cls.__name__} is not a record") from None
    defaults: dict[str, Field] = cls.__record_defaults__  # type: ignore[attr-defined]
    types: dict[str, Any] = cls.__record_types__  # type: ignore[attr-defined]
    out = []
    for name in names:
        spec = defaults.get(name)
        if spec is None:
            spec = Field()
            spec.name = name
            spec.type = types.get(name)
        out.append(spec)
    return tuple(out)


def replace(obj: _T, **changes: Any) -> _T:
    """A copy of the record ``obj`` with some fields changed."""
    values = {f.name: getattr(obj, f.name) for f in fields(obj)}
    unknown = set(changes) - set(values)
    if unknown:
        raise TypeError(f"{type(obj).__name__} has no field {sorted(unknown)[0]!r}")
    values.update(changes)
    return type(obj)(**values)
