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

SAMPLE = ("2.0.0", "2.2.0", "2.4.0", "2.14.1", "2.15.1", "2.21.0", "2.22.0rc0")


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
    # 2.22.0rc0 in the 2.22 layout: its facts from the headers; 2.21.0's build_info
    # and headers both state CUDA, cuDNN and capabilities, and agree
    row_rc = result.matrix.get("2.22.0rc0")
    assert row_rc is not None and row_rc.prerelease
    assert (row_rc.cuda_from, row_rc.cudnn_from) == ("cuda_config.h", "cudnn_version.h")
    assert result.cross_checked["2.21.0"] == ("cuda", "cudnn", "compute_capabilities")
    assert "2.22.0rc0" not in result.cross_checked
    # a few requests and a few MB per release, not whole wheels (hundreds of MB each):
    # tail, directory, build_info, METADATA and the two headers, plus one page per
    # and-cuda requirement's project (shared across releases)
    projects = {
        canonicalize_name(Requirement(line).name)
        for row in result.matrix.releases
        for line in row.and_cuda
    }
    assert projects
    assert result.requests <= 1 + 6 * len(SAMPLE) + len(projects)
    assert result.bytes_read < 4_000_000 * len(SAMPLE)


def test_every_release_on_the_index_agrees_with_itself_and_the_committed_rows() -> None:
    """The whole refresh (about 10 s here): wherever build_info.py and a header both
    state a fact they agree (refresh stops otherwise), and each committed row is
    what the index gives today."""
    committed = load_tensorflow()
    result = refresh(index_url(None), tested=tested.load(), notes=check.load_notes())
    for row in committed.releases:
        assert result.matrix.get(row.version) == row, f"tensorflow {row.version} differs"
    # CUDA, cuDNN and capabilities compared in every release that has both files
    assert len(result.cross_checked) >= 100  # 102 of 108 on 2026-12-02
    assert "2.21.0" in result.cross_checked
