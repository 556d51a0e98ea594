"""`envlock report page -o DIR` never overwrites an input of the run (ci build's
summary.json, a report named index.html) or a file a report page did not write,
without --force (issue #21), as `lock -o` refuses a bundle folder's foreign files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from envlock.report import envelope_bytes, sign_result
from tests.report_support import cli, make_bundle, make_keys, smoke_result


@pytest.fixture
def signed(tmp_path: Path) -> tuple[Path, Path]:
    """(a PASSED report, the public key)."""
    key, pub = make_keys(tmp_path, "team")
    env = sign_result(smoke_result(), key, lock_dir=make_bundle(tmp_path), image_id=None)
    report = tmp_path / "cell.intoto.json"
    report.write_bytes(envelope_bytes(env))
    return report, pub


def _page(capsys: Any, pub: Path, out: Path, *args: str) -> tuple[int, str, str]:
    return cli(capsys, "report", "page", *args, "--key", str(pub), "-o", str(out))


def test_the_ci_folder_holding_its_summary_is_refused(
    tmp_path: Path, capsys: Any, signed: tuple[Path, Path]
) -> None:
    report, pub = signed
    run = tmp_path / "run"
    run.mkdir()
    (run / "cell").mkdir()
    report.rename(run / "cell" / "report.intoto.json")
    summary = run / "summary.json"
    doc = {
        "schema": "envlock.ci-build/v1",
        "cells": [{"cell": "c", "report": "cell/report.intoto.json"}],
    }
    summary.write_text(json.dumps(doc))
    before = summary.read_bytes()
    code, _, err = _page(capsys, pub, run, "--summary", str(summary))
    assert code == 2, err
    assert f"{summary} is the summary --summary" in err and "--force" in err
    assert summary.read_bytes() == before and not (run / "index.html").exists()
    code, _, err = _page(capsys, pub, run, "--summary", str(summary), "--force")
    assert code == 0, err
    assert json.loads(summary.read_text())["schema"] == "envlock.report-page/v1"


def test_a_report_named_index_html_is_refused(
    tmp_path: Path, capsys: Any, signed: tuple[Path, Path]
) -> None:
    report, pub = signed
    out = tmp_path / "site"
    out.mkdir()
    named = out / "index.html"
    report.rename(named)
    before = named.read_bytes()
    code, _, err = _page(capsys, pub, out, str(named))
    assert code == 2, err
    assert f"{named} is the report {named}" in err
    assert named.read_bytes() == before and not (out / "summary.json").exists()


@pytest.mark.parametrize("name", ["index.html", "summary.json"])
def test_a_file_the_page_did_not_write_is_refused_without_force(
    tmp_path: Path, capsys: Any, signed: tuple[Path, Path], name: str
) -> None:
    report, pub = signed
    out = tmp_path / "site"
    out.mkdir()
    own = out / name
    own.write_text("<h1>the project's own page</h1>\n" if name == "index.html" else '{"a": 1}\n')
    before = own.read_bytes()
    code, _, err = _page(capsys, pub, out, str(report))
    assert code == 2, err
    assert f"{own} was not written by envlock report page" in err and "--force" in err
    assert own.read_bytes() == before
    code, _, err = _page(capsys, pub, out, str(report), "--force")
    assert code == 0, err
    assert own.read_bytes() != before


def test_a_link_planted_at_an_output_is_refused(
    tmp_path: Path, capsys: Any, signed: tuple[Path, Path]
) -> None:
    report, pub = signed
    out = tmp_path / "site"
    out.mkdir()
    (out / "index.html").symlink_to(tmp_path / "elsewhere.html")
    code, _, err = _page(capsys, pub, out, str(report))
    assert code == 2, err
    assert not (tmp_path / "elsewhere.html").exists()


def test_a_page_is_written_again_over_its_own_files(
    tmp_path: Path, capsys: Any, signed: tuple[Path, Path]
) -> None:
    report, pub = signed
    out = tmp_path / "site"
    for _ in range(2):
        code, _, err = _page(capsys, pub, out, str(report))
        assert code == 0, err
    assert json.loads((out / "summary.json").read_text())["verified"] == 1
