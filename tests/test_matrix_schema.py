"""envlock.matrix.schema: the one validator of the matrix files, and what the
parsers built on it read from the committed files.

The parsed matrices are compared whole: tensorflow.toml with the document it
was read from (the file is written from ``to_dict``), the other files with
goldens under tests/golden/matrix/ (refresh them only with
ENVLOCK_UPDATE_GOLDEN=1, and review the diff).
"""

from __future__ import annotations

import copy
import datetime
import functools
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.version import Version

from envlock.errors import DataError
from envlock.matrix import check, cuda, gpus, read_toml, tensorflow, tested
from envlock.matrix.schema import MINOR, PYTHON_MINOR, Checker, show

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


# -- show and the checker ----------------------------------------------------------


def test_show_writes_values_as_toml_does() -> None:
    assert show('say "hi" \\ bye') == '"say \\"hi\\" \\\\ bye"'
    assert [show(True), show(False), show(3), show(2.5)] == ["true", "false", "3", "2.5"]
    assert [show([1]), show({"a": 1})] == ["a list", "a table"]
    assert show(datetime.date(2026, 1, 1)) == "date"  # an unquoted TOML date


def checker() -> Checker:
    return Checker("m.toml", "fix it")


def failure(call: Callable[[], object]) -> tuple[str, str | None]:
    with pytest.raises(DataError) as info:
        call()
    assert info.value.exit_code == 2
    return info.value.message, info.value.hint


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({}, "m.toml: rows[2].cuda: missing"),
        ({"cuda": 12.2}, "m.toml: rows[2].cuda: expected a string, got 12.2"),
        ({"cuda": " "}, "m.toml: rows[2].cuda: must not be empty"),
        ({"cuda": "12"}, 'm.toml: rows[2].cuda: expected "X.Y", got "12"'),
        # the whole value matches, a trailing newline included
        ({"cuda": "12.2\n"}, 'm.toml: rows[2].cuda: expected "X.Y", got "12.2\n"'),
    ],
)
def test_string_errors_carry_the_path(row: dict[str, Any], message: str) -> None:
    assert failure(lambda: checker().string(row, "cuda", "rows[2]", MINOR)) == (message, "fix it")


def test_string_defaults() -> None:
    c = checker()
    assert c.string({"cuda": "12.2"}, "cuda", "rows[2]", MINOR) == "12.2"
    assert c.string({}, "note", "rows[2]", required=False) == ""
    assert c.string({"note": ""}, "note", "rows[2]", empty=True) == ""
    # at the top of the document the path is the key alone
    assert failure(lambda: c.string({}, "data_version", ""))[0] == "m.toml: data_version: missing"


def test_strings_are_distinct_non_empty_and_shaped() -> None:
    c = checker()
    assert c.strings({"python": ["3.9", "3.10"]}, "python", "r", PYTHON_MINOR) == ("3.9", "3.10")
    assert c.strings({"python": []}, "python", "r") == ()
    cases = [
        ({"python": "3.9"}, 'r.python: expected a list of strings, got "3.9"'),
        ({"python": ["3.9", 3]}, "r.python[1]: expected a string, got 3"),
        ({"python": ["3.9", ""]}, "r.python[1]: must not be empty"),
        ({"python": ["3.9", "py3"]}, 'r.python[1]: expected "3.X", got "py3"'),
        ({"python": ["3.9", "3.9"]}, 'r.python[1]: "3.9" is listed twice'),
    ]
    for row, message in cases:
        call = functools.partial(c.strings, row, "python", "r", PYTHON_MINOR)
        assert failure(call)[0] == f"m.toml: {message}"
    assert failure(lambda: c.strings({"os": []}, "os", "r", non_empty=True))[0] == (
        "m.toml: r.os: expected a non-empty list of strings, got a list"
    )


def test_tables_rows_and_duplicates() -> None:
    c = checker()
    assert failure(lambda: c.table({"a": 1, "b": 2, "z": 3}, "rows[0]", ("a",)))[0] == (
        "m.toml: rows[0].b: unknown field"
    )
    assert failure(lambda: c.table("x", "rows[0]", ("a",)))[0] == (
        'm.toml: rows[0]: expected a table, got "x"'
    )
    assert failure(lambda: c.rows({"rows": []}, "rows"))[0] == (
        "m.toml: rows: expected a non-empty array of tables ([[rows]])"
    )
    assert c.rows({}, "notes", required=False) == []
    assert failure(lambda: c.rows({"notes": 5}, "notes", required=False))[0] == (
        "m.toml: notes: expected an array of tables ([[notes]])"
    )
    # compared by key, shown as written
    names = ["NVIDIA H200", "Tesla T4", "nvidia h200"]
    c.distinct("gpus", "name", names)
    assert failure(lambda: c.distinct("gpus", "name", names, key=str.casefold))[0] == (
        'm.toml: gpus[2].name: "nvidia h200" is listed twice (also gpus[0])'
    )


def test_header_and_sources() -> None:
    c = checker()
    assert c.header({"schema_version": 1, "data_version": "2026-01-01"}, 1) == (1, "2026-01-01")
    assert failure(lambda: c.header({"schema_version": 2, "data_version": "2026-01-01"}, 1)) == (
        "m.toml: schema_version: this envlock reads schema 1, the file has 2",
        "use the envlock release that wrote the file",
    )
    assert failure(lambda: c.header({"schema_version": True}, 1))[0] == (
        "m.toml: schema_version: expected an integer, got true"
    )
    assert failure(lambda: c.header({"schema_version": 1, "data_version": "May"}, 1))[0] == (
        'm.toml: data_version: expected "YYYY-MM-DD", got "May"'
    )
    assert c.sources({"sources": {"web": "a page"}}) == (("web", "a page"),)
    assert c.source({"from": "web"}, "from", "rows[0]") == "web"
    assert failure(lambda: c.source({"from": "blog"}, "from", "rows[0]"))[0] == (
        'm.toml: rows[0].from: "blog" is not a key of [sources]'
    )


def test_numbers_versions_specifiers_requirements() -> None:
    c = checker()
    assert c.positive_number({"tflops": 67}, "tflops", "g") == 67.0
    assert c.optional_positive_number({}, "tflops", "g") is None
    assert failure(lambda: c.positive_number({"tflops": True}, "tflops", "g"))[0] == (
        "m.toml: g.tflops: expected a positive number, got true"
    )
    assert c.boolean({}, "yanked", "r", default=False) is False
    assert failure(lambda: c.boolean({"yanked": "no"}, "yanked", "r", default=False))[0] == (
        'm.toml: r.yanked: expected true or false, got "no"'
    )
    assert c.version({"version": "2.15.0.post1"}, "version", "r") == Version("2.15.0.post1")
    assert failure(lambda: c.version({"version": "two"}, "version", "r"))[0] == (
        'm.toml: r.version: not a version: "two"'
    )
    assert str(c.specifier(">=3.9", "r.requires_python")) == ">=3.9"
    assert failure(lambda: c.specifier("3.x", "r.requires_python"))[0] == (
        'm.toml: r.requires_python: not a version specifier: "3.x"'
    )
    assert c.requirement("nvidia-cudnn-cu12==8.9.4.25", "r.and_cuda[0]").name == "nvidia-cudnn-cu12"
    assert failure(lambda: c.requirement("x ===", "r.and_cuda[0]"))[0].startswith(
        "m.toml: r.and_cuda[0]: not a requirement: "
    )
    assert c.choice({}, "images", "r", ("eol",), required=False) == ""
    assert failure(lambda: c.choice({"images": "gone"}, "images", "r", ("deleted", "eol")))[0] == (
        'm.toml: r.images: expected one of "deleted", "eol", got "gone"'
    )


# -- every parser on damaged documents: a DataError naming the file, never a crash ------

PARSERS: dict[str, Callable[[dict[str, Any], str], object]] = {
    "cuda.toml": cuda.parse,
    "gpus.toml": gpus.parse,
    tested.FILENAME: tested.parse,
    check.NOTES_FILENAME: check.parse_notes,
}
_DELETE = object()  # the key is removed
DAMAGE = st.one_of(
    st.just(_DELETE),
    st.none(),  # the document as it is
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=False),
    st.text(max_size=8),
    st.lists(st.one_of(st.text(max_size=6), st.integers()), max_size=3),
    st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2),
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(PARSERS)), st.data(), DAMAGE)
def test_damaged_documents_fail_cleanly(name: str, data: st.DataObject, value: Any) -> None:
    doc = copy.deepcopy(read_toml(name)[0])
    target: Any = doc
    key = data.draw(st.sampled_from(sorted(doc)))
    if isinstance(doc[key], list) and doc[key] and data.draw(st.booleans()):
        target = data.draw(st.sampled_from(doc[key]))  # a field of one row
        key = data.draw(st.sampled_from([*sorted(target), "colour"]))
    if value is _DELETE:
        target.pop(key, None)
    elif value is not None:
        target[key] = value
    try:
        PARSERS[name](doc, f"matrices/{name}")
    except DataError as e:
        assert e.message.startswith(f"matrices/{name}: ")
        assert e.hint


def test_problems_the_old_validators_let_through() -> None:
    doc = read_toml("cuda.toml")[0]
    with pytest.raises(DataError, match=r"^matrices/cuda\.toml: driver_branches: expected an "):
        cuda.parse({**doc, "driver_branches": 5}, "matrices/cuda.toml")  # was a TypeError
    doc = read_toml(tested.FILENAME)[0]
    for damaged, message in [
        ({**doc, "schema_version": True}, "schema_version: expected an integer, got true"),
        (
            {**doc, "configs": [*doc["configs"], {**doc["configs"][0], "cuda": "12.5\n"}]},
            'configs[22].cuda: expected "X.Y", got "12.5\n"',
        ),
        (
            {**doc, "configs": [{**doc["configs"][0], "colour": "red"}]},
            "configs[0].colour: unknown field",
        ),
        (
            {**doc, "configs": [*doc["configs"], doc["configs"][3]]},
            'configs[22].version: "2.18.0" is listed twice (also configs[3])',
        ),
    ]:
        with pytest.raises(DataError) as info:
            tested.parse(damaged, "t.toml")
        assert info.value.message == f"t.toml: {message}"
