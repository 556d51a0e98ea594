"""Refresh a few releases from the real package index: exactly the committed rows."""

from __future__ import annotations

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from envlock.index.config import index_url
from envlock.matrix import check, load_tensorflow, tested
from envlock.matrix.refresh import refresh

pytestmark = pytest.mark.network

SAMPLE = ("2.0.0", "2.2.0", "2.4.0", "2.14.1", "2.15.1", "2.21.0")


def test_real_index_gives_the_committed_rows() -> None:
    committed = load_tensorflow()
    result = refresh(
        index_url(None),
        tested=tested.load(),
        notes=check.load_notes(),
        jobs=len(SAMPLE),
        only=[Version(v) for v in SAMPLE],
    )
    assert [str(r.version) for r in result.matrix.releases] == list(SAMPLE)
    for row in result.matrix.releases:
        assert row == committed.get(row.version), f"tensorflow {row.version} differs"
    # the bug this field exists for: tensorrt==8.5.3.1 has no cp311 wheel
    row_2_14 = result.matrix.get("2.14.1")
    assert row_2_14 is not None
    assert row_2_14.and_cuda_python == ("3.9", "3.10")
    assert row_2_14.and_cuda_python_note == "tensorrt==8.5.3.1: no cp311 wheel"
    # a few requests and a few MB per release, not whole wheels (hundreds of MB each),
    # plus one page per and-cuda requirement's project (shared across releases)
    projects = {
        canonicalize_name(Requirement(line).name)
        for row in result.matrix.releases
        for line in row.and_cuda
    }
    assert projects
    assert result.requests <= 1 + 4 * len(SAMPLE) + len(projects)
    assert result.bytes_read < 4_000_000 * len(SAMPLE)
