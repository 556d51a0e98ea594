"""Source archives in a lock (#41): a locked package with no wheel for the target
is recorded by its sdist, as PEP 751 ``[packages.sdist]`` (name, url, size,
sha256) and as ``--hash`` lines in requirements.txt, and built where the lock is
installed.

Kept apart from the wheel code of ``envlock.lock.pylock`` and
``envlock.lock.requirements``: the resolver's entry read (``sdist_from_resolver``),
the pylock entry written (``sdist_entry``) and read back (``sdist_from_pylock``),
and the check every entry passes before it is written or after it is read
(``check_sdist``): one file name ``NAME-VERSION.tar.gz`` / ``.zip`` of exactly the
package and version it is recorded under (no folder, so no path outside a
wheelhouse), the URL's last segment that same name, a sha256 and a size from 1
byte to ``MAX_SDIST_BYTES``.

How a rebuild stays reproducible: see ``envlock.lock.buildreqs`` (the build
requirements are locked too, with hashes, into ``build-constraints.txt``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

from packaging.utils import InvalidSdistFilename, canonicalize_name, parse_sdist_filename
from packaging.version import InvalidVersion, Version

from envlock.door import bad_character, shown
from envlock.errors import DataError
from envlock.model import Lock, LockedSdist

# the largest source archive a lock records (pyspark's, among the largest on the
# default index, is ~0.3 GiB): a size beyond it is a damaged or hostile lock
MAX_SDIST_BYTES = 2 * 1024**3
_FILENAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*\.(?:tar\.gz|zip)$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_URL = re.compile(r"^(?:https?|file)://\S+$")
_MAX_URL = 4096
_DAMAGED = "the lock was edited or damaged: re-create it with `envlock lock`"


def built_from_source(lock: Lock) -> tuple[str, ...]:
    """The names of the locked packages recorded by a source archive, sorted."""
    return tuple(sorted(p.name for p in lock.packages if p.sdist is not None))


def _url_name(url: str) -> str:
    return unquote(urlsplit(url).path.rsplit("/", 1)[-1])


def sdist_problem(sdist: LockedSdist, name: str, version: str) -> str | None:
    """What is wrong with ``sdist`` as the source archive of ``name`` ``version``, or None."""
    for key, value in (("name", sdist.filename), ("url", sdist.url), ("sha256", sdist.sha256)):
        if not isinstance(value, str):
            return f"{key} is a {type(value).__name__}, not a string"
        if bad_character(value) is not None:
            return f"{key} {shown(value)} holds the control character {bad_character(value)}"
    if not _FILENAME.match(sdist.filename):
        return f"name {shown(sdist.filename)} is not a source archive's file name (.tar.gz, .zip)"
    try:
        project, got = parse_sdist_filename(sdist.filename)
    except (InvalidSdistFilename, InvalidVersion):
        return f"name {shown(sdist.filename)} is not NAME-VERSION.tar.gz"
    try:
        same = project == canonicalize_name(name) and got == Version(version)
    except InvalidVersion:
        same = False
    if not same:
        return f"name {sdist.filename} is not the source archive of {name} {version}"
    if len(sdist.url) > _MAX_URL or not _URL.match(sdist.url):
        return f"url {shown(sdist.url[:200])} is not an http(s) or file URL"
    if _url_name(sdist.url) != sdist.filename:
        return f"url {shown(sdist.url[:200])} does not end in {sdist.filename}"
    if not _SHA256.match(sdist.sha256):
        return f"sha256 {shown(sdist.sha256[:80])} is not 64 lowercase hex digits"
    if isinstance(sdist.size, bool) or not isinstance(sdist.size, int):
        return f"size {sdist.size!r} is not a whole number"
    if not 0 < sdist.size <= MAX_SDIST_BYTES:
        return f"size {sdist.size} is not from 1 to {MAX_SDIST_BYTES} bytes"
    return None


def check_sdist(
    sdist: LockedSdist, name: str, version: str, field: str, where: str, hint: str = _DAMAGED
) -> None:
    """DataError (exit 2) naming ``field`` when ``sdist`` is not a sane entry."""
    problem = sdist_problem(sdist, name, version)
    if problem is not None:
        raise DataError(f"{where}: {field}: {problem}", hint=hint)


def sdist_from_resolver(entry: object, name: str, version: str, where: str) -> LockedSdist:
    """The ``sdist`` table of a resolver's pylock.toml as a LockedSdist, checked."""
    if not isinstance(entry, Mapping):
        raise DataError(f"{where} ({name}): sdist is not a table")
    url = entry.get("url")
    sha = (entry.get("hashes") or {}).get("sha256")
    size = entry.get("size")
    if not isinstance(url, str) or not isinstance(sha, str):
        raise DataError(f"{where} ({name}): a source archive without url or sha256")
    if size is None:
        raise DataError(
            f"{where} ({name}): the index gave no size for {_url_name(url)}",
            hint="use an index that serves PEP 691 JSON with file sizes",
        )
    filename = entry.get("name") or _url_name(url)
    sdist = LockedSdist(filename=filename, url=url, size=size, sha256=sha)
    check_sdist(sdist, name, version, "sdist", where, hint="check the index")
    return sdist


def sdist_entry(sdist: LockedSdist) -> dict[str, Any]:
    """The PEP 751 ``[packages.sdist]`` table (the URL without user and password)."""
    from envlock.door import redact

    return {
        "name": sdist.filename,
        "url": redact(sdist.url),
        "size": sdist.size,
        "hashes": {"sha256": sdist.sha256},
    }


def sdist_from_pylock(sdist: Any, name: str, version: str, field: str, where: str) -> LockedSdist:
    """``packaging.pylock``'s PackageSdist read back as a LockedSdist, checked: an
    index file only (url, size and sha256; a local ``path`` is refused)."""
    if sdist.path is not None:
        raise DataError(
            f"{where}: {field}: a local path ({shown(str(sdist.path)[:200])}); "
            "envlock locks index files by URL",
            hint=_DAMAGED,
        )
    sha = sdist.hashes.get("sha256")
    if not sha or not sdist.url or sdist.size is None:
        raise DataError(f"{where}: {field}: url, size and sha256 are required", hint=_DAMAGED)
    filename = sdist.name or _url_name(sdist.url)
    out = LockedSdist(filename=filename, url=sdist.url, size=sdist.size, sha256=sha)
    check_sdist(out, name, version, field, where)
    return out


BUILD_CONSTRAINTS = "build-constraints.txt"
MAX_BUILD_CONSTRAINTS = 512
_CONSTRAINT = re.compile(
    r"^(?P<name>[a-z0-9](?:[a-z0-9._-]*[a-z0-9])?)==(?P<version>[0-9][A-Za-z0-9.+!_-]*)"
    r"(?: --hash=sha256:[0-9a-f]{64})+$"
)


def check_build_constraints(lines: tuple[str, ...], where: str, hint: str = _DAMAGED) -> None:
    """Each recorded build constraint is ``name==version --hash=sha256:...`` (a
    normalized name, at least one hash), each name once, at most
    MAX_BUILD_CONSTRAINTS of them."""
    if len(lines) > MAX_BUILD_CONSTRAINTS:
        raise DataError(
            f"{where}: tool.envlock.build_constraints: more than {MAX_BUILD_CONSTRAINTS} lines",
            hint=hint,
        )
    seen: set[str] = set()
    for i, line in enumerate(lines):
        m = _CONSTRAINT.match(line) if isinstance(line, str) and len(line) < 8192 else None
        if m is None:
            text = shown(line[:200]) if isinstance(line, str) else repr(line)[:80]
            raise DataError(
                f"{where}: tool.envlock.build_constraints[{i}]: {text} is not "
                "'name==version --hash=sha256:...'",
                hint=hint,
            )
        if m.group("name") in seen:
            raise DataError(
                f"{where}: tool.envlock.build_constraints[{i}]: {m.group('name')} twice",
                hint=hint,
            )
        seen.add(m.group("name"))


def build_constraints_text(lock: Lock) -> str:
    """build-constraints.txt: the pinned build requirements of the lock's sdists."""
    names = ", ".join(built_from_source(lock))
    head = [
        f"Made by envlock: the build requirements of the packages built from source ({names}),",
        "pinned with hashes; every build of them uses exactly these (envlock restore and",
        f"uv: uv pip install --build-constraints {BUILD_CONSTRAINTS} ...; pip refuses hashed",
        "constraints for unpinned build requirements, pypa/pip#9243, so bootstrap.sh and",
        "the Dockerfile give pip these pins without their hashes).",
    ]
    body = [line.replace(" --hash", " \\\n    --hash") for line in lock.build_constraints]
    return "".join(f"# {h}\n" for h in head) + "\n" + "".join(b + "\n" for b in body)


def source_header(lock: Lock) -> list[str]:
    """The lock files' header lines naming what is built from source, or none."""
    names = built_from_source(lock)
    if not names:
        return []
    return [
        f"Built from source where installed (no wheel fits the target): {', '.join(names)};",
        f"  their build requirements are pinned with hashes in {BUILD_CONSTRAINTS}",
        f"  (uv pip install --build-constraints {BUILD_CONSTRAINTS}; bootstrap.sh: pip).",
    ]
