"""envlock matrix refresh --check: the canary that the matrix is behind the index."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from fixtures.index.fakeindex import FakeIndex, FakeWheel, make_wheel
from test_matrix_refresh import BUILD_INFO_2_22, HEADERS_2_22, META_2_22, _wheel, build_index

from envlock.cli import main


@pytest.fixture
def index(monkeypatch: pytest.MonkeyPatch, make_index: Callable[..., FakeIndex]) -> FakeIndex:
    monkeypatch.setenv("ENVLOCK_HTTP_BACKOFF", "0.01")
    monkeypatch.setenv("ENVLOCK_HTTP_RETRIES", "3")
    return build_index(make_index())


def _written(index: FakeIndex, tmp_path: Path) -> Path:
    out = tmp_path / "tensorflow.toml"
    assert main(["matrix", "refresh", "--index-url", index.url, "-o", str(out), "--json"]) == 0
    return out


def _check(index: FakeIndex, path: Path, *extra: str) -> int:
    return main(["matrix", "refresh", "--check", "--index-url", index.url, "-o", str(path), *extra])


def _add_release(index: FakeIndex, version: str, upload: str) -> str:
    name = _wheel(version, "313", "manylinux_2_27_x86_64")
    meta = META_2_22.replace("Version: 2.22.0rc0", f"Version: {version}")
    data = make_wheel(name, metadata=meta, build_info=BUILD_INFO_2_22, members=HEADERS_2_22)
    index.add(FakeWheel(name, data, upload_time=upload))
    return name


def test_current_is_exit_0_and_writes_nothing(
    index: FakeIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _written(index, tmp_path)
    before = path.read_bytes()
    capsys.readouterr()
    assert _check(index, path) == 0
    out = capsys.readouterr().out
    assert out == (
        f"current: {path} has every one of the 6 tensorflow releases and release "
        "candidates on the index, row for row\n"
    )
    assert path.read_bytes() == before


def test_one_added_release_is_exit_1_naming_it(
    index: FakeIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _written(index, tmp_path)
    before = path.read_bytes()
    _add_release(index, "2.22.0", "2026-11-01T12:00:00Z")
    capsys.readouterr()
    assert _check(index, path) == 1
    captured = capsys.readouterr()
    assert captured.out == "new on the index: tensorflow 2.22.0 (release, 2026-11-01)\n"
    assert "envlock: check failed: 1 new, 0 differing, 0 gone" in captured.err
    assert f"hint: run 'envlock matrix refresh -o {path}'" in captured.err
    assert path.read_bytes() == before  # --check writes nothing
    # the hint pasted brings the file up to date, and the check passes again
    assert main(["matrix", "refresh", "--index-url", index.url, "-o", str(path), "--json"]) == 0
    capsys.readouterr()
    assert _check(index, path) == 0


def test_a_candidate_and_a_changed_row_are_named(
    index: FakeIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _written(index, tmp_path)
    text = path.read_text()
    edited = text.replace('cuda_from = "cuda_config.h"', 'cuda_from = "tested-configs"', 1)
    assert edited != text
    path.write_text(edited)
    _add_release(index, "2.23.0rc0", "2026-12-01T00:00:00Z")
    capsys.readouterr()
    assert _check(index, path, "--json") == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["current"] is False
    assert doc["new"] == [
        {"version": "2.23.0rc0", "prerelease": True, "uploaded": "2026-12-01T00:00:00Z"}
    ]
    assert doc["changed"] == [
        {
            "version": "2.22.0rc0",
            "fields": [
                {"field": "cuda_from", "shipped": "tested-configs", "index": "cuda_config.h"}
            ],
        }
    ]
    assert doc["gone"] == []
    assert _check(index, path) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "new on the index: tensorflow 2.23.0rc0 (release candidate, 2026-12-01)",
        'differs: tensorflow 2.22.0rc0: cuda_from: shipped "tested-configs", index "cuda_config.h"',
    ]


def test_check_and_notes_only_do_not_go_together(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["matrix", "refresh", "--check", "--notes-only"]) == 2
    assert "--check and --notes-only do not go together" in capsys.readouterr().err
