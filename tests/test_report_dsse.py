"""DSSE envelopes: PAE, signatures, strict parsing (issue #6, must-show 1-8, 13-15)."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from report_support import b64, cli, make_keys, smoke_result

from envlock.report import dsse, keys, sign_result, verify
from envlock.report.statement import build_statement

INTOTO = "application/vnd.in-toto+json"
IMAGE = "sha256:" + hashlib.sha256(b"an image config").hexdigest()


@pytest.fixture(params=["ecdsa-p256", "ed25519"])
def keypair(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, Path]:
    return make_keys(tmp_path, "trusted", request.param)


@pytest.fixture
def other_keypair(tmp_path: Path) -> tuple[Path, Path]:
    return make_keys(tmp_path, "other")


def statement_bytes() -> bytes:
    doc = build_statement(smoke_result(), image_id=IMAGE)
    return json.dumps(doc).encode()


def envelope_with(payload_type: str, payload: bytes, priv: Path, **extra: Any) -> dict[str, Any]:
    """An envelope signed properly over the PAE of (payload_type, payload)."""
    env = dsse.sign(payload_type, payload, keys.load_private(priv)).to_dict()
    env.update(extra)
    return env


def check(env: dict[str, Any] | bytes, pub: Path, **kw: Any) -> Any:
    data = env if isinstance(env, bytes) else json.dumps(env).encode()
    return verify(data, pub, **kw)


# 1
def test_pae_golden_vector() -> None:
    assert (
        dsse.pae("http://example.com/HelloWorld", b"hello world")
        == b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )


def test_pae_counts_bytes_not_characters() -> None:
    # "é" is 2 bytes in UTF-8, "€" 3: lengths are byte lengths in decimal
    assert dsse.pae("é", "€".encode()) == "DSSEv1 2 é 3 €".encode()
    assert dsse.pae("", b"") == b"DSSEv1 0  0 "


def test_signed_envelope_verifies(keypair: tuple[Path, Path]) -> None:
    priv, pub = keypair
    env = sign_result(smoke_result(), priv, lock_dir=None, image_id=IMAGE)
    v = check(env, pub)
    assert v.ok and v.signature_ok and v.problems == [] and v.result == "PASSED"
    assert v.subject == [{"name": "image", "digest": {"sha256": IMAGE[7:]}}]
    # the keyid written is the sha256 of the public key's DER SubjectPublicKeyInfo
    der = keys.public_der(keys.load_public(pub))
    assert env["signatures"][0]["keyid"] == hashlib.sha256(der).hexdigest()


# 2
def test_one_bit_of_payload_flipped_is_rejected(keypair: tuple[Path, Path]) -> None:
    priv, pub = keypair
    env = sign_result(smoke_result(), priv, lock_dir=None, image_id=IMAGE)
    payload = bytearray(base64.b64decode(env["payload"]))
    for position in (0, len(payload) // 2, len(payload) - 1):
        flipped = bytearray(payload)
        flipped[position] ^= 0x01
        v = check({**env, "payload": b64(bytes(flipped))}, pub)
        assert not v.ok and not v.signature_ok
        assert v.result is None
        assert "no signature is valid" in v.problems[0]


# 3
def test_payload_type_changed_after_signing_is_rejected(keypair: tuple[Path, Path]) -> None:
    priv, pub = keypair
    env = sign_result(smoke_result(), priv, lock_dir=None, image_id=IMAGE)
    for new_type in ("application/json", INTOTO + " ", "application/vnd.in-toto+JSON"):
        v = check({**env, "payloadType": new_type}, pub)
        assert not v.ok and not v.signature_ok  # the PAE covers the type
        assert "no signature is valid" in v.problems[0]


# 4
def test_valid_signature_over_other_payload_type_is_rejected(keypair: tuple[Path, Path]) -> None:
    priv, pub = keypair
    env = envelope_with("application/json", statement_bytes(), priv)
    v = check(env, pub)
    assert v.signature_ok  # the signature itself is fine...
    assert not v.ok  # ...but it does not sign an in-toto statement
    assert v.problems == [f"payloadType is 'application/json', expected {INTOTO!r}"]
    assert v.result is None


# 5
def test_signature_by_another_key_is_rejected(
    keypair: tuple[Path, Path], other_keypair: tuple[Path, Path]
) -> None:
    _, trusted_pub = keypair
    other_priv, _ = other_keypair
    env = sign_result(smoke_result(), other_priv, lock_dir=None, image_id=IMAGE)
    v = check(env, trusted_pub)
    assert not v.ok and not v.signature_ok
    assert "no signature is valid" in v.problems[0]


def test_keyid_naming_the_trusted_key_is_not_trusted(
    keypair: tuple[Path, Path], other_keypair: tuple[Path, Path]
) -> None:
    _, trusted_pub = keypair
    other_priv, other_pub = other_keypair
    env = sign_result(smoke_result(), other_priv, lock_dir=None, image_id=IMAGE)
    trusted_id = keys.keyid(keys.load_public(trusted_pub))
    env["signatures"][0]["keyid"] = trusted_id
    v = check(env, trusted_pub)
    assert not v.ok and not v.signature_ok
    assert "keyids are not trusted" in v.problems[0]
    # the same forged envelope still verifies for the key that really signed it
    assert check(env, other_pub).ok


def test_any_signature_by_the_trusted_key_counts(
    keypair: tuple[Path, Path], other_keypair: tuple[Path, Path]
) -> None:
    priv, pub = keypair
    other_priv, _ = other_keypair
    env = sign_result(smoke_result(), priv, lock_dir=None, image_id=IMAGE)
    payload = base64.b64decode(env["payload"])
    other_sig = keys.sign(keys.load_private(other_priv), dsse.pae(INTOTO, payload))
    env["signatures"].insert(0, {"keyid": env["signatures"][0]["keyid"], "sig": b64(other_sig)})
    assert check(env, pub).ok


# 6
@pytest.mark.parametrize(
    ("sig", "message"),
    [
        ("", "signatures[0].sig is empty"),
        ("not base64!", "signatures[0].sig is not base64"),
        ("AAA*", "signatures[0].sig is not base64"),
        ("A", "signatures[0].sig is not base64 (truncated"),
        ("QUJD=", "signatures[0].sig is not base64 (wrong padding)"),
        (12345, "signatures[0].sig is not a string"),
        (None, "signatures[0].sig is not a string"),
    ],
)
def test_bad_signature_encoding_is_a_clean_rejection(
    keypair: tuple[Path, Path], sig: Any, message: str
) -> None:
    priv, pub = keypair
    env = sign_result(smoke_result(), priv, lock_dir=None, image_id=IMAGE)
    env["signatures"][0]["sig"] = sig
    v = check(env, pub)
    assert not v.ok and not v.signature_ok
    assert v.problems[0].startswith(message)


def test_truncated_signature_is_rejected(keypair: tuple[Path, Path]) -> None:
    priv, pub = keypair
    env = sign_result(smoke_result(), priv, lock_dir=None, image_id=IMAGE)
    raw = base64.b64decode(env["signatures"][0]["sig"])
    for cut in (1, len(raw) // 2, len(raw) - 1):
        env["signatures"][0]["sig"] = b64(raw[:cut])
        v = check(env, pub)
        assert not v.ok and not v.signature_ok
        assert "no signature is valid" in v.problems[0]


def test_undecodable_signature_on_the_command_line_exits_2_without_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    priv, pub = make_keys(tmp_path)
    env = sign_result(smoke_result(), priv, lock_dir=None, image_id=IMAGE)
    env["signatures"][0]["sig"] = "@@not base64@@"
    report = tmp_path / "report.intoto.json"
    report.write_text(json.dumps(env))
    code, out, err = cli(capsys, "verify", str(report), "--key", str(pub))
    assert code == 2  # not a DSSE envelope: an input error (issue #11)
    assert "Traceback" not in out + err
    prefix = f"envlock: error: {report}: signatures[0].sig is not base64"
    assert err.startswith(prefix)


# 7
def test_no_signatures_is_rejected(keypair: tuple[Path, Path]) -> None:
    priv, pub = keypair
    env = sign_result(smoke_result(), priv, lock_dir=None, image_id=IMAGE)
    env["signatures"] = []
    v = check(env, pub)
    assert not v.ok and v.problems == ["the envelope has no signatures"]
    del env["signatures"]
    assert check(env, pub).problems == ["the envelope has no 'signatures' field"]


def test_same_signature_twice_is_rejected(keypair: tuple[Path, Path]) -> None:
    priv, pub = keypair
    env = sign_result(smoke_result(), priv, lock_dir=None, image_id=IMAGE)
    assert check(env, pub).ok
    env["signatures"] = [env["signatures"][0], dict(env["signatures"][0])]
    v = check(env, pub)
    assert not v.ok
    assert v.problems == ["signatures[1] repeats an earlier signature"]
    # the same bytes in the other base64 alphabet are the same signature
    sig = env["signatures"][0]["sig"]
    urlsafe = sig.replace("+", "-").replace("/", "_").rstrip("=")
    env["signatures"][1] = {"keyid": "", "sig": urlsafe}
    assert check(env, pub).problems == ["signatures[1] repeats an earlier signature"]


# 8
def test_signature_over_raw_json_instead_of_pae_is_rejected(keypair: tuple[Path, Path]) -> None:
    priv, pub = keypair
    payload = statement_bytes()
    raw_sig = keys.sign(keys.load_private(priv), payload)
    env = {
        "payloadType": INTOTO,
        "payload": b64(payload),
        "signatures": [{"keyid": keys.keyid(keys.load_public(pub)), "sig": b64(raw_sig)}],
    }
    v = check(env, pub)
    assert not v.ok and not v.signature_ok
    assert "over the DSSE PAE" in v.problems[0]
    # the control: the same payload signed over the PAE passes
    assert check(envelope_with(INTOTO, payload, priv), pub).ok


# 13
def test_duplicate_keys_in_envelope_json_are_rejected(keypair: tuple[Path, Path]) -> None:
    priv, pub = keypair
    env = sign_result(smoke_result(), priv, lock_dir=None, image_id=IMAGE)
    good = json.dumps(env)
    assert check(good.encode(), pub).ok
    # a second payloadType after the signed one: parsers that keep the last would see it
    doubled = good[:-1] + ', "payloadType": "application/json"}'
    v = check(doubled.encode(), pub)
    assert not v.ok and not v.signature_ok
    assert v.problems == ["the envelope: not valid JSON: duplicate key 'payloadType' in one object"]
    inner = good.replace('"sig":', '"sig": "AAAA", "sig":', 1)
    assert check(inner.encode(), pub).problems == [
        "the envelope: not valid JSON: duplicate key 'sig' in one object"
    ]


def test_duplicate_keys_in_signed_payload_are_rejected(keypair: tuple[Path, Path]) -> None:
    priv, pub = keypair
    payload = statement_bytes()
    assert payload.startswith(b'{"_type": ')
    doubled = b'{"_type": "x", ' + payload[1:]
    v = check(envelope_with(INTOTO, doubled, priv), pub)
    assert v.signature_ok and not v.ok
    assert v.problems == ["the signed payload: not valid JSON: duplicate key '_type' in one object"]


# 14
def test_url_safe_base64_and_unknown_fields_are_accepted(keypair: tuple[Path, Path]) -> None:
    priv, pub = keypair
    result = smoke_result()
    result["host"]["note"] = "???>>>~~~"  # bytes whose base64 holds + and /
    env = sign_result(result, priv, lock_dir=None, image_id=IMAGE)
    payload = base64.b64decode(env["payload"])
    sig = base64.b64decode(env["signatures"][0]["sig"])
    url_payload = base64.urlsafe_b64encode(payload).decode().rstrip("=")
    url_sig = base64.urlsafe_b64encode(sig).decode().rstrip("=")
    # the payload must really use the URL-safe alphabet for this to test anything
    assert set(url_payload) & {"-", "_"}
    env2 = {
        "payloadType": INTOTO,
        "payload": url_payload,
        "signatures": [{"sig": url_sig, "keyid": "", "note": "extra"}],
        "comment": "an unknown field",
        "x-annotations": {"by": "test"},
    }
    v = check(env2, pub)
    assert v.ok, v.problems
    assert v.result == "PASSED"


def test_mixed_base64_alphabets_are_rejected(keypair: tuple[Path, Path]) -> None:
    priv, pub = keypair
    with pytest.raises(dsse.EnvelopeError, match="is not base64"):
        dsse.b64decode("ab+c-_==", "x")


@given(st.binary(max_size=200))
def test_base64_decoding_accepts_both_alphabets_with_or_without_padding(data: bytes) -> None:
    std = base64.b64encode(data).decode()
    url = base64.urlsafe_b64encode(data).decode()
    for text in (std, std.rstrip("="), url, url.rstrip("=")):
        assert dsse.b64decode(text, "x") == data


@given(st.one_of(st.binary(max_size=300), st.text(max_size=300).map(str.encode)))
def test_parsing_arbitrary_bytes_raises_only_envelope_errors(data: bytes) -> None:
    # a non-envelope error type (KeyError, TypeError, UnicodeError...) fails the test
    with contextlib.suppress(dsse.EnvelopeError):
        assert isinstance(dsse.parse_envelope(data), dsse.Envelope)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
        ),
        max_leaves=20,
    )
)
def test_parsing_arbitrary_json_raises_only_envelope_errors(doc: Any) -> None:
    with contextlib.suppress(dsse.EnvelopeError):
        assert isinstance(dsse.parse_envelope(json.dumps(doc)), dsse.Envelope)


# 15
def _sslib_key(pub: Path, keyid: str | None = None) -> Any:
    from securesystemslib.signer import SSlibKey

    return SSlibKey.from_crypto(keys.load_public(pub), keyid=keyid)


def test_envlock_envelope_verifies_with_securesystemslib(keypair: tuple[Path, Path]) -> None:
    from securesystemslib.dsse import Envelope
    from securesystemslib.exceptions import VerificationError

    priv, pub = keypair
    env = sign_result(smoke_result(), priv, lock_dir=None, image_id=IMAGE)
    keyid = env["signatures"][0]["keyid"]
    key = _sslib_key(pub, keyid)
    sslib_env = Envelope.from_dict(json.loads(json.dumps(env)))
    accepted = sslib_env.verify([key], 1)
    assert list(accepted) == [keyid]
    # and the same code rejects a tampered envelope, so the check can fail
    tampered = json.loads(json.dumps(env))
    tampered["payloadType"] = "application/json"
    with pytest.raises(VerificationError):
        Envelope.from_dict(tampered).verify([key], 1)


def test_securesystemslib_envelope_verifies_with_envlock(keypair: tuple[Path, Path]) -> None:
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import CryptoSigner

    priv, pub = keypair
    signer = CryptoSigner(keys.load_private(priv))
    sslib_env = Envelope(payload=statement_bytes(), payload_type=INTOTO, signatures={})
    sslib_env.sign(signer)
    data = json.dumps(sslib_env.to_dict()).encode()
    v = verify(data, pub)
    assert v.ok, v.problems
    assert v.result == "PASSED"
    # securesystemslib's keyid is not envlock's; it does not matter, keyids are hints
    assert sslib_env.to_dict()["signatures"][0]["keyid"] != v.keyid
    # a securesystemslib envelope from another key is rejected by envlock
    other = CryptoSigner.generate_ecdsa()
    foreign = Envelope(payload=statement_bytes(), payload_type=INTOTO, signatures={})
    foreign.sign(other)
    assert not verify(json.dumps(foreign.to_dict()).encode(), pub).signature_ok
