"""Each TensorFlow release's upload time in matrices/tensorflow.toml (``uploaded``).

Written by ``envlock matrix refresh`` from the index's PEP 691 ``upload-time``
(the earliest of the release's Linux x86_64 wheels), validated by the schema,
and what ``--exclude-newer`` compares with in resolve.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from envlock.errors import DataError
from envlock.index.pep691 import IndexFile
from envlock.matrix import tensorflow
from envlock.matrix.refresh import first_upload


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    from pathlib import Path

    from envlock.readers import parse_toml

    path = Path(__file__).parent.parent / "envlock" / "data" / "matrices" / "tensorflow.toml"
    return parse_toml(path.read_text(encoding="utf-8"), str(path))


def test_every_shipped_release_has_its_upload_time(doc: dict[str, Any]) -> None:
    matrix = tensorflow.parse(doc, "matrices/tensorflow.toml")
    by_version = {str(r.version): r.uploaded for r in matrix.releases}
    assert all(by_version.values())
    # the index's own times: 2.15.1 on 2024-03-08, 2.16.1 just after midnight UTC
    assert by_version["2.15.1"] == "2024-03-08T23:47:13.274622Z"
    assert by_version["2.16.1"] == "2024-03-09T00:23:53.061937Z"
    # the newest release is the last one uploaded
    assert max(by_version.values()) == matrix.releases[-1].uploaded


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("2024-03-08", 'expected "YYYY-MM-DDTHH:MM:SS[.ffffff]Z"'),
        ("2024-03-08T23:47:13+00:00", 'expected "YYYY-MM-DDTHH:MM:SS[.ffffff]Z"'),
        ("2024-02-30T00:00:00Z", "is not a real date"),
        (20240308, "expected a string"),
    ],
)
def test_a_bad_upload_time_names_its_row(doc: dict[str, Any], value: Any, words: str) -> None:
    bad = copy.deepcopy(doc)
    bad["releases"][3]["uploaded"] = value
    with pytest.raises(DataError) as e:
        tensorflow.parse(bad, "matrices/tensorflow.toml")
    assert "matrices/tensorflow.toml: releases[3].uploaded: " in e.value.message
    assert words in e.value.message


def test_an_unknown_upload_time_is_allowed_and_round_trips(doc: dict[str, Any]) -> None:
    old = copy.deepcopy(doc)
    del old["releases"][0]["uploaded"]
    matrix = tensorflow.parse(old, "m")
    assert matrix.releases[0].uploaded == ""
    assert 'uploaded = ""' in tensorflow.dumps(matrix)


def _file(name: str, when: str) -> IndexFile:
    return IndexFile(name, f"http://x/{name}", "0" * 64, 1, when, False)


def test_refresh_takes_the_earliest_upload_in_utc() -> None:
    files = [
        _file("a.whl", "2024-03-09T00:51:38.779996Z"),
        _file("b.whl", "2024-03-09T01:23:14+01:00"),  # 00:23:14 UTC, the earliest
        _file("c.whl", ""),
    ]
    assert first_upload(files) == "2024-03-09T00:23:14Z"
    assert first_upload([_file("c.whl", "")]) == ""
