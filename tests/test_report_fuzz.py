"""Fuzzing the report inputs through the command line (issue #11): result JSON
for ``report sign``, envelopes for ``verify`` and ``report show``, key files
for both. Never a traceback, exit 0-2 only, and whatever sign writes its own
verify accepts. bench/fuzz_reports.py runs the same checks 10,000 times each."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from fuzz_support import scaled
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
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


@FUZZ
@given(data=st.data())
def test_fuzzed_sigstore_bundles_parse_or_say_why(data: st.DataObject) -> None:
    """A Sigstore bundle (#28) with bytes flipped, cut or inserted, or its JSON fields
    replaced: parse_bundle returns an envelope or raises BundleError, never anything
    else, and an envelope it returns verifies only when it is the one signed."""
    from envlock.report import dsse, sigstore
    from envlock.report.verify import verify_envelope

    good = BENCH.envelope_bytes
    bundle = sigstore.bundle_bytes(dsse.parse_envelope(good))
    doc = json.loads(bundle)
    how = data.draw(st.sampled_from(["flip", "cut", "insert", "field"]))
    if how == "field":
        path = data.draw(
            st.sampled_from(
                [
                    ("mediaType",),
                    ("verificationMaterial",),
                    ("dsseEnvelope",),
                    ("dsseEnvelope", "payload"),
                ]
            )
        )
        value = data.draw(st.one_of(st.none(), st.integers(), st.text(max_size=30), st.just({})))
        target = doc
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        mutated = json.dumps(doc).encode()
    else:
        at = data.draw(st.integers(0, len(bundle) - 1))
        if how == "flip":
            mutated = (
                bundle[:at]
                + bytes([bundle[at] ^ data.draw(st.integers(1, 255))])
                + bundle[at + 1 :]
            )
        elif how == "cut":
            mutated = bundle[:at]
        else:
            mutated = bundle[:at] + data.draw(st.binary(min_size=1, max_size=8)) + bundle[at:]
    try:
        env, _ = sigstore.parse_bundle(mutated)
    except sigstore.BundleError:
        return
    public = dsse.parse_envelope(good)  # the key: the bench's
    v = verify_envelope(env, BENCH.private_key.public_key())
    if v.ok:
        assert env.payload == public.payload and env.payload_type == public.payload_type


def test_the_bench_itself_accepts_the_good_inputs() -> None:
    """The fuzz checks can fail: the unmutated inputs give the expected codes."""
    assert BENCH.result(BENCH.result_bytes, True) == [0, 0]
    assert BENCH.envelope_file(BENCH.envelope_bytes) == [0, 0, 0, 0]
    assert BENCH.key_file(BENCH.pem["private"]) == [2, 0]
    assert BENCH.key_file(BENCH.pem["public"]) == [0, 2]
    with pytest.raises(strict.JSONDefect):
        strict.loads(b"[" * 100 + b"]" * 100, max_bytes=1000)
