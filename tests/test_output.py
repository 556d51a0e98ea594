"""envlock.output: the --json layout and the plain table."""

from __future__ import annotations

from envlock.output import dumps, table


def test_dumps_is_indented_json_with_text_as_is_and_a_newline() -> None:
    assert dumps({"a": [1, "é"], "b": {}, "c": None}) == (
        '{\n  "a": [\n    1,\n    "é"\n  ],\n  "b": {},\n  "c": null\n}\n'
    )


def test_table_aligns_columns() -> None:
    assert table(["name", "v"], [["a", "1.0"], ["long-name", "2"]]) == (
        "name       v\n---------  ---\na          1.0\nlong-name  2\n"
    )
