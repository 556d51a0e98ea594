"""envlock.matrix.schema: the one validator of the matrix files, and what the
parsers built on it read from the committed files.

The parsed matrices are compared whole: tensorflow.toml with the document it
was read from (the file is written from ``to_dict``), the other files with
goldens under tests/golden/matrix/ (refresh them only with
ENVLOCK_UPDATE_GOLDEN=1, and review the diff).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from envlock.matrix import check, cuda, gpus, read_toml, tensorflow, tested

REPO = Path(__file__).resolve().parent.parent
GOLDEN = REPO / "tests" / "golden" / "matrix"
UPDATE = os.environ.get("ENVLOCK_UPDATE_GOLDEN") == "1"


def plain(value: Any) -> Any:
    """A parsed matrix as JSON data: each record or dataclass as its fields."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (tuple, list)):
        return [plain(item) for item in value]
    names = [
        name
        for cls in reversed(type(value).__mro__)
        for name in getattr(cls, "__annotations__", {})
    ]
    if not names:  # a Version, SpecifierSet, ...: its text
        return str(value)
    return {name: plain(getattr(value, name)) for name in dict.fromkeys(names)}


def parsed(name: str) -> Any:
    doc, _digest, shown = read_toml(name)
    if name == "cuda.toml":
        return cuda.parse(doc, shown)
    if name == "gpus.toml":
        return gpus.parse(doc, shown)
    if name == tested.FILENAME:
        return tested.parse(doc, shown)
    return check.parse_notes(doc, shown)


@pytest.mark.parametrize("name", ["cuda.toml", "gpus.toml", tested.FILENAME, check.NOTES_FILENAME])
def test_parsed_matrix_equals_its_golden(name: str) -> None:
    got = json.dumps(plain(parsed(name)), indent=1, ensure_ascii=False) + "\n"
    path = GOLDEN / name.replace(".toml", ".json")
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(got, encoding="utf-8")
    assert path.is_file(), f"{path} missing: run with ENVLOCK_UPDATE_GOLDEN=1 once"
    assert got == path.read_text(encoding="utf-8"), f"parsed {name} differs from {path.name}"


def test_parsed_tensorflow_matrix_equals_its_document() -> None:
    doc, digest, shown = read_toml("tensorflow.toml")
    matrix = tensorflow.parse(doc, shown, digest=digest)
    assert matrix.to_dict() == doc  # every row, every field, in the file's order
    assert matrix.digest == digest
