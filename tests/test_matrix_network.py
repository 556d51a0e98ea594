"""Refresh a few releases from the real package index: exactly the committed rows."""

from __future__ import annotations

import pytest
from packaging.version import Version

from envlock.index import index_url
from envlock.matrix import check, load_tensorflow, tested
from envlock.matrix.refresh import refresh

pytestmark = pytest.mark.network

SAMPLE = ("2.0.0", "2.2.0", "2.4.0", "2.15.1", "2.21.0")


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
    # a few requests and a few MB per release, not whole wheels (hundreds of MB each)
    assert result.requests <= 1 + 4 * len(SAMPLE)
    assert result.bytes_read < 4_000_000 * len(SAMPLE)
