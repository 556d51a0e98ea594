"""The build requirements of a lock's source archives, locked with hashes (#41).

A package locked by its sdist is built where the lock is installed. Left
alone, the installer builds it with whatever setuptools (or other backend) is
newest that day, so two installs of the same lock could build different
wheels. Two ways keep a rebuild reproducible: record the hash of a wheel built
once (which needs a build for the target's Python and platform at lock time,
on a machine that may not have them, and a wheel that is itself reproducible
byte for byte, which few backends promise), or lock what the build uses. envlock
does the second: each sdist is read once per machine (its locked sha256
checked as it arrives, its size bounded by the locked size; what it says is
kept in envlock's cache under that sha256) for ``[build-system] requires``
in its ``pyproject.toml`` (without one, the PEP 517 fallback pip and uv use:
``setuptools>=40.8.0`` and ``wheel``; ``wheel`` beside any setuptools, which
asks for it before 70.1); the union is resolved by uv, wheels only,
for the lock's target and recorded with hashes (``Lock.build_constraints``,
written as ``build-constraints.txt``), which uv's ``--build-constraints`` and
pip's ``PIP_CONSTRAINT`` hold every build to.

What this leaves open: a backend's dynamic ``get_requires_for_build_wheel``
additions outside the recorded closure are resolved by the installer (the
recorded pins still hold every name they list), and a compiler the sdist needs
comes from the machine that builds it.
"""

from __future__ import annotations

import hashlib
import io
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from envlock.errors import DataError, EnvironmentFailure, StubSdists
from envlock.lockplatform import Target
from envlock.model import LockedPackage, LockedSdist

# PEP 517/518: a source tree without [build-system] is built by setuptools' legacy
# backend; pip and uv install these for it
FALLBACK = ("setuptools>=40.8.0", "wheel")
MAX_PYPROJECT = 1024 * 1024
_CHUNK = 1024 * 1024


def _download(sdist: LockedSdist, index: str, into: Path) -> Path:
    """The sdist saved under ``into``, its size and sha256 checked against the lock."""
    from envlock.index import http

    path = into / sdist.filename
    sess = http.session()
    try:
        resp = http.get(sess, sdist.url, index=index, stream=True)
        digest = hashlib.sha256()
        got = 0
        with resp, path.open("wb") as out:
            for chunk in resp.iter_content(_CHUNK):
                got += len(chunk)
                if got > sdist.size:
                    break
                digest.update(chunk)
                out.write(chunk)
    except OSError as e:
        raise EnvironmentFailure(f"cannot save {sdist.filename}: {e.strerror or e}") from None
    finally:
        sess.close()
    if got != sdist.size or digest.hexdigest() != sdist.sha256:
        raise DataError(
            f"{sdist.url}: the index served {got} bytes that are not the locked "
            f"{sdist.filename} ({sdist.size} bytes, sha256 {sdist.sha256[:16]}...)",
            hint="the index changed the file under the same name: check the index",
        )
    return path


def _bounded(f: IO[bytes] | None) -> bytes | None:
    if f is None:
        return None
    data = f.read(MAX_PYPROJECT + 1)
    return None if len(data) > MAX_PYPROJECT else data


def pyproject_of(path: Path) -> bytes | None:
    """The top folder's ``pyproject.toml`` of an sdist (tar.gz read as a stream), or None."""

    def top(name: str) -> bool:
        parts = name.strip("/").split("/")
        return len(parts) == 2 and parts[1] == "pyproject.toml"

    try:
        if path.name.endswith(".zip"):
            with zipfile.ZipFile(path) as z:
                for info in z.infolist():
                    if top(info.filename) and info.file_size <= MAX_PYPROJECT:
                        with z.open(info) as f:
                            return _bounded(f)
            return None
        with tarfile.open(path, mode="r|gz") as tar:
            for member in tar:
                if member.isfile() and top(member.name) and member.size <= MAX_PYPROJECT:
                    return _bounded(tar.extractfile(member))
    except (OSError, tarfile.TarError, zipfile.BadZipFile, EOFError) as e:
        raise DataError(
            f"{path.name}: not a readable source archive ({e})", hint="check the index"
        ) from None
    return None


def requires_of(pyproject: bytes | None, filename: str) -> tuple[str, ...]:
    """``[build-system] requires`` of a pyproject.toml (the fallback without one)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - CPython 3.10
        import tomli as tomllib

    if pyproject is None:
        return FALLBACK
    try:
        doc = tomllib.load(io.BytesIO(pyproject))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise DataError(
            f"{filename}: its pyproject.toml is not TOML ({e})",
            hint="pin another version of it, or lock with --only-binary to leave it out",
        ) from None
    system = doc.get("build-system")
    if not isinstance(system, dict) or "requires" not in system:
        return FALLBACK
    reqs = system["requires"]
    if not isinstance(reqs, list) or not all(isinstance(r, str) for r in reqs):
        raise DataError(
            f"{filename}: [build-system] requires is not a list of strings",
            hint="pin another version of it, or lock with --only-binary to leave it out",
        )
    out = []
    for r in reqs:
        try:
            req = Requirement(r)
        except InvalidRequirement as e:
            raise DataError(
                f"{filename}: build requirement {r!r} is not valid ({e})",
                hint="pin another version of it, or lock with --only-binary to leave it out",
            ) from None
        if req.url:
            raise DataError(
                f"{filename}: build requirement {r!r} is a direct URL, which no hash can pin",
                hint="pin another version of it, or lock with --only-binary to leave it out",
            )
        out.append(str(req))
    names = {canonicalize_name(Requirement(r).name) for r in out}
    if "setuptools" in names and "wheel" not in names:
        # setuptools before 70.1 asks for wheel in get_requires_for_build_wheel:
        # locked beside it, so that build too takes no unpinned package
        out.append("wheel")
    return tuple(out)


STUB_BACKENDS = frozenset({"wheel-stub", "nvidia-stub"})
_CACHE_BYTES = 64 * 1024


def _cache_file(sha256: str) -> Path:
    """Where the build requirements read from the sdist of this sha256 are kept
    (a pure function of the archive's bytes, so keyed by them: an sdist is
    downloaded once per machine, not once per lock)."""
    from envlock.matrix.cache import cache_dir

    return Path(cache_dir(), "sdist-build-requires", f"{sha256}.json")


def _cached(sdist: LockedSdist) -> tuple[str, ...] | None:
    """The cached build requirements of ``sdist``; None when absent or not sane
    (the cache is input too: bounded, every entry a requirement without a URL)."""
    import json

    try:
        with _cache_file(sdist.sha256).open("rb") as f:
            raw = f.read(_CACHE_BYTES + 1)
        if len(raw) > _CACHE_BYTES:
            return None
        data = json.loads(raw)
        reqs = data["requires"] if isinstance(data, dict) else None
        if not isinstance(reqs, list) or len(reqs) > 256:
            return None
        out = []
        for r in reqs:
            req = Requirement(r)
            if req.url:
                return None
            out.append(str(req))
        return tuple(out)
    except (OSError, ValueError, KeyError, TypeError, InvalidRequirement):
        return None


def _remember(sdist: LockedSdist, reqs: tuple[str, ...]) -> None:
    """Keep ``reqs`` for the next lock (written atomically; a cache that cannot be
    written costs only the next download)."""
    import json
    import os

    path = _cache_file(sdist.sha256)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"requires": list(reqs)}, f)
        os.replace(tmp, path)
    except OSError:
        return


def read_build_requirements(
    sdists: Sequence[tuple[str, LockedSdist]], index: str
) -> dict[str, tuple[str, ...]]:
    """{name: build requirements} of each (name, sdist): from envlock's cache, else
    read from the archive (downloaded in parallel, hash-checked)."""
    if not sdists:
        return {}
    with tempfile.TemporaryDirectory(prefix="envlock-sdist-") as tmp:

        def one(item: tuple[str, LockedSdist]) -> tuple[str, tuple[str, ...]]:
            name, sdist = item
            known = _cached(sdist)
            if known is not None:
                return name, known
            folder = Path(tmp, name)
            folder.mkdir()
            path = _download(sdist, index, folder)
            try:
                reqs = requires_of(pyproject_of(path), sdist.filename)
            finally:
                path.unlink()
            _remember(sdist, reqs)
            return name, reqs

        with ThreadPoolExecutor(max_workers=min(8, len(sdists))) as pool:
            return dict(pool.map(one, sdists))


def is_stub(reqs: Sequence[str]) -> bool:
    """The build requirements name a stub backend (NVIDIA's wheel-stub)."""
    return any(canonicalize_name(Requirement(r).name) in STUB_BACKENDS for r in reqs)


def build_requirements(packages: Sequence[LockedPackage], index: str) -> dict[str, tuple[str, ...]]:
    """{package name: its build requirements} of the packages locked by an sdist.

    Raises StubSdists (exit 2) naming every sdist whose backend is a stub that
    fetches a wheel from another index at build time (NVIDIA's wheel-stub)."""
    found = read_build_requirements(
        [(p.name, p.sdist) for p in packages if p.sdist is not None], index
    )
    version = {p.name: p.version for p in packages}
    stubs = [(name, version[name]) for name, reqs in sorted(found.items()) if is_stub(reqs)]
    if stubs:
        raise StubSdists(stubs)
    return found


def lock_build_requirements(
    needs: dict[str, tuple[str, ...]],
    target: Target,
    index: str,
    *,
    offline: bool = False,
    cache_dir: str | None = None,
    exclude_newer: str | None = None,
    prefer: Sequence[LockedPackage] = (),
) -> tuple[str, ...]:
    """The union of ``needs`` resolved by uv (wheels only) for ``target``, as
    ``name==version --hash=sha256:...`` lines, sorted by name.

    ``prefer``: the lock's own packages; a build requirement the lock also holds
    (setuptools, wheel, packaging in a captured freeze) is resolved at the lock's
    version where the build allows it, so one constraints file serves the install
    and its builds (pip's PIP_CONSTRAINT reaches both); where it does not, the
    build's own resolution is kept."""
    from envlock.lock import uv

    wanted = sorted({r for reqs in needs.values() for r in reqs})
    if not wanted:
        return ()
    env = uv.uv_env(cache_dir)
    with tempfile.TemporaryDirectory(prefix="envlock-build-") as tmp:
        Path(tmp, uv.REQUIREMENTS_IN).write_text("".join(w + "\n" for w in wanted), "utf-8")
        out = str(Path(tmp, "pylock.toml"))
        pins = Path(tmp, "lock-pins.txt")
        pins.write_text(
            "".join(f"{p.name}=={p.version}\n" for p in prefer if p.sdist is None), "utf-8"
        )

        def compile_with(constraints: str | None) -> None:
            cmd = uv.compile_command(
                uv.REQUIREMENTS_IN,
                out,
                target,
                index,
                offline=offline,
                exclude_newer=exclude_newer,
                constraints=constraints,
            )
            uv._compile(cmd, env, tmp, index, offline)

        try:
            try:
                compile_with(pins.name if prefer else None)
            except uv.ResolverFailed:
                if not prefer:
                    raise
                compile_with(None)
        except uv.ResolverFailed as e:
            who = "; ".join(f"{n} needs {', '.join(r)}" for n, r in sorted(needs.items()))
            raise DataError(
                f"the build requirements of the source archives cannot be locked together "
                f"({who}):\n{e.output.strip()}",
                hint="pin other versions of those packages, or lock with --only-binary "
                "to leave them out",
            ) from None
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # pragma: no cover - CPython 3.10
            import tomli as tomllib

        data = tomllib.loads(Path(out).read_text(encoding="utf-8"))
    lines = []
    for pkg in uv.packages_from_pylock(data, target):
        hashes = " ".join(f"--hash=sha256:{h}" for h in pkg.hashes)
        lines.append(f"{canonicalize_name(pkg.name)}=={pkg.version} {hashes}")
    return tuple(sorted(lines))
