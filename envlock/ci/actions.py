"""The table of pinned GitHub Actions: ``matrices/actions.toml`` or ``--actions-from FILE``.

Every ``uses:`` envlock writes is ``ACTION@<40-hex commit> # <tag>`` from one
row of this table; a row says where its SHA was read. ``load_actions`` reads
and checks the table (errors name the row: ``actions.toml: actions[2].sha:
...``); ``ActionTable.pin`` is the only way a ``uses:`` value is made.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envlock.errors import DataError, UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TABLE = "actions.toml"
SHA = re.compile(r"^[0-9a-f]{40}$")
ACTION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,38}/[A-Za-z0-9_.-]{1,100}(/[A-Za-z0-9_./-]+)?$")
TAG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,99}$")
# the actions a workflow envlock writes uses; a table must have each of them
REQUIRED = (
    "actions/checkout",
    "actions/setup-python",
    "actions/upload-artifact",
    "actions/download-artifact",
    "docker/login-action",
)


@dataclass(frozen=True)
class PinnedAction:
    action: str  # owner/name[/path]
    tag: str  # the release the SHA is
    sha: str  # 40 hex: the tag's commit
    read: str  # where and when the SHA was read

    @property
    def uses(self) -> str:
        return f"{self.action}@{self.sha}"


@dataclass(frozen=True)
class ActionTable:
    source: str  # the file, for messages
    actions: tuple[PinnedAction, ...]

    def get(self, action: str) -> PinnedAction:
        for row in self.actions:
            if row.action == action:
                return row
        raise DataError(
            f"{self.source}: no row for {action}",
            hint=f"add [[actions]] action = {action!r} with its tag, sha and read",
        )

    def pins(self) -> dict[str, PinnedAction]:
        """{action: row} of every action a generated workflow uses (each must be a row)."""
        return {name: self.get(name) for name in REQUIRED}


def _string(row: dict[str, Any], key: str, where: str, shape: re.Pattern[str], what: str) -> str:
    value = row.get(key)
    if not isinstance(value, str) or not shape.fullmatch(value):
        raise DataError(f"{where}.{key}: {value!r} is not {what}", hint=f"fix {where}")
    return value


def parse_actions(data: dict[str, Any], source: str) -> ActionTable:
    if data.get("schema_version") != 1:
        raise DataError(
            f"{source}: schema_version {data.get('schema_version')!r}: expected 1",
            hint="write schema_version = 1 (the layout of matrices/actions.toml)",
        )
    rows = data.get("actions")
    if not isinstance(rows, list) or not rows:
        raise DataError(
            f"{source}: no [[actions]] rows", hint="see envlock/data/matrices/actions.toml"
        )
    out: list[PinnedAction] = []
    seen: set[str] = set()
    for i, row in enumerate(rows):
        where = f"{source}: actions[{i}]"
        if not isinstance(row, dict):
            raise DataError(f"{where}: not a table", hint="write each row as [[actions]]")
        action = _string(row, "action", where, ACTION, "an action (owner/name)")
        if action in seen:
            raise DataError(f"{where}.action: {action} has two rows", hint="keep one")
        seen.add(action)
        out.append(
            PinnedAction(
                action=action,
                tag=_string(row, "tag", where, TAG, "a release tag"),
                sha=_string(row, "sha", where, SHA, "a full commit SHA (40 lowercase hex)"),
                read=_string(row, "read", where, re.compile(r"^[^\x00-\x1f\x7f]{1,300}$"), "text"),
            )
        )
    return ActionTable(source, tuple(out))


def load_actions(path: Path | None = None) -> ActionTable:
    """The shipped table, or the one ``--actions-from`` names (UsageError if unreadable)."""
    if path is None:
        from envlock.resources import read_bytes

        return parse_actions(tomllib.loads(read_bytes("matrices", TABLE).decode()), TABLE)
    source = str(path)
    from envlock.readers import read_text

    text = read_text(  # bounded, a regular file: a FIFO or /dev/zero is exit 2
        path,
        "--actions-from",
        hint="give a TOML file laid out as envlock/data/matrices/actions.toml",
    )
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"--actions-from {path}: not TOML: {e}", hint="fix the file") from e
    try:
        table = parse_actions(data, source)
        table.pins()
    except DataError as e:
        raise UsageError(e.message, hint=e.hint) from e
    return table


USES = re.compile(r"^\s*(?:-\s+)?uses:\s*(?P<ref>[^\s#]+)\s*(?:#\s*(?P<comment>\S+))?\s*$")


def uses_lines(text: str) -> list[tuple[str, str | None]]:
    """Every ``uses:`` of a workflow file: (``ACTION@REF``, the comment's first word)."""
    found = []
    for line in text.splitlines():
        m = USES.match(line)
        if m:
            found.append((m.group("ref"), m.group("comment")))
    return found


def unpinned(text: str, table: ActionTable) -> list[str]:
    """The ``uses:`` of ``text`` that are not ``ACTION@SHA # TAG`` of a row of ``table``."""
    rows = {a.action: a for a in table.actions}
    problems = []
    for ref, comment in uses_lines(text):
        action, _, version = ref.partition("@")
        row = rows.get(action)
        if row is None:
            problems.append(f"{ref}: {action} is not in {table.source}")
        elif version != row.sha or comment != row.tag:
            problems.append(f"{ref} # {comment}: the table pins {row.uses} # {row.tag}")
    return problems
