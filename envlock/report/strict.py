"""The strict JSON reader for smoke results, envelopes and signed payloads.

``report sign``, ``verify`` and ``report show`` read every JSON document
through ``loads``, so a document sign accepts is one verify accepts. The
decoding is ``envlock.readers.decode_json`` (the one strict JSON decoder),
with integers bounded to the signed 64-bit range; this module adds the byte
limits and strict UTF-8 of bytes. Refused: bad UTF-8 (lone surrogates encoded
as bytes included), a byte-order mark, duplicate keys, NaN and Infinity
(spelled out, or a number such as ``1e999`` that overflows to infinity),
numbers of more than ``readers.MAX_NUMBER_CHARS`` characters, integers
outside the signed 64-bit range, lone surrogates written as ``\\ud800``
escapes, documents over ``max_bytes`` and nesting deeper than ``max_depth``.
Each refusal is a ``JSONDefect`` saying what and where.
"""

from __future__ import annotations

import math
from typing import Any

from envlock.readers import JSONDefect, check_tree, decode_json

__all__ = [
    "INT_BITS",
    "MAX_DEPTH",
    "MAX_ENVELOPE_BYTES",
    "MAX_PAYLOAD_BYTES",
    "MAX_RESULT_BYTES",
    "MAX_RESULT_DEPTH",
    "JSONDefect",
    "check_value",
    "loads",
]

MAX_RESULT_BYTES = 4 << 20  # a smoke result; its statement holds it (and its benchmark) again
MAX_PAYLOAD_BYTES = 12 << 20  # the signed statement
MAX_ENVELOPE_BYTES = 17 << 20  # base64 of the payload and a little more
MAX_DEPTH = 64  # nesting of any document read
STATEMENT_NESTING = 3  # statement > predicate > envlock > smoke: a result sits 3 levels deeper
MAX_RESULT_DEPTH = MAX_DEPTH - STATEMENT_NESTING
INT_BITS = 64
INT_LIMIT = 1 << (INT_BITS - 1)


def loads(data: bytes | str, *, max_bytes: int, max_depth: int = MAX_DEPTH) -> Any:
    """Parse one strict JSON document; raise JSONDefect saying what is wrong."""
    size = len(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
    if size > max_bytes:
        raise JSONDefect(f"{size} bytes is more than the {max_bytes} bytes allowed")
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise JSONDefect(f"not UTF-8 text ({e.reason} at byte {e.start})") from None
    else:
        text = data
    try:
        return decode_json(text, max_depth=max_depth, int_bits=INT_BITS)
    except JSONDefect as e:
        raise JSONDefect(f"not valid JSON: {e}") from None


def check_value(value: Any, *, max_depth: int = MAX_DEPTH) -> None:
    """The same bounds for a document built in memory (a result dict given to
    ``sign_result``): finite floats, 64-bit integers, no lone surrogates, depth."""
    check_tree(value, max_depth)  # first: a cycle is refused as too deep, not walked forever
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, bool) or item is None or isinstance(item, str):
            continue
        if isinstance(item, int):
            if not -INT_LIMIT <= item < INT_LIMIT:
                raise JSONDefect(
                    f"an integer of {item.bit_length()} bits is outside the signed"
                    f" {INT_BITS}-bit range"
                )
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
