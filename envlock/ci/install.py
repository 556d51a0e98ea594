"""How the workflow ``envlock ci init`` writes installs envlock: a hash-pinned closure.

The workflow never installs envlock by a bare name (on the public index the
name ``envlock`` belongs to an unrelated project; this one is ``envlock-gpu``).
It runs ``pip install --require-hashes --no-deps -r <install dir>/requirements.txt``,
a file ``ci init`` writes: envlock's own wheel with its sha256, then every
dependency of that wheel, locked with uv for the runner (Linux x86_64, the
workflow's Python) as ``name==version`` with the sha256 of each wheel.

Where envlock's wheel comes from (``--envlock-wheel``):

- a wheel file (``dist/envlock_gpu-0.1.0-py3-none-any.whl``, made by
  ``uv build --wheel``): copied into the install folder, committed beside the
  workflow and named by its path in the repository. The bytes that run on the
  GPU runner are the bytes that were reviewed, and nothing needs publishing.
- ``URL#sha256=HEX``: a wheel served elsewhere (a release asset, an internal
  index); read once here to check the hash and read its dependencies, named
  by the URL with that hash.

The dependencies come from the index of the user's pip/uv configuration (or
``--index-url``); the runner installs them from its own configured index, and
pip refuses any file whose hash is not in the file.
"""

from __future__ import annotations

import hashlib
import io
import re
import zipfile
from dataclasses import dataclass
from email.parser import BytesParser
from pathlib import Path, PurePosixPath

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from envlock.errors import UsageError
from envlock.readers import read_member

DISTRIBUTION = "envlock-gpu"
RUNNER_PYTHON = "3.11"  # the Python the workflow's setup-python step installs
REQUIREMENTS = "requirements.txt"
_HEX = re.compile(r"^[0-9a-f]{64}$")
HINT = (
    "give --envlock-wheel a wheel file (make one in envlock's checkout: uv build --wheel "
    "-o dist) or URL#sha256=<64 hex>"
)


@dataclass(frozen=True)
class EnvlockWheel:
    filename: str
    data: bytes
    sha256: str
    version: str
    requires: tuple[str, ...]  # Requires-Dist without extras-only lines
    url: str | None = None  # None: a file committed beside the workflow


_NO_SPACE = re.compile(r"^\S+$")


def _metadata(filename: str, data: bytes, what: str) -> tuple[str, tuple[str, ...]]:
    try:
        name, version, _build, _tags = parse_wheel_filename(filename)
    except InvalidWheelFilename as e:
        raise UsageError(f"--envlock-wheel {what}: {e}", hint=HINT) from e
    if name != canonicalize_name(DISTRIBUTION):
        raise UsageError(
            f"--envlock-wheel {what}: a wheel of {name}, not of {DISTRIBUTION}", hint=HINT
        )
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            meta = next(n for n in z.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n))
            # bounded: a METADATA declared (or inflating) past 4 MiB is refused
            message = BytesParser().parsebytes(
                read_member(z, meta, f"--envlock-wheel {what}", hint=HINT)
            )
    except (zipfile.BadZipFile, StopIteration, KeyError) as e:
        raise UsageError(f"--envlock-wheel {what}: not a wheel with METADATA", hint=HINT) from e
    requires: list[str] = []
    for line in message.get_all("Requires-Dist") or []:
        try:
            req = Requirement(str(line))
        except InvalidRequirement as e:
            raise UsageError(f"--envlock-wheel {what}: Requires-Dist {line!r}: {e}") from e
        if req.marker is not None and "extra" in str(req.marker):
            continue  # an optional extra: the workflow installs envlock alone
        requires.append(str(req))
    return str(version), tuple(requires)


def wheel_from_path(path: Path) -> EnvlockWheel:
    from envlock.readers import read_bytes

    data = read_bytes(path, "--envlock-wheel", hint=HINT)  # bounded, a regular file
    version, requires = _metadata(path.name, data, str(path))
    return EnvlockWheel(path.name, data, hashlib.sha256(data).hexdigest(), version, requires)


def wheel_from_url(value: str) -> EnvlockWheel:
    """``URL#sha256=HEX``: fetched once (bounded, the hash checked as it arrives)."""
    from urllib.parse import unquote, urlsplit

    from envlock.index import http
    from envlock.index.body import BodyError, read_body

    url, _, fragment = value.partition("#")
    key, _, digest = fragment.partition("=")
    if key != "sha256" or not _HEX.fullmatch(digest):
        raise UsageError(f"--envlock-wheel {value}: a URL needs #sha256=<64 hex>", hint=HINT)
    parts = urlsplit(url)
    if parts.scheme != "https" or parts.username or parts.password:
        raise UsageError(f"--envlock-wheel {url}: give an https URL without credentials", hint=HINT)
    filename = unquote(PurePosixPath(parts.path).name)
    sess = http.session()
    try:
        resp = http.get(sess, url, index=url, stream=True)
        try:
            data = read_body(resp, "blob", sha256=digest)
        except BodyError as e:
            raise UsageError(f"--envlock-wheel {value}: {e}", hint=HINT) from e
    finally:
        sess.close()
    version, requires = _metadata(filename, data, url)
    return EnvlockWheel(filename, data, digest, version, requires, url=url)


def envlock_wheel(value: str) -> EnvlockWheel:
    """The wheel ``--envlock-wheel`` names: a path or ``https://...#sha256=HEX``. It
    reaches requirements.txt as it is given, so it passes the one door for values
    of generated files first (every option is already refused with a control
    character; here also white space, which would split the requirement line)."""
    from envlock.render.values import checked

    value = checked(
        value, "--envlock-wheel", shape=_NO_SPACE, what="a wheel path or URL", hint=HINT
    )
    if "://" in value:
        return wheel_from_url(value)
    return wheel_from_path(Path(value))


def closure_text(
    wheel: EnvlockWheel,
    install_dir: str,
    *,
    index_url: str | None = None,
    exclude_newer: str | None = None,
) -> str:
    """requirements.txt: envlock's wheel, then its dependencies locked for the runner."""
    from envlock.index.config import index_url as configured
    from envlock.lock.uv import ResolverFailed, compile_lock
    from envlock.lockplatform import Target

    target = Target.for_lock(RUNNER_PYTHON, None)
    try:
        packages = compile_lock(
            list(wheel.requires), target, configured(index_url), exclude_newer=exclude_newer
        )
    except ResolverFailed as e:
        raise UsageError(
            f"envlock's dependencies do not resolve for Python {RUNNER_PYTHON} on Linux: "
            + e.output.strip()[-400:],
            hint="check --index-url",
        ) from e
    where = wheel.url or f"./{install_dir}/{wheel.filename}"
    lines = [
        f"# envlock's closure for the workflow's runner (Linux x86_64, Python {RUNNER_PYTHON}),",
        "# written by `envlock ci init`; install with",
        f"#   python -m pip install --require-hashes --no-deps -r {install_dir}/{REQUIREMENTS}",
        f"{DISTRIBUTION} @ {where} \\" if wheel.url else f"{where} \\",
        f"    --hash=sha256:{wheel.sha256}",
    ]
    for pkg in sorted(packages, key=lambda p: p.name):
        hashes = list(pkg.hashes)
        lines.append(f"{pkg.name}=={pkg.version}" + "".join(" \\" for _ in hashes[:1]))
        for i, h in enumerate(hashes):
            lines.append(f"    --hash=sha256:{h}" + (" \\" if i < len(hashes) - 1 else ""))
    return "\n".join(lines) + "\n"
