"""Signing keys: generate, write, load, sign, verify, keyid.

ECDSA P-256 with SHA-256 is the default (cosign verifies it; signatures are
DER, as cosign and securesystemslib write them); Ed25519 is the alternative.
Keys are PEM: the private key PKCS#8 (encrypted when ENVLOCK_KEY_PASSPHRASE
is set), the public key SubjectPublicKeyInfo. The keyid is the sha256 of the
public key's DER SubjectPublicKeyInfo, in hex.

``cryptography`` is imported inside the functions, so importing this module
costs nothing.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envlock import fsutil
from envlock.errors import UsageError

KEY_TYPES = ("ecdsa-p256", "ed25519")
DEFAULT_KEY_TYPE = "ecdsa-p256"
PASSPHRASE_ENV = "ENVLOCK_KEY_PASSPHRASE"
BUNDLE_MARKERS = ("Dockerfile", "pylock.toml")


@dataclass(frozen=True)
class KeyPair:
    private_path: Path
    public_path: Path
    key_type: str
    keyid: str
    encrypted: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "private_key": str(self.private_path),
            "public_key": str(self.public_path),
            "type": self.key_type,
            "keyid": self.keyid,
            "encrypted": self.encrypted,
        }


def _passphrase() -> bytes | None:
    value = os.environ.get(PASSPHRASE_ENV)
    return value.encode("utf-8") if value else None


def key_type_of(key: Any) -> str:
    """'ecdsa-p256' or 'ed25519' for a loaded public or private key."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519

    if isinstance(key, (ec.EllipticCurvePublicKey, ec.EllipticCurvePrivateKey)):
        if isinstance(key.curve, ec.SECP256R1):
            return "ecdsa-p256"
        raise UsageError(
            f"unsupported ECDSA curve {key.curve.name}",
            hint="envlock signs with ECDSA P-256 or Ed25519; make a key with 'envlock keygen'",
        )
    if isinstance(key, (ed25519.Ed25519PublicKey, ed25519.Ed25519PrivateKey)):
        return "ed25519"
    raise UsageError(
        f"unsupported key type {type(key).__name__}",
        hint="envlock signs with ECDSA P-256 or Ed25519; make a key with 'envlock keygen'",
    )


def public_der(public_key: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    der: bytes = public_key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return der


def keyid(public_key: Any) -> str:
    """sha256 of the DER SubjectPublicKeyInfo, hex."""
    return hashlib.sha256(public_der(public_key)).hexdigest()


def key_paths(name: Path) -> tuple[Path, Path]:
    """NAME -> (NAME.pem, NAME.pub.pem); a trailing .pem in NAME is dropped."""
    base = name.name[:-4] if name.name.endswith(".pem") else name.name
    if base.endswith(".pub"):
        base = base[:-4]
    if not base:
        raise UsageError(
            f"{name}: not a usable key name", hint="give a name such as 'keys/envlock'"
        )
    return name.with_name(base + ".pem"), name.with_name(base + ".pub.pem")


def _refuse_bundle_folder(folder: Path) -> None:
    """Private keys must never land where a build context is.

    A folder holding a Dockerfile or pylock.toml is a build context, and so is
    everything below it; a key written anywhere inside would be sent along.
    """
    start = folder.resolve()
    for probe in (start, *start.parents):
        found = [m for m in BUNDLE_MARKERS if (probe / m).is_file()]
        if found:
            holds = f"it holds {' and '.join(found)}"
            where = (
                f"{folder} is a bundle folder ({holds})"
                if probe == start
                else f"{folder} is inside the bundle folder {probe} ({holds})"
            )
            raise UsageError(
                f"{where}; a private key there would be sent with the build context",
                hint=f"write the key outside the bundle, e.g. -o {probe.parent / 'envlock-key'}",
            )


def generate(key_type: str = DEFAULT_KEY_TYPE) -> Any:
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519

    if key_type == "ecdsa-p256":
        return ec.generate_private_key(ec.SECP256R1())
    if key_type == "ed25519":
        return ed25519.Ed25519PrivateKey.generate()
    raise UsageError(f"unknown key type {key_type!r}", hint=f"use one of: {', '.join(KEY_TYPES)}")


def write_keypair(name: Path, key_type: str = DEFAULT_KEY_TYPE, *, force: bool = False) -> KeyPair:
    """Generate a key pair and write NAME.pem (0600) and NAME.pub.pem together."""
    from cryptography.hazmat.primitives import serialization

    private_path, public_path = key_paths(name)
    folder = private_path.parent
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{folder} is not a folder", hint="give -o a path inside a folder")
    _refuse_bundle_folder(folder)
    for p in (private_path, public_path):
        if p.is_dir():
            raise UsageError(f"{p} is a folder", hint="give -o a file name, e.g. -o keys/envlock")
    from envlock.report.outputs import same_file

    if private_path.exists() and public_path.exists() and same_file(private_path, public_path):
        raise UsageError(
            f"{public_path} is the same file as {private_path}; writing one would overwrite "
            "the other",
            hint="remove the link, or pick another name",
        )
    if not force:
        existing = [str(p) for p in (private_path, public_path) if p.exists()]
        if existing:
            raise UsageError(
                f"{' and '.join(existing)} already exist{'s' if len(existing) == 1 else ''}",
                hint="pick another name, or pass --force to replace the key (the old one is lost)",
            )
    key = generate(key_type)
    passphrase = _passphrase()
    encryption: Any = (
        serialization.BestAvailableEncryption(passphrase)
        if passphrase
        else serialization.NoEncryption()
    )
    private_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    fsutil.write_files(
        folder,
        {private_path.name: private_pem, public_path.name: public_pem},
        modes={private_path.name: 0o600, public_path.name: 0o644},
    )
    return KeyPair(private_path, public_path, key_type, keyid(key.public_key()), bool(passphrase))


MAX_KEY_BYTES = 64 << 10  # a PEM key is a few hundred bytes


def _read(path: Path, what: str) -> bytes:
    data = fsutil.read_input(
        path, what, hint="make one with 'envlock keygen -o NAME'", kind="PEM file"
    )
    if len(data) > MAX_KEY_BYTES:
        raise UsageError(
            f"{what} {path}: {len(data)} bytes is too big for a PEM key",
            hint="make one with 'envlock keygen -o NAME'",
        )
    return data


def load_private(path: Path) -> Any:
    """Load a PEM private key; refuse one that others can read."""
    from cryptography.hazmat.primitives import serialization

    data = _read(path, "private key")
    if b"PRIVATE KEY" not in data:
        hint = "sign with the private key (NAME.pem), not NAME.pub.pem"
        if b"PUBLIC KEY" in data:
            raise UsageError(f"{path} is a public key; signing needs the private key", hint=hint)
        raise UsageError(f"{path} is not a PEM private key", hint="make one with 'envlock keygen'")
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise UsageError(
            f"private key {path} is accessible by other users (mode {stat.S_IMODE(mode):04o})",
            hint=f"chmod 600 {path}",
        )
    passphrase = _passphrase()
    try:
        key = serialization.load_pem_private_key(data, password=passphrase)
    except TypeError as e:
        if passphrase is None:
            raise UsageError(
                f"private key {path} is encrypted",
                hint=f"set {PASSPHRASE_ENV} to its passphrase",
            ) from e
        raise UsageError(
            f"private key {path} is not encrypted but {PASSPHRASE_ENV} is set",
            hint=f"unset {PASSPHRASE_ENV}",
        ) from e
    except ValueError as e:
        if passphrase is not None and b"ENCRYPTED" in data:
            raise UsageError(
                f"cannot decrypt private key {path}: wrong passphrase",
                hint=f"check {PASSPHRASE_ENV}",
            ) from e
        raise UsageError(f"{path} is not a valid PEM private key ({e})") from e
    except Exception as e:  # cryptography raises UnsupportedAlgorithm and others
        raise UsageError(f"{path} is not a usable private key ({e})") from e
    key_type_of(key)
    return key


def load_public(path: Path) -> Any:
    """Load a PEM public key (SubjectPublicKeyInfo)."""
    from cryptography.hazmat.primitives import serialization

    data = _read(path, "public key")
    if b"PUBLIC KEY" not in data:
        if b"PRIVATE KEY" in data:
            raise UsageError(
                f"{path} is a private key; verify with the public key",
                hint="use NAME.pub.pem, the file 'envlock keygen' wrote beside it",
            )
        raise UsageError(
            f"{path} is not a PEM public key", hint="use NAME.pub.pem from 'envlock keygen'"
        )
    try:
        key = serialization.load_pem_public_key(data)
    except Exception as e:  # ValueError, UnsupportedAlgorithm
        raise UsageError(f"{path} is not a valid PEM public key ({e})") from e
    key_type_of(key)
    return key


def sign(private_key: Any, message: bytes) -> bytes:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    if key_type_of(private_key) == "ecdsa-p256":
        return low_s(private_key.sign(message, ec.ECDSA(hashes.SHA256())))
    sig: bytes = private_key.sign(message)
    return sig


# the order of the P-256 group: (r, s) and (r, n - s) are both valid signatures
P256_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551


def low_s(der: bytes) -> bytes:
    """An ECDSA P-256 DER signature with s <= n/2 (the same signature, re-encoded)."""
    from cryptography.hazmat.primitives.asymmetric.utils import (
        decode_dss_signature,
        encode_dss_signature,
    )

    r, s = decode_dss_signature(der)
    if s > P256_ORDER // 2:
        return encode_dss_signature(r, P256_ORDER - s)
    return der


def canonical_signature(public_key: Any, signature: bytes) -> Any:
    """What identifies a valid signature up to malleation: (r, min(s, n - s))
    for ECDSA P-256, the bytes themselves for Ed25519 (not malleable)."""
    if key_type_of(public_key) != "ecdsa-p256":
        return signature
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

    try:
        r, s = decode_dss_signature(signature)
    except ValueError:
        return signature
    return (r, min(s, P256_ORDER - s))


def verify(public_key: Any, signature: bytes, message: bytes) -> bool:
    """True when ``signature`` is valid for ``public_key`` over ``message``."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    try:
        if key_type_of(public_key) == "ecdsa-p256":
            public_key.verify(signature, message, ec.ECDSA(hashes.SHA256()))
        else:
            public_key.verify(signature, message)
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True
