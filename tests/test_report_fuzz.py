"""Fuzzing the report inputs through the command line (issue #11): result JSON
for ``report sign``, envelopes for ``verify`` and ``report show``, key files
for both. Never a traceback, exit 0-2 only, and whatever sign writes its own
verify accepts. bench/fuzz_reports.py runs the same checks 10,000 times each."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from fuzz_support import scaled
from hypothesis import HealthCheck, given, settings
from report_support import FuzzBench, envelope_strategy, key_strategy, result_strategy

from envlock.report import strict

EXAMPLES = scaled(300)
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

_ROOT = tempfile.TemporaryDirectory(prefix="envlock-fuzz-")
BENCH = FuzzBench(Path(_ROOT.name))


@pytest.fixture(scope="module", autouse=True)
def _cleanup() -> Iterator[None]:
    yield
    _ROOT.cleanup()


@FUZZ
@given(data=result_strategy(BENCH), with_lock=...)
def test_fuzzed_results_sign_or_exit_2_and_what_is_signed_verifies(
    data: bytes, with_lock: bool
) -> None:
    BENCH.result(data, with_lock)


@FUZZ
@given(data=envelope_strategy(BENCH))
def test_fuzzed_envelopes_never_give_a_traceback(data: bytes) -> None:
    codes = BENCH.envelope_file(data)
    if data == BENCH.envelope_bytes:
        assert codes == [0, 0, 0, 0]


@FUZZ
@given(data=key_strategy(BENCH))
def test_fuzzed_key_files_never_give_a_traceback(data: bytes) -> None:
    BENCH.key_file(data)


def test_the_bench_itself_accepts_the_good_inputs() -> None:
    """The fuzz checks can fail: the unmutated inputs give the expected codes."""
    assert BENCH.result(BENCH.result_bytes, True) == [0, 0]
    assert BENCH.envelope_file(BENCH.envelope_bytes) == [0, 0, 0, 0]
    assert BENCH.key_file(BENCH.pem["private"]) == [2, 0]
    assert BENCH.key_file(BENCH.pem["public"]) == [0, 2]
    with pytest.raises(strict.JSONDefect):
        strict.loads(b"[" * 100 + b"]" * 100, max_bytes=1000)
