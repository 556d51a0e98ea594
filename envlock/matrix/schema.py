"""The one validator of the matrix files (``envlock/data/matrices/*.toml``).

Each parser (``tensorflow``, ``cuda``, ``gpus``, ``tested`` and the notes in
``check``) makes a ``Checker`` for its file and reads every value through it,
so every problem is a ``DataError`` that names the file and the path inside
the document, e.g. ``matrices/tensorflow.toml: releases[12].cudnn: expected
"X.Y", got "8"``, with the hint that suits the file. ``show`` writes a value
the way TOML would, for those messages.

The parsers import this module where they validate a file: a resolve that
takes the validated matrices from the cache needs none of it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from envlock.errors import DataError

# A shape: the regular expression a whole value matches, and how a message writes it.
Shape = tuple[str, str]

MINOR: Shape = (r"[0-9]+\.[0-9]+", "X.Y")
PYTHON_MINOR: Shape = (r"3\.[0-9]+", "3.X")
DATE: Shape = (r"[0-9]{4}-[0-9]{2}-[0-9]{2}", "YYYY-MM-DD")
# an instant in UTC as RFC 3339 writes it (PEP 691's upload-time: "...T23:47:13.274622Z")
UTC_INSTANT: Shape = (
    r"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]"
    r"(\.[0-9]{1,6})?Z",
    "YYYY-MM-DDTHH:MM:SS[.ffffff]Z",
)

NEWER_SCHEMA_HINT = "use the envlock release that wrote the file"


def show(value: object) -> str:
    """A value as it would look in TOML, for messages."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a table"
    return type(value).__name__


def join(path: str, key: str) -> str:
    """The path of ``key`` inside ``path`` (``""`` is the top of the document)."""
    return f"{path}.{key}" if path else key


class Checker:
    """Reads the values of one file, putting the file and the path into each error."""

    def __init__(self, filename: str, hint: str) -> None:
        self.filename = filename
        self.hint = hint  # what fixes a damaged file of this kind
        self.source_keys: tuple[str, ...] = ()  # keys of [sources], once read

    def fail(self, path: str, problem: str, hint: str | None = None) -> DataError:
        return DataError(f"{self.filename}: {path}: {problem}", hint=hint or self.hint)

    # -- the document and its tables -------------------------------------------

    def table(self, value: object, path: str, fields: Sequence[str]) -> Mapping[str, Any]:
        """A table whose keys are all among ``fields``."""
        if not isinstance(value, dict):
            raise self.fail(path, f"expected a table, got {show(value)}")
        unknown = sorted(set(value) - set(fields))
        if unknown:
            raise self.fail(join(path, unknown[0]), "unknown field")
        return value

    def rows(self, doc: Mapping[str, Any], key: str, *, required: bool = True) -> list[Any]:
        """The array of tables ``[[key]]``: non-empty, unless not ``required``."""
        rows = doc.get(key, None if required else [])
        if required and (not isinstance(rows, list) or not rows):
            raise self.fail(key, f"expected a non-empty array of tables ([[{key}]])")
        if not isinstance(rows, list):
            raise self.fail(key, f"expected an array of tables ([[{key}]])")
        return rows

    def schema_version(
        self, doc: Mapping[str, Any], supported: int, *, hint: str = NEWER_SCHEMA_HINT
    ) -> int:
        schema = self.integer(doc, "schema_version", "")
        if schema != supported:
            raise self.fail(
                "schema_version",
                f"this envlock reads schema {supported}, the file has {schema}",
                hint=hint,
            )
        return schema

    def header(
        self, doc: Mapping[str, Any], supported: int, *, hint: str = NEWER_SCHEMA_HINT
    ) -> tuple[int, str]:
        """``schema_version`` (the one this envlock reads) and ``data_version`` (a date)."""
        schema = self.schema_version(doc, supported, hint=hint)
        return schema, self.string(doc, "data_version", "", DATE)

    def sources(self, doc: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
        """The ``[sources]`` table: key = description; ``source`` accepts its keys."""
        raw = doc.get("sources")
        if not isinstance(raw, dict) or not raw:
            raise self.fail("sources", "expected a table of source descriptions ([sources])")
        out: list[tuple[str, str]] = []
        for key, text in raw.items():
            if not isinstance(text, str) or not text.strip():
                raise self.fail(f"sources.{key}", f"expected a description, got {show(text)}")
            out.append((key, text))
        self.source_keys = tuple(k for k, _ in out)
        return tuple(out)

    def distinct(
        self,
        table: str,
        field: str,
        values: Sequence[Any],
        key: Callable[[Any], Hashable] | None = None,
    ) -> None:
        """No two rows of ``[[table]]`` with the same ``field`` (compared by ``key``)."""
        seen: dict[Hashable, int] = {}
        for i, value in enumerate(values):
            compared = value if key is None else key(value)
            if compared in seen:
                raise self.fail(
                    f"{table}[{i}].{field}",
                    f"{show(str(value))} is listed twice (also {table}[{seen[compared]}])",
                )
            seen[compared] = i

    # -- values ------------------------------------------------------------------

    def _value(self, obj: Mapping[str, Any], key: str, path: str) -> object:
        if key not in obj:
            raise self.fail(join(path, key), "missing")
        value: object = obj[key]
        return value

    def _text(self, value: object, where: str, shape: Shape | None, *, empty: bool) -> str:
        if not isinstance(value, str):
            raise self.fail(where, f"expected a string, got {show(value)}")
        if not empty and not value.strip():
            raise self.fail(where, "must not be empty")
        if shape is not None and not re.fullmatch(shape[0], value):
            raise self.fail(where, f'expected "{shape[1]}", got {show(value)}')
        return value

    def string(
        self,
        obj: Mapping[str, Any],
        key: str,
        path: str,
        shape: Shape | None = None,
        *,
        required: bool = True,
        empty: bool = False,
    ) -> str:
        """A string (``""`` when absent and not ``required``), matching ``shape`` if given."""
        if key not in obj and not required:
            return ""
        return self._text(self._value(obj, key, path), join(path, key), shape, empty=empty)

    def choice(
        self,
        obj: Mapping[str, Any],
        key: str,
        path: str,
        allowed: Sequence[str],
        *,
        required: bool = True,
    ) -> str:
        value = self.string(obj, key, path, required=required)
        if value and value not in allowed:
            options = ", ".join(f'"{a}"' for a in allowed)
            raise self.fail(join(path, key), f"expected one of {options}, got {show(value)}")
        return value

    def source(self, obj: Mapping[str, Any], key: str, path: str, *, required: bool = True) -> str:
        """A key of the file's ``[sources]`` table (read by ``sources`` first)."""
        value = self.string(obj, key, path, required=required)
        if value and value not in self.source_keys:
            raise self.fail(join(path, key), f"{show(value)} is not a key of [sources]")
        return value

    def strings(
        self,
        obj: Mapping[str, Any],
        key: str,
        path: str,
        shape: Shape | None = None,
        *,
        non_empty: bool = False,
    ) -> tuple[str, ...]:
        """A list of distinct, non-empty strings, each matching ``shape`` if given."""
        where = join(path, key)
        value = self._value(obj, key, path)
        if not isinstance(value, list) or (non_empty and not value):
            wanted = "a non-empty list" if non_empty else "a list"
            raise self.fail(where, f"expected {wanted} of strings, got {show(value)}")
        out: list[str] = []
        for i, item in enumerate(value):
            text = self._text(item, f"{where}[{i}]", shape, empty=False)
            if text in out:
                raise self.fail(f"{where}[{i}]", f"{show(text)} is listed twice")
            out.append(text)
        return tuple(out)

    def integer(self, obj: Mapping[str, Any], key: str, path: str) -> int:
        value = self._value(obj, key, path)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.fail(join(path, key), f"expected an integer, got {show(value)}")
        return value

    def boolean(self, obj: Mapping[str, Any], key: str, path: str, *, default: bool) -> bool:
        value = obj.get(key, default)
        if not isinstance(value, bool):
            raise self.fail(join(path, key), f"expected true or false, got {show(value)}")
        return value

    def positive_number(self, obj: Mapping[str, Any], key: str, path: str) -> float:
        value = self._value(obj, key, path)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise self.fail(join(path, key), f"expected a positive number, got {show(value)}")
        return float(value)

    def optional_positive_number(self, obj: Mapping[str, Any], key: str, path: str) -> float | None:
        """A number above zero, or ``None`` when the key is absent."""
        return self.positive_number(obj, key, path) if key in obj else None

    def version(self, obj: Mapping[str, Any], key: str, path: str) -> Version:
        """A string that is a PEP 440 version."""
        text = self.string(obj, key, path)
        try:
            return Version(text)
        except InvalidVersion:
            raise self.fail(join(path, key), f"not a version: {show(text)}") from None

    def specifier(self, text: str, where: str) -> SpecifierSet:
        """``text`` (found at ``where``) as a PEP 440 version specifier."""
        try:
            return SpecifierSet(text)
        except InvalidSpecifier:
            raise self.fail(where, f"not a version specifier: {show(text)}") from None

    def requirement(self, text: str, where: str) -> Requirement:
        """``text`` (found at ``where``) as a PEP 508 requirement."""
        try:
            return Requirement(text)
        except InvalidRequirement as e:
            raise self.fail(where, f"not a requirement: {e}") from None
