"""Reading ci build's summary.json (envlock.ci.summary.read_summary), as
``envlock report page --summary`` does: a damaged one is exit 2 naming the
cell and the field, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from report_support import cli, make_keys


def _summary(folder: Path, cells: list[dict[str, Any]]) -> Path:
    path = folder / "summary.json"
    path.write_text(json.dumps({"schema": "envlock.ci-build/v1", "cells": cells}))
    return path


@pytest.mark.parametrize(
    ("cell", "field"),
    [
        ({"cell": "tf215", "report": "tf215/report\u0000.intoto.json"}, "report"),
        ({"cell": "tf\u0000215", "report": "tf215/report.intoto.json"}, "cell"),
        ({"cell": "tf\u0000215", "report": None, "reason": "build failed"}, "cell"),
    ],
)
def test_a_nul_in_a_summary_path_is_exit_2_naming_the_field(
    tmp_path: Path, capsys: Any, cell: dict[str, Any], field: str
) -> None:
    """Before: ValueError: embedded null byte, a traceback out of report page."""
    _, pub = make_keys(tmp_path, "ci")
    summary = _summary(tmp_path, [cell])
    code, _, err = cli(
        capsys, "report", "page", "--summary", str(summary), "--key", str(pub), "-o",
        str(tmp_path / "page"),
    )  # fmt: skip
    assert code == 2, err
    assert f"envlock: error: {summary}: cells[0].{field}: holds a NUL character" in err
    assert "Traceback" not in err and not (tmp_path / "page").exists()


def test_a_report_path_in_a_link_loop_is_exit_2(tmp_path: Path, capsys: Any) -> None:
    _, pub = make_keys(tmp_path, "ci")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    summary = _summary(tmp_path, [{"cell": "tf215", "report": "loop/report.intoto.json"}])
    code, _, err = cli(
        capsys, "report", "page", "--summary", str(summary), "--key", str(pub), "-o",
        str(tmp_path / "page"),
    )  # fmt: skip
    assert code == 2, err
    # before 3.13 Path.resolve raises on the loop (named with the summary's field);
    # from 3.13 it does not, and reading the report says why it cannot
    assert (
        f"{summary}: cells[0].report: 'loop/report.intoto.json' cannot be followed" in err
        or "loop/report.intoto.json: Too many levels of symbolic links" in err
    ), err
    assert "Traceback" not in err
