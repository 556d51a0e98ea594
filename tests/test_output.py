"""envlock.output: the --json layout and the plain table."""

from __future__ import annotations

import pytest

from envlock.output import dumps, table


def test_dumps_is_indented_json_with_text_as_is_and_a_newline() -> None:
    assert dumps({"a": [1, "é"], "b": {}, "c": None}) == (
        '{\n  "a": [\n    1,\n    "é"\n  ],\n  "b": {},\n  "c": null\n}\n'
    )


def test_table_aligns_columns() -> None:
    assert table(["name", "v"], [["a", "1.0"], ["long-name", "2"]]) == (
        "name       v\n---------  ---\na          1.0\nlong-name  2\n"
    )


@pytest.mark.parametrize(
    ("argv", "helped"),
    [
        (["lock", "tensorflow==2.15", "--bogus"], "envlock lock --help"),
        (["resolve", "tensorflow==2.15", "--nope"], "envlock resolve --help"),
        (["ci"], "envlock ci --help"),
        (["--bogus"], "envlock --help"),
    ],
)
def test_usage_errors_point_to_the_sub_commands_help(argv, helped, capsys):
    from envlock.cli import main

    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == f"  hint: see '{helped}'"
