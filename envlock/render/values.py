"""The checks on every value that reaches a template.

Each value that enters a generated file (from the lock, the flags, or a file
the user names) is checked here for its kind before the context is built: a
plain word, an image reference, a sha256 digest, an Ubuntu release, a CPython
minor, a PEM file. A value that fails is bad data in the lock (``DataError``)
or a bad option (``UsageError``), each with a hint.
"""

from __future__ import annotations

import re
from pathlib import Path

from packaging.version import InvalidVersion, Version

from envlock.errors import DataError, UsageError
from envlock.model import Lock
from envlock.readers import read_bytes

OS_RE = re.compile(r"^ubuntu(\d{2})\.(\d{2})$")
OS_SUFFIX_RE = re.compile(r"-(ubuntu\d{2}\.\d{2})$")
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
# registry[:port]/path/name[:tag][@sha256:digest], as docker accepts them
IMAGE_RE = re.compile(
    r"^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::[0-9]+)?/)?"
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
    r"(?:@sha256:[0-9a-f]{64})?$"
)
PLAIN_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")

_RELOCK = "re-create the lock with `envlock lock`"


def python_minor(value: str) -> str:
    """The lock's Python as "3.X", or a DataError."""
    try:
        release = Version(value).release
    except InvalidVersion:
        raise DataError(
            f"pylock.toml: [tool.envlock] resolution.python {value!r} is not a version",
            hint=_RELOCK,
        ) from None
    if len(release) < 2 or release[0] != 3:
        raise DataError(
            f"pylock.toml: [tool.envlock] resolution.python {value!r} is not a CPython 3.X minor",
            hint=_RELOCK,
        )
    return f"{release[0]}.{release[1]}"


def check_lock_fields(lock: Lock) -> None:
    """Values of the lock that reach the Dockerfile and the script must be plain words."""
    res = lock.resolution
    fields = {
        "framework": res.framework,
        "version": res.version,
        "cuda": res.cuda,
        "cudnn": res.cudnn,
        "driver_min": res.driver_min,
        "cuda_source": res.cuda_source,
        "cuda_image_version": res.cuda_image_version,
        **{f"compute_capabilities[{i}]": c for i, c in enumerate(res.compute_capabilities)},
    }
    for key, value in fields.items():
        if not isinstance(value, str) or not PLAIN_RE.match(value):
            raise DataError(
                f"pylock.toml: [tool.envlock] resolution.{key} {value!r} is not a plain value",
                hint=_RELOCK,
            )
    if not IMAGE_RE.match(res.base_image) or (
        res.base_image_digest is not None and not DIGEST_RE.match(res.base_image_digest)
    ):
        raise DataError(
            f"pylock.toml: [tool.envlock] resolution.base_image {res.base_image!r} "
            f"(digest {res.base_image_digest!r}) is not an image reference",
            hint=_RELOCK,
        )
    for pkg in lock.packages:
        if not PLAIN_RE.match(pkg.name):
            raise DataError(
                f"pylock.toml: package name {pkg.name!r} is not a plain name",
                hint=_RELOCK,
            )


def check_image(ref: str, origin: str) -> str:
    """``ref`` stripped, when it is an image reference; ``origin`` names the flag."""
    ref = ref.strip()
    if not IMAGE_RE.match(ref):
        raise UsageError(
            f"{origin} {ref!r} is not an image reference",
            hint="write it as [registry/]name[:tag][@sha256:digest], e.g. "
            "nvidia/cuda:12.2.2-cudnn8-runtime-ubuntu22.04",
        )
    return ref


def split_digest(ref: str) -> tuple[str, str | None]:
    """An image reference as (name[:tag], digest or None)."""
    if "@" in ref:
        name, digest = ref.split("@", 1)
        return name, digest
    return ref, None


def check_digest(value: str, origin: str) -> str:
    """``value`` stripped, when it is a sha256 digest; ``origin`` names the flag."""
    value = value.strip()
    if not DIGEST_RE.match(value):
        raise UsageError(
            f"{origin} {value!r} is not a sha256 digest",
            hint="write it as sha256: followed by 64 lowercase hex digits "
            "(docker buildx imagetools inspect IMAGE shows it)",
        )
    return value


def check_os(value: str) -> str:
    """``--os``, lowercased, when it is an ubuntuXX.YY release."""
    value = value.strip().lower()
    if not OS_RE.match(value):
        raise UsageError(
            f"--os {value!r} is not an Ubuntu release of the nvidia/cuda images",
            hint="write it as ubuntuXX.YY, e.g. ubuntu22.04",
        )
    return value


def os_of(image: str) -> str | None:
    """The "ubuntuXX.YY" at the end of an image's tag, or None."""
    m = OS_SUFFIX_RE.search(image)
    return m.group(1) if m else None


def read_ca_cert(path: str) -> bytes:
    """The bytes of the ``--ca-cert`` file, when it holds a PEM certificate."""
    try:
        data = read_bytes(Path(path).expanduser(), "--ca-cert", hint="give a readable PEM file")
    except FileNotFoundError:
        raise UsageError(
            f"--ca-cert {path}: no such file", hint="give the PEM file of the CA to trust"
        ) from None
    except OSError as e:
        raise UsageError(
            f"--ca-cert {path}: cannot read it ({e.strerror or e})",
            hint="give a readable PEM file",
        ) from None
    if b"-----BEGIN CERTIFICATE-----" not in data:
        raise UsageError(
            f"--ca-cert {path}: no PEM certificate in it",
            hint="give a PEM file (-----BEGIN CERTIFICATE-----), e.g. "
            "/etc/ssl/certs/ca-certificates.crt; convert DER with "
            "`openssl x509 -inform der -in CA.cer -out ca.pem`",
        )
    return data
