"""Printing for people and machines. Rich is imported only when drawing."""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing is not imported at run time (start-up: see envlock.record)
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any


def dumps(obj: Any) -> str:
    """``json.dumps(obj, indent=2, ensure_ascii=False)`` plus a newline.

    Objects made of dicts with text keys, lists, tuples, text, integers,
    booleans and None (every ``--json`` output of resolve and its like) are
    written by ``_write`` without importing ``json``: its import compiles six
    regular expressions, ~3 ms of a start-up budget of ~30. Strings are escaped
    by the very function json uses for ``ensure_ascii=False`` (``_json``'s C
    ``encode_basestring``), and tests/test_output.py checks the two writers
    agree byte for byte. Anything else (floats, other key types, other
    objects) goes to json itself.
    """
    try:
        encode = _string_encoder()
        parts: list[str] = []
        _write(obj, parts, "", encode)
        return "".join(parts) + "\n"
    except _NotPlain:
        import json

        return json.dumps(obj, indent=2, sort_keys=False, ensure_ascii=False) + "\n"


class _NotPlain(Exception):
    """A value ``_write`` leaves to json."""


def _string_encoder() -> Callable[[str], str]:
    try:
        from _json import encode_basestring
    except ImportError:  # pragma: no cover - not CPython
        raise _NotPlain from None
    return encode_basestring


def _write(obj: Any, out: list[str], indent: str, encode: Callable[[str], str]) -> None:
    """json's indent=2 layout: one member per line, "key": value, empty
    containers as {} and []."""
    if isinstance(obj, str):
        out.append(encode(obj))
    elif obj is None:
        out.append("null")
    elif obj is True:
        out.append("true")
    elif obj is False:
        out.append("false")
    elif type(obj) is int:
        out.append(int.__repr__(obj))
    elif isinstance(obj, dict):
        if not obj:
            out.append("{}")
            return
        inner = indent + "  "
        out.append("{")
        first = True
        for key, value in obj.items():
            if type(key) is not str:
                raise _NotPlain
            out.append(("\n" if first else ",\n") + inner + encode(key) + ": ")
            first = False
            _write(value, out, inner, encode)
        out.append("\n" + indent + "}")
    elif isinstance(obj, (list, tuple)):
        if not obj:
            out.append("[]")
            return
        inner = indent + "  "
        out.append("[")
        for i, value in enumerate(obj):
            out.append(("\n" if i == 0 else ",\n") + inner)
            _write(value, out, inner, encode)
        out.append("\n" + indent + "]")
    else:
        raise _NotPlain


def emit_json(obj: Any) -> None:
    sys.stdout.write(dumps(obj))


def stderr_is_tty() -> bool:
    return sys.stderr.isatty()


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain aligned text table (stable for tests and pipes)."""
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = ["  ".join(h.ljust(widths[i]) for i, h in enumerate(headers)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        lines.append("  ".join(c.ljust(widths[i]) for i, c in enumerate(row)).rstrip())
    return "\n".join(lines) + "\n"
