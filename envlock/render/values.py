"""The door: every value that reaches a template is checked here for its kind.

Each value that enters a generated file (from the lock, the flags, the
matrix, a file the user names) passes one validator below before the context
is built, and comes out as a ``Checked`` string: only these validators make
one, and ``envlock.render.render_template`` refuses a context holding any
other string (``check_context``). Every kind refuses control characters,
line and paragraph separators and bidirectional overrides
(``envlock.door.bad_character``), so no value can end a comment or a line of
a generated file early; each kind adds its own shape: a plain word, a
version, an image reference, a sha256 digest, an absolute path inside the
image, an Ubuntu release, a CPython minor. A value that fails is bad data in
the lock (``DataError``) or a bad option (``UsageError``): exit 2, the value
named, with a hint.

The ``--ca-cert`` file must hold PEM certificates and nothing else: a
private key (or any other PEM block) in it is refused, so it can never be
copied into a bundle.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path

from packaging.version import InvalidVersion, Version

from envlock.door import bad_character, shown
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
VERSION_RE = re.compile(r"^[0-9][A-Za-z0-9._+-]*$")
MINOR_RE = re.compile(r"^3\.[0-9]{1,3}$")
# a path inside the image: absolute, of characters no shell or Dockerfile treats specially
IMAGE_PATH_RE = re.compile(r"^(?:/[A-Za-z0-9_+-][A-Za-z0-9._+-]*)+$")
RELATIVE_PATH_RE = re.compile(
    r"^[A-Za-z0-9_+-][A-Za-z0-9._+-]*(?:/[A-Za-z0-9_+-][A-Za-z0-9._+-]*)*$"
)
LABEL_KEY_RE = re.compile(r"^[a-z0-9]+(?:[.-][a-z0-9]+)*$")
MAX_TEXT = 4096

_RELOCK = "re-create the lock with `envlock lock`"


class Checked(str):
    """A string that passed one of the validators of this module; only they make one."""

    __slots__ = ()


def _text_problem(value: object, max_len: int = MAX_TEXT) -> str | None:
    if not isinstance(value, str):
        return f"is a {type(value).__name__}, not a string"
    if not value:
        return "is empty"
    if len(value) > max_len:
        return f"is longer than {max_len} characters"
    bad = bad_character(value)
    if bad is not None:
        return f"holds the control character {bad}"
    return None


def _refuse(
    origin: str, value: object, problem: str, hint: str, error: type[UsageError]
) -> UsageError:
    text = shown(value) if isinstance(value, str) else repr(value)[:120]
    return error(f"{origin} {text} {problem}", hint=hint)


def checked(
    value: object,
    origin: str,
    *,
    shape: re.Pattern[str] | None = None,
    what: str = "",
    hint: str = "give it without control characters",
    error: type[UsageError] = UsageError,
    max_len: int = MAX_TEXT,
) -> Checked:
    """``value`` as a Checked string: a string without control characters and,
    with ``shape``, matching it; ``origin`` names where it came from ("--os",
    "pylock.toml: [tool.envlock] resolution.cuda") and ``what`` the kind."""
    problem = _text_problem(value, max_len)
    if problem is not None and what:
        problem = f"is not {what}: it {problem}"
    elif problem is None and shape is not None and not shape.match(str(value)):
        problem = f"is not {what}"
    if problem is not None:
        raise _refuse(origin, value, problem, hint, error)
    return Checked(str(value))


def text(value: object, origin: str, error: type[UsageError] = DataError) -> Checked:
    """Prose for a comment or a README line: one line, no control characters."""
    hint = _RELOCK if error is DataError else "give it without control characters"
    return checked(value, origin, error=error, hint=hint)


def word(value: object, origin: str, error: type[UsageError] = DataError) -> Checked:
    return checked(
        value,
        origin,
        shape=PLAIN_RE,
        what="a plain value",
        error=error,
        max_len=128,
        hint=_RELOCK,
    )


def version(value: object, origin: str, error: type[UsageError] = DataError) -> Checked:
    return checked(
        value,
        origin,
        shape=VERSION_RE,
        what="a version",
        error=error,
        max_len=128,
        hint=_RELOCK,
    )


def image_path(value: object, origin: str) -> Checked:
    """An absolute path inside the image (envlock's own constants, the site-packages)."""
    return checked(
        value,
        origin,
        shape=IMAGE_PATH_RE,
        what="an absolute path of plain characters",
        error=DataError,
        hint="report this envlock bug",
    )


def relative_path(value: object, origin: str) -> Checked:
    return checked(
        value,
        origin,
        shape=RELATIVE_PATH_RE,
        what="a relative path of plain characters",
        error=DataError,
        hint=_RELOCK,
    )


def label_key(value: object, origin: str) -> Checked:
    return checked(
        value,
        origin,
        shape=LABEL_KEY_RE,
        what="a label key",
        error=DataError,
        hint="report this envlock bug",
    )


def user_path(value: object, origin: str) -> Checked:
    """A path the user gave (``--ca-cert``): any characters but control characters."""
    return checked(
        value,
        origin,
        hint="rename the file or give another path: a path reaches the generated "
        "files' comments and may hold no control characters (newline, tab, ...)",
    )


def walk_strings(value: object, where: str = "ctx") -> Iterator[tuple[str, object]]:
    """Every string inside ``value`` (a dataclass, tuple, list or dict), with its place."""
    if isinstance(value, str):
        yield where, value
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from walk_strings(getattr(value, f.name), f"{where}.{f.name}")
    elif isinstance(value, (tuple, list)):
        for i, item in enumerate(value):
            yield from walk_strings(item, f"{where}[{i}]")
    elif isinstance(value, dict):
        for k, item in value.items():
            yield from walk_strings(k, f"{where} key {k!r}")
            yield from walk_strings(item, f"{where}[{k!r}]")


def check_context(ctx: object) -> None:
    """Refuse a template context that holds any string no validator made (an envlock bug)."""
    for where, value in walk_strings(ctx):
        if not isinstance(value, Checked):
            raise DataError(
                f"{where} {shown(str(value))} reached a template without passing a validator",
                hint="report this envlock bug",
            )


def python_minor(value: str) -> Checked:
    """The lock's Python as "3.X", or a DataError."""
    origin = "pylock.toml: [tool.envlock] resolution.python"
    checked(value, origin, what="a version", error=DataError, hint=_RELOCK, max_len=64)
    try:
        release = Version(value).release
    except InvalidVersion:
        raise DataError(f"{origin} {shown(value)} is not a version", hint=_RELOCK) from None
    if len(release) < 2 or release[0] != 3:
        raise DataError(f"{origin} {shown(value)} is not a CPython 3.X minor", hint=_RELOCK)
    return checked(f"{release[0]}.{release[1]}", origin, shape=MINOR_RE, what="a CPython minor")


def check_lock_fields(lock: Lock) -> None:
    """Values of the lock that reach the Dockerfile and the script must be plain words."""
    res = lock.resolution
    where = "pylock.toml: [tool.envlock] resolution."
    fields = {
        "framework": res.framework,
        "cuda_source": res.cuda_source,
        **{f"compute_capabilities[{i}]": c for i, c in enumerate(res.compute_capabilities)},
    }
    for key, value in fields.items():
        word(value, where + key)
    for key, value in {
        "version": res.version,
        "cuda": res.cuda,
        "cudnn": res.cudnn,
        "driver_min": res.driver_min,
        "cuda_image_version": res.cuda_image_version,
    }.items():
        checked(
            value,
            where + key,
            shape=VERSION_RE,
            what="a plain value",
            error=DataError,
            hint=_RELOCK,
            max_len=128,
        )
    checked(
        res.base_image,
        where + "base_image",
        shape=IMAGE_RE,
        what="an image reference",
        error=DataError,
        hint=_RELOCK,
    )
    if res.base_image_digest is not None:
        checked(
            res.base_image_digest,
            where + "base_image_digest",
            shape=DIGEST_RE,
            what="a sha256 digest",
            error=DataError,
            hint=_RELOCK,
        )
    for i, warning in enumerate(res.warnings):
        text(warning, f"{where}warnings[{i}]")
    for pkg in lock.packages:
        checked(
            pkg.name,
            "pylock.toml: package name",
            shape=PLAIN_RE,
            what="a plain name",
            error=DataError,
            hint=_RELOCK,
        )
    for i, req in enumerate(lock.top_requirements):
        text(req, f"pylock.toml: [tool.envlock] top_requirements[{i}]")


def check_image(ref: str, origin: str) -> Checked:
    """``ref`` when it is an image reference; ``origin`` names the flag."""
    return checked(
        ref,
        origin,
        shape=IMAGE_RE,
        what="an image reference",
        hint="write it as [registry/]name[:tag][@sha256:digest], e.g. "
        "nvidia/cuda:12.2.2-cudnn8-runtime-ubuntu22.04",
        max_len=512,
    )


def split_digest(ref: str) -> tuple[str, str | None]:
    """An image reference as (name[:tag], digest or None)."""
    if "@" in ref:
        name, digest = ref.split("@", 1)
        return name, digest
    return ref, None


def check_digest(value: str, origin: str) -> Checked:
    """``value`` when it is a sha256 digest; ``origin`` names the flag."""
    return checked(
        value,
        origin,
        shape=DIGEST_RE,
        what="a sha256 digest",
        hint="write it as sha256: followed by 64 lowercase hex digits "
        "(docker buildx imagetools inspect IMAGE shows it)",
        max_len=128,
    )


def check_os(value: str) -> Checked:
    """``--os``, lowercased, when it is an ubuntuXX.YY release."""
    return checked(
        value.lower() if isinstance(value, str) else value,
        "--os",
        shape=OS_RE,
        what="an Ubuntu release of the nvidia/cuda images",
        hint="write it as ubuntuXX.YY, e.g. ubuntu22.04",
        max_len=64,
    )


def os_of(image: str) -> str | None:
    """The "ubuntuXX.YY" at the end of an image's tag, or None."""
    m = OS_SUFFIX_RE.search(image)
    return m.group(1) if m else None


# PEM blocks a CA bundle may hold: certificates (OpenSSL's trusted form too).
_PEM_BEGIN_RE = re.compile(rb"-----BEGIN ([^-\r\n]*)-----")
_CERTIFICATE_LABELS = frozenset((b"CERTIFICATE", b"TRUSTED CERTIFICATE", b"X509 CERTIFICATE"))


def read_ca_cert(path: str) -> bytes:
    """The bytes of the ``--ca-cert`` file, when it holds PEM certificates and nothing else."""
    user_path(path, "--ca-cert")
    shown_path = path  # no control character: user_path checked it
    try:
        data = read_bytes(Path(path).expanduser(), "--ca-cert", hint="give a readable PEM file")
    except FileNotFoundError:
        raise UsageError(
            f"--ca-cert {shown_path}: no such file", hint="give the PEM file of the CA to trust"
        ) from None
    except OSError as e:
        raise UsageError(
            f"--ca-cert {shown_path}: cannot read it ({e.strerror or e})",
            hint="give a readable PEM file",
        ) from None
    labels = _PEM_BEGIN_RE.findall(data)
    others = sorted(
        {label.decode("ascii", "replace") for label in labels}
        - {label.decode() for label in _CERTIFICATE_LABELS}
    )
    if others or b"PRIVATE KEY" in data:
        what = ", ".join(others) if others else "PRIVATE KEY"
        raise UsageError(
            f"--ca-cert {shown_path}: holds a {what} block, not only certificates; "
            "it was not copied into the bundle",
            hint="a CA file must hold only the CA's certificates (-----BEGIN CERTIFICATE-----); "
            "never give a private key: extract the certificates with "
            "`openssl x509 -in FILE -out ca.pem`",
        )
    if not labels:
        raise UsageError(
            f"--ca-cert {shown_path}: no PEM certificate in it",
            hint="give a PEM file (-----BEGIN CERTIFICATE-----), e.g. "
            "/etc/ssl/certs/ca-certificates.crt; convert DER with "
            "`openssl x509 -inform der -in CA.cer -out ca.pem`",
        )
    return data
