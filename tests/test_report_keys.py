"""envlock keygen and key loading: PEM files, modes, passphrases, keyids, refusals."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from report_support import cli, make_bundle, smoke_result

from envlock.errors import UsageError
from envlock.report import keys, sign_result

IMAGE = "sha256:" + hashlib.sha256(b"image").hexdigest()


@pytest.mark.parametrize(
    ("args", "key_class"),
    [((), ec.EllipticCurvePrivateKey), (("--type", "ed25519"), ed25519.Ed25519PrivateKey)],
)
def test_keygen_writes_a_private_and_a_public_pem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...], key_class: type
) -> None:
    code, out, err = cli(capsys, "keygen", "-o", str(tmp_path / "k"), "--json", *args)
    assert code == 0, err
    info = json.loads(out)
    priv, pub = tmp_path / "k.pem", tmp_path / "k.pub.pem"
    assert info["private_key"] == str(priv) and info["public_key"] == str(pub)
    assert stat.S_IMODE(priv.stat().st_mode) == 0o600
    assert stat.S_IMODE(pub.stat().st_mode) == 0o644
    private = serialization.load_pem_private_key(priv.read_bytes(), password=None)
    public = serialization.load_pem_public_key(pub.read_bytes())
    assert isinstance(private, key_class)
    if isinstance(private, ec.EllipticCurvePrivateKey):
        assert private.curve.name == "secp256r1"
    der = public.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    assert info["keyid"] == hashlib.sha256(der).hexdigest()
    assert info["encrypted"] is False
    # the public file is the private key's public half
    assert (
        private.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        == der
    )


def test_keygen_table_for_people(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "keygen", "-o", str(tmp_path / "team.pem"))
    assert code == 0
    assert (tmp_path / "team.pem").exists() and (tmp_path / "team.pub.pem").exists()
    keyid = keys.keyid(keys.load_public(tmp_path / "team.pub.pem"))
    assert f"keyid        {keyid}" in out
    assert "mode 0600, not encrypted" in out


def test_passphrase_encrypts_and_is_needed_to_sign(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVLOCK_KEY_PASSPHRASE", "correct horse")
    code, out, _ = cli(capsys, "keygen", "-o", str(tmp_path / "k"), "--json")
    assert code == 0 and json.loads(out)["encrypted"] is True
    pem = (tmp_path / "k.pem").read_bytes()
    assert b"ENCRYPTED PRIVATE KEY" in pem
    with pytest.raises(TypeError):
        serialization.load_pem_private_key(pem, password=None)
    sign_result(smoke_result(), tmp_path / "k.pem", lock_dir=None, image_id=IMAGE)

    monkeypatch.setenv("ENVLOCK_KEY_PASSPHRASE", "wrong")
    with pytest.raises(UsageError, match="wrong passphrase"):
        keys.load_private(tmp_path / "k.pem")
    monkeypatch.delenv("ENVLOCK_KEY_PASSPHRASE")
    with pytest.raises(UsageError, match="is encrypted") as info:
        keys.load_private(tmp_path / "k.pem")
    assert info.value.hint == "set ENVLOCK_KEY_PASSPHRASE to its passphrase"


def test_keygen_does_not_overwrite_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(capsys, "keygen", "-o", str(tmp_path / "k"))[0] == 0
    before = (tmp_path / "k.pem").read_bytes()
    code, out, err = cli(capsys, "keygen", "-o", str(tmp_path / "k"))
    assert code == 2
    assert "already exist" in err and "--force" in err and "Traceback" not in err
    assert (tmp_path / "k.pem").read_bytes() == before
    assert cli(capsys, "keygen", "-o", str(tmp_path / "k"), "--force")[0] == 0
    assert (tmp_path / "k.pem").read_bytes() != before


def test_keygen_refuses_a_bundle_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bundle = make_bundle(tmp_path)
    (bundle / "sub").mkdir()
    for target in (bundle / "signing", bundle / "sub" / "signing"):
        code, out, err = cli(capsys, "keygen", "-o", str(target))
        assert code == 2
        assert "a private key there would be sent with the build context" in err
        assert "hint: write the key outside the bundle" in err
    assert sorted(p.name for p in bundle.rglob("*")) == [
        "Dockerfile",
        "pylock.toml",
        "requirements.txt",
        "sub",
    ]
    # beside the bundle is fine
    assert cli(capsys, "keygen", "-o", str(bundle / ".." / "key"))[0] == 0
    assert (tmp_path / "key.pem").exists()


def test_sign_refuses_a_private_key_others_can_read(tmp_path: Path) -> None:
    pair = keys.write_keypair(tmp_path / "k")
    os.chmod(pair.private_path, 0o644)
    with pytest.raises(UsageError, match=r"accessible by other users \(mode 0644\)") as info:
        sign_result(smoke_result(), pair.private_path, lock_dir=None, image_id=IMAGE)
    assert info.value.hint == f"chmod 600 {pair.private_path}"


def test_wrong_kind_of_key_file_is_a_usage_error(tmp_path: Path) -> None:
    pair = keys.write_keypair(tmp_path / "k")
    with pytest.raises(UsageError, match="is a public key; signing needs the private key"):
        keys.load_private(pair.public_path)
    with pytest.raises(UsageError, match="is a private key; verify with the public key"):
        keys.load_public(pair.private_path)
    junk = tmp_path / "junk.pem"
    junk.write_text("-----BEGIN PUBLIC KEY-----\nnot base64 at all\n-----END PUBLIC KEY-----\n")
    with pytest.raises(UsageError, match="is not a valid PEM public key"):
        keys.load_public(junk)
    with pytest.raises(UsageError, match="does not exist"):
        keys.load_public(tmp_path / "missing.pub.pem")
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    rsa_pub = tmp_path / "rsa.pub.pem"
    rsa_pub.write_bytes(
        rsa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    with pytest.raises(UsageError, match="unsupported key type"):
        keys.load_public(rsa_pub)
    p384 = ec.generate_private_key(ec.SECP384R1()).public_key()
    p384_pub = tmp_path / "p384.pub.pem"
    p384_pub.write_bytes(
        p384.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    with pytest.raises(UsageError, match="unsupported ECDSA curve secp384r1"):
        keys.load_public(p384_pub)
