"""Printing for people and machines. Rich is imported only when drawing."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any


def dumps(obj: Any) -> str:
    """The ``--json`` layout: ``json.dumps(obj, indent=2, ensure_ascii=False)``
    plus a newline."""
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


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
