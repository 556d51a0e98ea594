"""Printing for people and machines. Rich is imported only when drawing."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from typing import Any, TextIO

# What a terminal acts on instead of showing: C0 controls but newline and tab
# (ESC starts the sequences that move the cursor, repaint a line or set a window
# title), DEL, C1 controls (U+009B is a one-character CSI), and the bidirectional
# overrides that reorder what a reader sees.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def escaped(text: str, *, newlines: bool = False) -> str:
    """``text`` with every character a terminal would act on shown as an escape
    (``\\x1b``, ``\\u202e``); ``newlines``: newline and tab too (a table cell)."""
    pattern = _CONTROLS if not newlines else _CELL
    return pattern.sub(_escape, text)


_CELL = re.compile(_CONTROLS.pattern[:1] + "\t\n" + _CONTROLS.pattern[1:])


def first_control(text: str) -> str | None:
    """The first character of ``text`` a terminal would act on, as ``U+XXXX``; else None."""
    m = _CONTROLS.search(text)
    return f"U+{ord(m.group()):04X}" if m else None


def _escape(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


class EscapingWriter:
    """A text stream that shows terminal controls escaped (``escaped``): stdout
    carries results made of text from files, indexes, registries and reports."""

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner

    def write(self, text: str) -> int:
        self._inner.write(escaped(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def dumps(obj: Any) -> str:
    """The ``--json`` layout: ``json.dumps(obj, indent=2, ensure_ascii=False)``
    plus a newline; what a terminal would act on and JSON leaves raw (DEL, C1,
    the bidi overrides) written as ``\\uXXXX`` escapes (JSON's own, decoding to
    the same text)."""
    text = json.dumps(obj, indent=2, ensure_ascii=False) + "\n"
    return _CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def emit_json(obj: Any) -> None:
    sys.stdout.write(dumps(obj))


def stderr_is_tty() -> bool:
    return sys.stderr.isatty()


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain aligned text table (stable for tests and pipes)."""
    headers = [escaped(h, newlines=True) for h in headers]
    rows = [[escaped(c, newlines=True) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = ["  ".join(h.ljust(widths[i]) for i, h in enumerate(headers)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        lines.append("  ".join(c.ljust(widths[i]) for i, c in enumerate(row)).rstrip())
    return "\n".join(lines) + "\n"


REASON_WIDTH = 90


def short(text: str, width: int = REASON_WIDTH) -> str:
    """``text`` on one line for a table cell: at most ``width`` characters, cut at a word
    with "..." when longer (the whole text stays in ``--json`` and in the files)."""
    text = " ".join(str(text).split())
    if len(text) <= width:
        return text
    cut = text[: width - 3]
    space = cut.rfind(" ")
    if space > width // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:(") + "..."


def wrote(path: object, what: str) -> None:
    """Say on stderr where a command wrote a file ("envlock: wrote the report to PATH")."""
    sys.stderr.write(f"envlock: wrote {what} to {path}\n")
