"""Properties of the harness's pure functions (hypothesis; the main test run only)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from envlock.smoke import harness as h


@given(
    major=st.integers(3, 12),
    minor=st.integers(0, 9),
    sass=st.lists(st.integers(30, 129), max_size=6),
    ptx=st.lists(st.integers(30, 129), max_size=3),
)
def test_capability_verdict_properties(
    major: int, minor: int, sass: list[int], ptx: list[int]
) -> None:
    compiled = [f"sm_{s}" for s in sass] + [f"compute_{p}" for p in ptx]
    gpu = major * 10 + minor
    status, reason = h.capability_verdict(f"{major}.{minor}", compiled)
    runs_binary = any(s // 10 == major and s <= gpu for s in sass)
    if runs_binary:
        assert status == "PASS"
    elif any(p <= gpu for p in ptx):
        assert status == "WARN" and "PTX" in reason
    else:
        assert status == "FAIL" and "unsupported" in reason


@given(st.text(max_size=20), st.text(max_size=20))
def test_version_helpers_never_raise(a: str, b: str) -> None:
    assert isinstance(h.prefix_match(a, b), bool)
    assert isinstance(h.same_release(a, b), bool)
    assert all(isinstance(p, int) for p in h._parts(a))
