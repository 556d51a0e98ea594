"""What a capture left out of its lock: ``DIR/left-out.json``.

``envlock capture -r FREEZE`` locks what can be locked and lists every other
line with one reason from ``REASONS`` and the command that would take it in.
The list goes into the bundle in the same all-or-nothing write as the lock
(``envlock.bundle.folder.LockRequest.extra_files``: it is in the manifest), so
a failed capture leaves the earlier one whole and a bundle never holds a
lock from one capture beside the list of another. doctor and restore read it
back with ``read`` (bounded, validated: a bundle folder is input) to say what
the lock does not hold.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from envlock.errors import UsageError
from envlock.readers import read_bytes

FILE = "left-out.json"
SCHEMA = 1
MAX_BYTES = 4 * 1024 * 1024  # a 726-line freeze with 40 left out: ~12 KB
MAX_ENTRIES = 10_000
MAX_TEXT = 4096  # one field of one entry

REASONS = {
    "os-package": "installed by the OS package manager",
    "other-index": "needs an index not given",
    "yanked": "yanked or removed from the index",
    "direct": "a direct URL, file or VCS install",
    "no-distribution": "no distribution for this Python/platform",
}


class LeftOutDict(TypedDict):
    line: str
    name: str
    reason: str
    detail: str
    command: str | None


@dataclass(frozen=True)
class LeftOut:
    """One line of the freeze the lock does not hold, why, and what takes it in."""

    line: str  # the freeze line as written
    name: str  # canonical name; "" when the line names none
    reason: str  # a key of REASONS
    detail: str  # the evidence (nearest version, the index's files)
    command: str | None  # the command that would take it in; None where none does yet

    def describe(self) -> str:
        return f"{self.line}: {REASONS[self.reason]}: {self.detail}"

    def to_dict(self) -> LeftOutDict:
        return {
            "line": self.line,
            "name": self.name,
            "reason": self.reason,
            "detail": self.detail,
            "command": self.command,
        }


class LeftOutFileDict(TypedDict):
    schema: int
    source: str
    python: str
    python_how: str
    lines: int
    locked: int
    left_out: list[LeftOutDict]


@dataclass(frozen=True)
class LeftOutFile:
    source: str  # "-r FREEZE"
    python: str  # the Python minor locked for
    python_how: str  # where that Python came from
    lines: int  # the freeze's requirement lines
    locked: int  # of them, locked at their own version
    left_out: tuple[LeftOut, ...]

    def to_dict(self) -> LeftOutFileDict:
        return {
            "schema": SCHEMA,
            "source": self.source,
            "python": self.python,
            "python_how": self.python_how,
            "lines": self.lines,
            "locked": self.locked,
            "left_out": [item.to_dict() for item in self.left_out],
        }

    def to_bytes(self) -> bytes:
        return (json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n").encode()


def _text(value: object, optional: bool = False) -> bool:
    if optional and value is None:
        return True
    return isinstance(value, str) and len(value) <= MAX_TEXT and value.isprintable()


def from_dict(doc: object, where: str) -> LeftOutFile:
    """A parsed left-out.json -> LeftOutFile; UsageError naming the path into it."""

    def bad(path: str, what: str) -> UsageError:
        return UsageError(
            f"{where}: {path}: {what}",
            hint=f"capture again, or remove {shlex.quote(where)} (the lock works without it)",
        )

    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise bad("schema", f"not envlock's {FILE} (schema {SCHEMA})")
    for key in ("source", "python", "python_how"):
        if not _text(doc.get(key)):
            raise bad(key, "expected a line of text")
    for key in ("lines", "locked"):
        value = doc.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_ENTRIES:
            raise bad(key, f"expected a count from 0 to {MAX_ENTRIES}")
    entries = doc.get("left_out")
    if not isinstance(entries, list) or len(entries) > MAX_ENTRIES:
        raise bad("left_out", f"expected a list of at most {MAX_ENTRIES} entries")
    items: list[LeftOut] = []
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise bad(f"left_out[{i}]", "expected a table")
        for key in ("line", "name", "detail"):
            if not _text(e.get(key)):
                raise bad(f"left_out[{i}].{key}", "expected a line of text")
        if not _text(e.get("command"), optional=True):
            raise bad(f"left_out[{i}].command", "expected a line of text or null")
        if e.get("reason") not in REASONS:
            raise bad(f"left_out[{i}].reason", f"expected one of {', '.join(REASONS)}")
        items.append(LeftOut(e["line"], e["name"], e["reason"], e["detail"], e.get("command")))
    return LeftOutFile(
        doc["source"], doc["python"], doc["python_how"], doc["lines"], doc["locked"], tuple(items)
    )


def read(folder: Path) -> LeftOutFile | None:
    """DIR/left-out.json; None when the bundle has none (a lock, or a capture of a venv)."""
    path = folder / FILE
    if not path.exists() and not path.is_symlink():
        return None
    hint = f"capture again, or remove {shlex.quote(str(path))} (the lock works without it)"
    data = read_bytes(path, "", limit=MAX_BYTES, hint=hint, follow=False)  # in DIR itself
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise UsageError(f"{path}: not readable as envlock's {FILE} ({e})", hint=hint) from None
    return from_dict(doc, str(path))


def retarget(command: str | None, python: str) -> str | None:
    """A recorded ``DIR/.venv/bin/python -m pip install ...`` command (capture's,
    for the venv bootstrap.sh makes) aimed at ``python`` instead: the interpreter a
    restore or a doctor is about. Any other command as recorded."""
    if not command:
        return command
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    if (
        len(words) > 4
        and words[0].endswith("/.venv/bin/python")
        and words[1:4]
        == [
            "-m",
            "pip",
            "install",
        ]
    ):
        return shlex.join([python, *words[1:]])
    return command


def counts(items: Sequence[LeftOut]) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        out[item.reason] = out.get(item.reason, 0) + 1
    return out


def summary(locked: int, total: int, items: Sequence[LeftOut], other: int = 0) -> str:
    """``locked 689 of 726; 37 left out: 4 installed by the OS package manager, ...``"""
    said = f"locked {locked} of {total}"
    if other:
        said += f"; {other} at another version or not at all"
    if not items:
        return said + "; none left out"
    n = counts(items)
    parts = ", ".join(f"{n[r]} {REASONS[r]}" for r in REASONS if r in n)
    return f"{said}; {len(items)} left out: {parts}"
