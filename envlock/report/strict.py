"""The one strict JSON reader for smoke results, envelopes and signed payloads.

``report sign``, ``verify`` and ``report show`` read every JSON document
through ``loads``, so a document sign accepts is one verify accepts. Refused:
bad UTF-8 (lone surrogates encoded as bytes included), a byte-order mark,
duplicate keys, NaN and Infinity (spelled out, or a number such as ``1e999``
that overflows to infinity), integers outside the signed 64-bit range, lone
surrogates written as ``\\ud800`` escapes, documents over ``max_bytes`` and
nesting deeper than ``max_depth``. Each refusal is a ``JSONDefect`` saying
what and where.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_RESULT_BYTES = 4 << 20  # a smoke result; its statement holds it (and its benchmark) again
MAX_PAYLOAD_BYTES = 12 << 20  # the signed statement
MAX_ENVELOPE_BYTES = 17 << 20  # base64 of the payload and a little more
MAX_DEPTH = 64  # nesting of any document read
STATEMENT_NESTING = 3  # statement > predicate > envlock > smoke: a result sits 3 levels deeper
MAX_RESULT_DEPTH = MAX_DEPTH - STATEMENT_NESTING
INT_LIMIT = 1 << 63

_SURROGATE = re.compile("[\ud800-\udfff]")


class JSONDefect(ValueError):
    """The document is not strict JSON (or breaks a bound); the message says why."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise JSONDefect(f"duplicate key {key!r} in JSON object")
        out[key] = value
    return out


def _constant(name: str) -> Any:
    raise JSONDefect(f"{name} is not valid JSON")


def _int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > 19 or not -INT_LIMIT <= int(text) < INT_LIMIT:
        shown = text if len(text) <= 24 else f"{text[:12]}...({digits} digits)"
        raise JSONDefect(f"the integer {shown} is outside the signed 64-bit range")
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        shown = text if len(text) <= 24 else text[:24] + "..."
        raise JSONDefect(f"the number {shown} is not a finite number")
    return value


def _check(value: Any, depth: int, max_depth: int, where: str) -> None:
    """Depth and lone surrogates, over the parsed document (iteratively)."""
    stack: list[tuple[Any, int, str]] = [(value, depth, where)]
    while stack:
        item, level, path = stack.pop()
        if isinstance(item, str):
            if not item.isascii() and _SURROGATE.search(item):
                raise JSONDefect(f"{path or 'a string'} holds a lone surrogate (not Unicode text)")
        elif isinstance(item, (dict, list)):
            if level >= max_depth:
                raise JSONDefect(f"the document is nested more than {max_depth} levels deep")
            if isinstance(item, dict):
                for k, v in item.items():
                    if not k.isascii() and _SURROGATE.search(k):
                        raise JSONDefect(
                            f"a key in {path or 'the document'} holds a lone surrogate"
                        )
                    stack.append((v, level + 1, f"{path}.{k}" if path else k))
            else:
                for i, v in enumerate(item):
                    stack.append((v, level + 1, f"{path}[{i}]"))


def loads(data: bytes | str, *, max_bytes: int, max_depth: int = MAX_DEPTH) -> Any:
    """Parse one strict JSON document; raise JSONDefect saying what is wrong."""
    size = len(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
    if size > max_bytes:
        raise JSONDefect(f"{size} bytes is more than the {max_bytes} bytes allowed")
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise JSONDefect(f"not UTF-8 text ({e.reason} at byte {e.start})") from e
    else:
        text = data
    if text.startswith("\ufeff"):
        raise JSONDefect("starts with a byte-order mark (not JSON)")
    try:
        doc = json.loads(
            text,
            object_pairs_hook=_pairs,
            parse_constant=_constant,
            parse_int=_int,
            parse_float=_float,
        )
    except JSONDefect:
        raise
    except json.JSONDecodeError as e:
        raise JSONDefect(f"not JSON ({e.msg} at line {e.lineno} column {e.colno})") from e
    except RecursionError as e:
        raise JSONDefect(f"the document is nested more than {max_depth} levels deep") from e
    except ValueError as e:  # belt and braces: any other refusal of the json module
        raise JSONDefect(f"not JSON ({e})") from e
    _check(doc, 0, max_depth, "")
    return doc


def check_value(value: Any, *, max_depth: int = MAX_DEPTH) -> None:
    """The same bounds for a document built in memory (a result dict given to
    ``sign_result``): finite floats, 64-bit integers, no lone surrogates, depth."""
    _check(value, 0, max_depth, "")
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, bool) or item is None or isinstance(item, str):
            continue
        if isinstance(item, int):
            if not -INT_LIMIT <= item < INT_LIMIT:
                raise JSONDefect(f"an integer of {item.bit_length()} bits is outside 64 bits")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise JSONDefect(f"the number {item} is not a finite number")
        elif isinstance(item, dict):
            for k in item:
                if not isinstance(k, str):
                    raise JSONDefect(f"the key {k!r} is not a string")
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        else:
            raise JSONDefect(f"a {type(item).__name__} is not a JSON value")
