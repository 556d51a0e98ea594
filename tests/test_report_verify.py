"""Signed statements after the signature: format, drift, FAILED results
(issue #6, must-show 9-12 and 16)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from report_support import cli, decode, make_bundle, make_keys, smoke_result

from envlock.errors import DataError, UsageError
from envlock.report import dsse, keys, sign_result, verify
from envlock.report.result_check import check_result
from envlock.report.statement import (
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    build_statement,
)

INTOTO = "application/vnd.in-toto+json"
IMAGE_A = "sha256:" + hashlib.sha256(b"image a").hexdigest()
IMAGE_B = "sha256:" + hashlib.sha256(b"image b").hexdigest()


@pytest.fixture
def keypair(tmp_path: Path) -> tuple[Path, Path]:
    return make_keys(tmp_path)


def signed(priv: Path, payload: bytes | dict[str, Any]) -> bytes:
    """Sign any payload properly, as a signer that made a bad statement would."""
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return json.dumps(dsse.sign(INTOTO, body, keys.load_private(priv)).to_dict()).encode()


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_statement_shape_for_an_image(tmp_path: Path, keypair: tuple[Path, Path]) -> None:
    priv, pub = keypair
    bundle = make_bundle(tmp_path)
    result = smoke_result("WARNED", gpu_visible="WARN")
    env = sign_result(result, priv, lock_dir=bundle, image_id=IMAGE_A, url="https://ci.example/1")
    doc = decode(env)
    assert doc["_type"] == STATEMENT_TYPE
    assert doc["predicateType"] == PREDICATE_TYPE
    assert doc["subject"] == [{"name": "image", "digest": {"sha256": IMAGE_A[7:]}}]
    p = doc["predicate"]
    assert p["result"] == "WARNED"
    assert p["passedTests"] == ["framework_version", "build_cuda", "op_on_gpu"]
    assert p["warnedTests"] == ["gpu_visible"]
    assert p["failedTests"] == []
    assert p["url"] == "https://ci.example/1"
    assert p["configuration"] == [
        {"name": n, "digest": {"sha256": sha(bundle / n)}}
        for n in ("pylock.toml", "requirements.txt", "Dockerfile")
    ]
    assert p["envlock"]["smoke"] == result
    assert p["envlock"]["measurements"] == result["benchmark"]
    assert p["envlock"]["subject_kind"] == "image"
    v = verify(json.dumps(env).encode(), pub, lock_dir=bundle, image_id=IMAGE_A)
    assert v.ok and v.result == "WARNED" and v.drift == []
    assert [(c.kind, c.name, c.status) for c in v.checked] == [
        ("image", IMAGE_A, "matches"),
        ("file", "pylock.toml", "matches"),
        ("file", "requirements.txt", "matches"),
        ("file", "Dockerfile", "matches"),
    ]


def test_host_run_subject_is_the_lock_digest(tmp_path: Path, keypair: tuple[Path, Path]) -> None:
    priv, pub = keypair
    bundle = make_bundle(tmp_path)
    env = sign_result(smoke_result(), priv, lock_dir=bundle, image_id=None)
    assert decode(env)["subject"] == [
        {"name": "pylock.toml", "digest": {"sha256": sha(bundle / "pylock.toml")}}
    ]
    assert verify(json.dumps(env).encode(), pub, lock_dir=bundle).ok
    # the lock digest the harness recorded in the result is enough for a host run
    result = smoke_result()
    result["expected"]["lock_digest"] = "sha256:" + sha(bundle / "pylock.toml")
    env2 = sign_result(result, priv, lock_dir=None, image_id=None)
    assert decode(env2)["subject"] == decode(env)["subject"]
    # a result from another lock cannot be signed as this lock's
    result["expected"]["lock_digest"] = "sha256:" + "1" * 64
    with pytest.raises(UsageError, match="the result was made with lock sha256:111111111111"):
        sign_result(result, priv, lock_dir=bundle, image_id=None)


def test_no_subject_at_all_is_a_usage_error(keypair: tuple[Path, Path]) -> None:
    priv, _ = keypair
    with pytest.raises(UsageError, match="nothing to name as the report's subject"):
        sign_result(smoke_result(), priv, lock_dir=None, image_id=None)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: r.pop("schema"), "result: schema is None, expected 'envlock.smoke/v1'"),
        (lambda r: r.update(status="OK"), "result: status is 'OK', expected one of"),
        (lambda r: r.update(checks="all good"), "result: checks: missing or not a list"),
        (lambda r: r["checks"][1].update(status="MEH"), "result: checks[1].status: 'MEH' is not"),
        (lambda r: r["checks"][2].pop("name"), "result: checks[2].name: missing"),
        (lambda r: r["checks"][3].update(status="FAIL"), "result: status is PASSED but the checks"),
    ],
)
def test_bad_smoke_results_are_refused_naming_the_field(
    keypair: tuple[Path, Path], edit: Any, message: str
) -> None:
    priv, _ = keypair
    result = smoke_result()
    edit(result)
    with pytest.raises(DataError) as info:
        sign_result(result, priv, lock_dir=None, image_id=IMAGE_A)
    assert str(info.value).startswith(message)


# 9
def _statement() -> dict[str, Any]:
    return build_statement(smoke_result(), image_id=IMAGE_A)


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        (b"not JSON", "the signed payload: not valid JSON: Expecting value (line 1, column 1)"),
        (b"\xff\xfe{}", "the signed payload: not UTF-8 text (invalid start byte at byte 0)"),
        (b"[1, 2]", "the statement is a JSON list, not an object"),
        (
            {**_statement(), "_type": "https://in-toto.io/Statement/v0.1"},
            "statement _type is 'https://in-toto.io/Statement/v0.1', expected "
            "'https://in-toto.io/Statement/v1'",
        ),
        ({**_statement(), "subject": []}, "statement subject is empty or missing"),
        (
            {k: v for k, v in _statement().items() if k != "subject"},
            "statement subject is empty or missing",
        ),
        ({**_statement(), "subject": [{"name": "image"}]}, "statement subject[0] has no digest"),
        (
            {**_statement(), "subject": [{"name": "image", "digest": {}}]},
            "statement subject[0] has no digest",
        ),
        (
            {**_statement(), "subject": [{"name": "image", "digest": {"sha256": ""}}]},
            "statement subject[0].digest.sha256 is not a string",
        ),
    ],
)
def test_bad_statement_after_a_valid_signature_is_rejected(
    keypair: tuple[Path, Path], payload: bytes | dict[str, Any], problem: str
) -> None:
    priv, pub = keypair
    v = verify(signed(priv, payload), pub)
    assert v.signature_ok  # the signature is fine: the statement is what fails
    assert not v.ok
    assert v.problems == [problem]
    assert v.result is None


# 10
@pytest.mark.parametrize(
    "predicate_type",
    [
        "https://in-toto.io/attestation/test-result/v0.2",
        "https://slsa.dev/provenance/v1",
        "",
        None,
    ],
)
def test_other_predicate_type_is_rejected(
    keypair: tuple[Path, Path], predicate_type: str | None
) -> None:
    priv, pub = keypair
    v = verify(signed(priv, {**_statement(), "predicateType": predicate_type}), pub)
    assert v.signature_ok and not v.ok
    assert v.problems == [f"predicateType is {predicate_type!r}, expected {PREDICATE_TYPE!r}"]


# 11
def test_subject_digest_differing_from_the_image_is_drift(keypair: tuple[Path, Path]) -> None:
    priv, pub = keypair
    env = json.dumps(sign_result(smoke_result(), priv, lock_dir=None, image_id=IMAGE_A)).encode()
    assert verify(env, pub, image_id=IMAGE_A).ok
    v = verify(env, pub, image_id=IMAGE_B)
    assert v.signature_ok and not v.ok and v.problems == []
    assert v.drift == [("subject.digest.sha256", IMAGE_A, IMAGE_B)]
    assert [(c.kind, c.status) for c in v.checked] == [("image", "drift")]
    assert v.result == "PASSED"  # what the report says is still readable


# 12
def test_configuration_digest_differing_from_the_lock_is_drift(
    tmp_path: Path, keypair: tuple[Path, Path]
) -> None:
    priv, pub = keypair
    bundle = make_bundle(tmp_path)
    env = json.dumps(sign_result(smoke_result(), priv, lock_dir=bundle, image_id=IMAGE_A)).encode()
    before = {n: sha(bundle / n) for n in ("requirements.txt", "Dockerfile")}
    with open(bundle / "requirements.txt", "a") as f:
        f.write("numpy==1.26.4\n")
    (bundle / "Dockerfile").unlink()
    v = verify(env, pub, lock_dir=bundle, image_id=IMAGE_A)
    assert v.signature_ok and not v.ok and v.problems == []
    assert v.drift == [
        (
            "configuration[requirements.txt].sha256",
            "sha256:" + before["requirements.txt"],
            "sha256:" + sha(bundle / "requirements.txt"),
        ),
        ("configuration[Dockerfile].sha256", "sha256:" + before["Dockerfile"], "(absent)"),
    ]
    assert [(c.name, c.status) for c in v.checked] == [
        (IMAGE_A, "matches"),
        ("pylock.toml", "matches"),
        ("requirements.txt", "drift"),
        ("Dockerfile", "missing"),
    ]


def test_host_report_against_another_lock_drifts_in_subject_and_configuration(
    tmp_path: Path, keypair: tuple[Path, Path]
) -> None:
    priv, pub = keypair
    one, two = make_bundle(tmp_path, "one"), make_bundle(tmp_path, "two")
    env = json.dumps(sign_result(smoke_result(), priv, lock_dir=one, image_id=None)).encode()
    v = verify(env, pub, lock_dir=two)
    lock_one, lock_two = "sha256:" + sha(one / "pylock.toml"), "sha256:" + sha(two / "pylock.toml")
    assert v.drift == [
        ("configuration[pylock.toml].sha256", lock_one, lock_two),
        ("subject.digest.sha256", lock_one, lock_two),
    ]


def test_bad_lock_folder_is_a_usage_error(tmp_path: Path, keypair: tuple[Path, Path]) -> None:
    priv, pub = keypair
    env = json.dumps(sign_result(smoke_result(), priv, lock_dir=None, image_id=IMAGE_A)).encode()
    with pytest.raises(UsageError, match="does not exist"):
        verify(env, pub, lock_dir=tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="has no pylock.toml"):
        verify(env, pub, lock_dir=tmp_path / "empty")


# 16
def test_failed_result_is_signed_and_verified_but_never_passed(
    tmp_path: Path, keypair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    priv, pub = keypair
    failed = smoke_result("FAILED", gpu_visible="FAIL", op_on_gpu="FAIL")
    env = sign_result(failed, priv, lock_dir=None, image_id=IMAGE_A)
    v = verify(json.dumps(env).encode(), pub, image_id=IMAGE_A)
    assert v.ok and v.signature_ok  # the signature is valid...
    assert v.result == "FAILED"  # ...and the result stays FAILED
    assert v.to_dict()["failedTests"] == ["gpu_visible", "op_on_gpu"]

    report = tmp_path / "failed.intoto.json"
    report.write_text(json.dumps(env))
    code, out, err = cli(capsys, "verify", str(report), "--key", str(pub))
    assert code == 0
    assert "PASSED" not in out and "VERIFIED" not in out
    assert "FAILED (2 passed, 0 warned, 2 failed); failed: gpu_visible, op_on_gpu" in out
    assert "this report says the smoke test FAILED" in out

    code, out, err = cli(capsys, "verify", str(report), "--key", str(pub), "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["result"] == "FAILED" and doc["verified"] is True

    code, out, err = cli(capsys, "verify", str(report), "--key", str(pub), "--require-pass")
    assert code == 1
    assert "the signature is valid but the smoke result is FAILED (--require-pass)" in err


def test_a_signed_statement_calling_failed_checks_passed_is_rejected(
    keypair: tuple[Path, Path],
) -> None:
    priv, pub = keypair
    doc = build_statement(smoke_result("FAILED", gpu_visible="FAIL"), image_id=IMAGE_A)
    doc["predicate"]["result"] = "PASSED"
    v = verify(signed(priv, doc), pub)
    assert v.signature_ok and not v.ok and v.result is None
    assert v.problems == [
        "predicate result is PASSED but failedTests lists ['gpu_visible']",
        "predicate result is PASSED but the signed smoke result says FAILED",
    ]
    doc["predicate"]["failedTests"] = []
    doc["predicate"]["passedTests"].append("gpu_visible")
    v = verify(signed(priv, doc), pub)
    assert v.problems == ["predicate result is PASSED but the signed smoke result says FAILED"]


ORDER = ("PASSED", "WARNED", "FAILED")
CHECK_STATUSES = ["PASS", "WARN", "FAIL", "SKIP"]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["schema", "status", "checks", "name", "x"]), inner, max_size=4
        )
    ),
    max_leaves=25,
)


@given(json_values)
@settings(max_examples=200)
def test_check_result_on_arbitrary_json_raises_only_data_errors(doc: Any) -> None:
    try:
        status, lists = check_result(doc)
    except DataError as e:
        assert str(e).startswith("result")
    else:
        assert status in ("PASSED", "WARNED", "FAILED")
        assert set(lists) == {"passedTests", "warnedTests", "failedTests"}


@given(
    checks=st.lists(
        st.tuples(st.text(min_size=1, max_size=8), st.sampled_from(CHECK_STATUSES)),
        max_size=6,
    )
)
@settings(max_examples=100)
def test_statement_result_never_better_than_its_checks(checks: list[tuple[str, str]]) -> None:
    result = smoke_result()
    result["checks"] = [{"name": n, "status": s, "reason": ""} for n, s in checks]
    statuses = {s for _, s in checks}
    worst = "FAILED" if "FAIL" in statuses else "WARNED" if "WARN" in statuses else "PASSED"
    for status in ORDER:
        result["status"] = status
        better = ORDER.index(status) < ORDER.index(worst)
        if better:
            with pytest.raises(DataError, match="but the checks say"):
                build_statement(result, image_id=IMAGE_A)
        else:
            p = build_statement(result, image_id=IMAGE_A)["predicate"]
            assert p["result"] == status
            assert p["failedTests"] == [n for n, s in checks if s == "FAIL"]
            assert p["warnedTests"] == [n for n, s in checks if s == "WARN"]
            assert p["passedTests"] == [n for n, s in checks if s == "PASS"]


def test_check_envelope_runs_verify_and_its_gates_without_the_command_line(
    keypair: tuple[Path, Path],
) -> None:
    """envlock.report.verify.check_envelope: what `envlock verify` decides, as objects."""
    from envlock.image import ref as imageref
    from envlock.report import sign_envelope
    from envlock.report.verify import Requirements, check_envelope

    priv, pub = keypair
    public_key = keys.load_public(pub)
    image = imageref.parse(f"127.0.0.1:5000/team/tf@sha256:{'c3' * 32}")
    failed = sign_envelope(
        smoke_result("FAILED", gpu="FAIL"), priv, lock_dir=None, image_id=None, image_ref=image
    )
    v, failure = check_envelope(failed, "r.json", public_key, image=image)
    assert v.ok and v.result == "FAILED" and failure is None
    assert v.checked[0].status == "matches" and v.checked[0].name == str(image)
    v, failure = check_envelope(
        failed, "r.json", public_key, image=image, requirements=Requirements(require_pass=True)
    )
    assert v.ok and failure == (
        "r.json: the signature is valid but the smoke result is FAILED (--require-pass)"
    )
    other = image.at("sha256:" + "c4" * 32)
    v, failure = check_envelope(failed, "r.json", public_key, image=str(other))
    assert not v.ok and failure is not None
    assert failure.startswith("r.json: NOT VERIFIED: subject.digest.sha256 drifted")


def test_a_trusted_statement_is_read_once_into_fields(keypair: tuple[Path, Path]) -> None:
    from envlock.report.trusted import Statement

    priv, pub = keypair
    doc = build_statement(smoke_result("WARNED", gpu_visible="WARN"), image_id=IMAGE_A)
    trusted = Statement.from_dict(doc)
    assert (trusted.result, trusted.subject_kind) == ("WARNED", "image")
    assert trusted.warned == ("gpu_visible",) and trusted.failed == ()
    assert trusted.passed == tuple(doc["predicate"]["passedTests"]) and trusted.passed
    assert (
        trusted.subject == (doc["subject"][0],)
        and trusted.created == doc["predicate"]["envlock"]["created"]
    )
    assert trusted.gpu_used and trusted.gpu_why.startswith("op_on_gpu PASS")
    assert trusted.smoke is doc["predicate"]["envlock"]["smoke"] and trusted.to_dict() == doc
    v = verify(signed(priv, doc), pub)
    assert v.ok and v.statement == trusted and v.statement.to_dict() == doc
    doc["predicate"]["result"] = "PASSED"  # the test lists say WARNED
    with pytest.raises(ValueError, match="warnedTests"):
        Statement.from_dict(doc)
