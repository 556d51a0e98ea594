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
