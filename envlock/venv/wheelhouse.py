"""``envlock wheelhouse DIR -o WH``: every locked file, downloaded and hash-checked.

The files: every locked wheel, the source archive of each package locked by its
sdist (#41), and the wheels of the build requirements those sdists are built
with (``Lock.build_constraints``: ``name==version --hash=sha256:...`` lines,
without URLs). A build requirement the lock also holds at that version with
that hash is its locked wheel; any other is found on the PEP 691 page of the
index the lock was made from (``envlock.index.pep691``: the lock's recorded
``--index-url``, else the configured index, as ``envlock lock`` chose it), as
each file there whose sha256 is one the line records. So restore
``--wheelhouse WH --offline`` builds the sdists with no index.

Each file is written through a temp file in WH and a rename, so WH only ever
holds whole files whose sha256 is the lock's. A file already there with the
right hash is kept; one with another hash is downloaded again. A download
whose hash differs from the lock's is an EnvironmentFailure (exit 3) naming
the file, the listed and the received sha256. Temp files left by a killed run
are removed by the next one. URLs pass ``envlock.door.redact`` before they
reach a message.

A temp file is made with ``O_EXCL`` under a name no one can guess
(``tempfile.mkstemp`` in WH), so a link planted in WH is never written
through. Each body is streamed with the lock's size as its limit: a server
that sends more is stopped at that size (exit 3 naming the file), before the
hash is checked and before more than the locked size reaches the disk.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO
from urllib.parse import urlsplit

from envlock.errors import EnvironmentFailure, UsageError

if TYPE_CHECKING:
    import requests

    from envlock.model import Lock, LockedSdist, LockedWheel
    from envlock.output import Printed

    LockedFile = LockedWheel | LockedSdist

TEMP_MARK = ".envlock-part-"
WORKERS = 8
CHUNK = 1 << 20  # bytes read at a time (a body past the lock's size is stopped within one)


@dataclass(frozen=True)
class WheelhouseResult:
    folder: Path
    downloaded: tuple[str, ...]  # file names fetched in this run
    present: tuple[str, ...]  # file names already there with the right hash
    bytes_downloaded: int
    sdists: tuple[str, ...] = ()  # the locked source archives among them
    # the wheels of the build requirements among them that the lock does not hold
    # as packages (found on the index by their recorded sha256)
    build_wheels: tuple[str, ...] = ()

    @property
    def total(self) -> int:
        return len(self.downloaded) + len(self.present)


def locked_wheels(lock: Lock) -> list[LockedWheel]:
    """Every wheel of the lock, once, in the lock's order."""
    seen: dict[str, LockedWheel] = {}
    for pkg in lock.packages:
        for wheel in pkg.wheels:
            seen.setdefault(wheel.filename, wheel)
    return list(seen.values())


def locked_files(lock: Lock) -> list[LockedFile]:
    """Every file of the lock, once, in the lock's order: its wheels, and the source
    archives of the packages locked by their sdist."""
    seen: dict[str, LockedFile] = {}
    for pkg in lock.packages:
        for f in pkg.files:
            seen.setdefault(f.filename, f)
    return list(seen.values())


@dataclass(frozen=True)
class BuildRequirement:
    """One line of ``Lock.build_constraints``: ``name==version --hash=sha256:...``."""

    name: str  # normalized
    version: str
    hashes: frozenset[str]

    @property
    def pin(self) -> str:
        return f"{self.name}=={self.version}"


def build_requirements(lock: Lock) -> list[BuildRequirement]:
    """The lock's build constraints (checked by the lock's reader), in order."""
    out = []
    for line in lock.build_constraints:
        pin, *hashes = line.split()
        name, _, version = pin.partition("==")
        found = frozenset(h.removeprefix("--hash=sha256:") for h in hashes)
        out.append(BuildRequirement(name, version, found))
    return out


def _held(lock: Lock, req: BuildRequirement) -> list[LockedWheel]:
    """The locked wheels of ``req``'s name and version with a hash it records: the
    files already in the wheelhouse as locked files (none: found on the index)."""
    from packaging.utils import canonicalize_name
    from packaging.version import InvalidVersion, Version

    try:
        version = Version(req.version)
    except InvalidVersion:
        return []
    for pkg in lock.packages:
        if canonicalize_name(pkg.name) != req.name:
            continue
        try:
            same = Version(pkg.version) == version
        except InvalidVersion:
            same = False
        if same:
            return [w for w in pkg.wheels if w.sha256 in req.hashes]
    return []


def unheld_build_requirements(lock: Lock) -> list[BuildRequirement]:
    """The build requirements the lock's own wheels do not cover."""
    return [r for r in build_requirements(lock) if not _held(lock, r)]


def _wheel_of(filename: str, req: BuildRequirement) -> bool:
    """``filename`` is a wheel of ``req``'s name and version."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename
    from packaging.version import InvalidVersion, Version

    if not filename.endswith(".whl"):
        return False
    try:
        name, version, _, _ = parse_wheel_filename(filename)
        return name == req.name and version == Version(req.version)
    except (InvalidWheelFilename, InvalidVersion):
        return False


def lock_index(lock: Lock) -> str:
    """The index the lock was made from: its recorded ``--index-url`` (with the
    configured index's credentials where that is the same index), else the
    configured one, as ``envlock lock`` chose it."""
    from envlock.door import redact
    from envlock.index.config import index_url

    recorded = lock.input.index_url
    if recorded is None:
        return index_url()
    try:
        configured = index_url()
    except UsageError:
        configured = ""
    if configured and redact(configured).rstrip("/") == redact(recorded).rstrip("/"):
        return configured
    return index_url(recorded)


def find_build_wheels(
    lock: Lock,
    sess: requests.Session,
    todo: list[BuildRequirement] | None = None,
    index: str | None = None,
) -> list[LockedWheel]:
    """The wheels of the build requirements ``todo`` (default: every one the lock
    does not hold), as the index lists them: on each one's PEP 691 page, every
    wheel of its name and version whose sha256 is one the lock records. A
    requirement with none there is an EnvironmentFailure (exit 3) naming it: the
    index no longer serves the file."""
    from envlock.door import redact
    from envlock.index.pep691 import project_files
    from envlock.model import LockedWheel

    if todo is None:
        todo = unheld_build_requirements(lock)
    if not todo:
        return []
    where = index or lock_index(lock)

    def one(req: BuildRequirement) -> list[LockedWheel]:
        files = project_files(sess, where, req.name) or []
        out = []
        for f in files:
            if f.sha256 not in req.hashes or not _wheel_of(f.filename, req):
                continue
            if f.size is None:
                raise EnvironmentFailure(
                    f"the index at {redact(where)} gives no size for {f.filename} "
                    f"(the build requirement {req.pin}), so its download cannot be bounded",
                    hint="use an index that serves PEP 691 JSON with file sizes",
                )
            out.append(LockedWheel(f.filename, f.url, f.size, f.sha256))
        if not out:
            raise EnvironmentFailure(
                f"the index at {redact(where)} serves no wheel of the build requirement "
                f"{req.pin} with a sha256 the lock records (build-constraints.txt)",
                hint="give the index the lock was made from (--index-url when locking, or "
                "pip's/uv's configuration), or regenerate the lock with envlock lock",
            )
        return out

    with ThreadPoolExecutor(max_workers=min(WORKERS, len(todo))) as pool:
        found = list(pool.map(one, todo))
    return [w for wheels in found for w in wheels]


def _safe_name(filename: str) -> str:
    if not filename or "/" in filename or "\\" in filename or filename.startswith("."):
        raise UsageError(
            f"the lock names a file {filename!r} that is not a plain file name",
            hint="regenerate the lock with envlock lock",
        )
    return filename


def _origin(url: str) -> str:
    from envlock.door import redact

    parts = urlsplit(redact(url))
    return f"{parts.scheme}://{parts.netloc}"


def has_wheel(folder: Path, wheel: LockedFile) -> bool:
    """``folder`` holds ``wheel``'s file (a wheel or an sdist) with the lock's sha256."""
    from envlock.fsutil import sha256_file

    path = folder / _safe_name(wheel.filename)
    if not path.is_file():
        return False
    if path.stat().st_size != wheel.size:
        return False
    return sha256_file(path) == wheel.sha256


def wheel_problem(folder: Path, wheel: LockedFile) -> str | None:
    """What is wrong with ``wheel``'s file in ``folder`` (missing, another size,
    another sha256); None when it is there with the lock's size and sha256."""
    from envlock.fsutil import sha256_file

    path = folder / _safe_name(wheel.filename)
    if path.is_symlink() or not path.is_file():
        return "missing" if not os.path.lexists(path) else "not a plain file"
    try:
        size = path.stat().st_size
        if size != wheel.size:
            return f"{size} bytes, the lock has {wheel.size} (truncated or another file)"
        digest = sha256_file(path)
    except OSError as e:
        return f"cannot be read: {e.strerror or e}"
    if digest != wheel.sha256:
        return f"sha256 {digest}, the lock has {wheel.sha256} (damaged or another file)"
    return None


def _good_build_wheel(
    folder: Path, req: BuildRequirement, names: list[str]
) -> tuple[str | None, list[str]]:
    """(the file name of a wheel of ``req`` in ``folder`` with a sha256 the lock
    records or None, the other wheels of it there); ``names``: the folder's files."""
    from envlock.fsutil import sha256_file

    seen: list[str] = []
    for name in names:
        if not _wheel_of(name, req):
            continue
        path = folder / name
        if path.is_symlink() or not path.is_file():
            continue
        try:
            digest = sha256_file(path)
        except OSError:
            continue
        if digest in req.hashes:
            return name, seen
        seen.append(name)
    return None, seen


def _names(folder: Path) -> list[str]:
    try:
        return sorted(e.name for e in os.scandir(folder))
    except OSError:
        return []


def build_problem(folder: Path, req: BuildRequirement, names: list[str]) -> str | None:
    """What is wrong with the wheels of build requirement ``req`` in ``folder``
    (``names``: its file names): None when one of them has a sha256 the lock records."""
    good, seen = _good_build_wheel(folder, req, names)
    if good is not None:
        return None
    if seen:
        return (
            f"{', '.join(seen)} there, with a sha256 the lock does not record "
            "(damaged or another file)"
        )
    return "missing (no wheel of it with a sha256 the lock records)"


def check_wheelhouse(lock: Lock, folder: Path) -> list[tuple[str, str]]:
    """Every locked file (wheels, source archives) that ``folder`` lacks or holds
    damaged, as (file name, what is wrong), in the lock's order, then every build
    requirement of the source archives that it holds no wheel of with a recorded
    sha256, as ("NAME==VERSION (build requirement)", what is wrong); [] when it
    holds them all. The files are hashed in threads (hashlib lets go of the GIL),
    so a whole TensorFlow wheelhouse takes a second or two."""
    files = locked_files(lock)
    builds = unheld_build_requirements(lock)
    problems: list[tuple[str, str]] = []
    if files:
        with ThreadPoolExecutor(max_workers=min(WORKERS, len(files))) as pool:
            found = list(pool.map(lambda w: wheel_problem(folder, w), files))
        problems += [(w.filename, p) for w, p in zip(files, found, strict=True) if p is not None]
    if builds:
        names = _names(folder)
        for req in builds:
            problem = build_problem(folder, req, names)
            if problem is not None:
                problems.append((f"{req.pin} (build requirement)", problem))
    return problems


def _remove(temp: Path | None) -> None:
    if temp is not None:
        temp.unlink(missing_ok=True)


class _TooLarge(Exception):
    """The body went past the lock's size."""


def _file_mode() -> int:
    """0o666 less the umask: a downloaded file's mode (read before threads start:
    the umask can only be read by setting it)."""
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def _temp_file(folder: Path, mode: int) -> tuple[BinaryIO, Path]:
    """A new empty file in ``folder``, open for writing: O_EXCL, an unguessable
    name with TEMP_MARK first, the mode a downloaded file has. Written through
    its descriptor, so a link put at its name later is never followed."""
    fd, name = tempfile.mkstemp(prefix=f"{TEMP_MARK}{os.getpid()}-", suffix=".whl", dir=folder)
    try:
        os.fchmod(fd, mode)
        return os.fdopen(fd, "wb"), Path(name)
    except BaseException:
        os.close(fd)
        os.unlink(name)
        raise


def _download(sess: requests.Session, folder: Path, wheel: LockedFile, mode: int) -> int:
    import requests as _requests

    from envlock.door import redact
    from envlock.index.http import get, settings_of, unreachable

    name = _safe_name(wheel.filename)
    index = _origin(wheel.url)
    settings = settings_of(sess)
    for attempt in range(settings.retries + 1):
        resp = get(sess, wheel.url, index=index, stream=True)
        digest = hashlib.sha256()
        size = 0
        temp: Path | None = None
        try:
            out, temp = _temp_file(folder, mode)
            with out:
                for chunk in resp.iter_content(CHUNK):
                    if size + len(chunk) > wheel.size:
                        raise _TooLarge()
                    digest.update(chunk)
                    size += len(chunk)
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
        except _TooLarge:
            _remove(temp)
            raise EnvironmentFailure(
                f"{name}: the download is larger than the lock's {wheel.size} bytes; "
                f"stopped at that size, nothing kept (from {redact(wheel.url)})",
                hint="the index served another file under this name; do not use it. "
                "Check the index (or a proxy in between), or regenerate the lock",
            ) from None
        except _requests.exceptions.RequestException as e:
            _remove(temp)
            if attempt >= settings.retries:
                raise unreachable(
                    index, f"{type(e).__name__} while reading {redact(wheel.url)}"
                ) from None
            continue
        except OSError as e:
            _remove(temp)
            raise EnvironmentFailure(
                f"cannot write a temp file in {folder}: {e.strerror or e}",
                hint="check the disk space and rights",
            ) from None
        finally:
            resp.close()
        received = digest.hexdigest()
        if received != wheel.sha256:
            temp.unlink(missing_ok=True)
            raise EnvironmentFailure(
                f"{name}: the sha256 of the download is not the lock's "
                f"(listed {wheel.sha256}, received {received}, {size} bytes "
                f"from {redact(wheel.url)})",
                hint="the index served another file under this name; do not use it. "
                "Check the index (or a proxy in between), or regenerate the lock",
            )
        os.replace(temp, folder / name)
        return size
    raise AssertionError("unreachable")  # pragma: no cover


def clean_temp_files(folder: Path) -> list[str]:
    """Remove the temp files a killed run left in ``folder``; their names."""
    removed = []
    if folder.is_dir():
        for entry in folder.iterdir():
            if entry.name.startswith(TEMP_MARK) and (entry.is_symlink() or entry.is_file()):
                entry.unlink(missing_ok=True)
                removed.append(entry.name)
    return removed


def build_wheelhouse(
    bundle: Path,
    folder: Path,
    *,
    progress: Callable[[str], None] | None = None,
) -> WheelhouseResult:
    """Download every file of ``bundle``'s lock into ``folder``, hash-checked: its
    wheels, its source archives and the wheels of their build requirements."""
    from envlock.index.http import session
    from envlock.lock.pylock import read_lock

    lock = read_lock(bundle)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"-o {folder}: is not a folder", hint="give a folder for the wheels")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise EnvironmentFailure(f"cannot create {folder}: {e.strerror or e}") from None
    clean_temp_files(folder)
    wheels = locked_files(lock)
    sdists = tuple(p.sdist.filename for p in lock.packages if p.sdist is not None)
    present = [w for w in wheels if has_wheel(folder, w)]
    missing = [w for w in wheels if w not in present]
    # the build requirements the lock does not hold: a wheel of each with a recorded
    # sha256 already here is kept; the others are looked up on the index's pages
    names = _names(folder)
    held: list[str] = []
    todo: list[BuildRequirement] = []
    for req in unheld_build_requirements(lock):
        good, _ = _good_build_wheel(folder, req, names)
        if good is None:
            todo.append(req)
        else:
            held.append(good)
    builds: list[LockedWheel] = []
    sizes: list[int] = []
    if missing or todo:  # a wheelhouse that holds everything needs no index
        sess = session()
        try:
            known = {w.filename for w in wheels}
            found = [w for w in find_build_wheels(lock, sess, todo) if w.filename not in known]
            builds = list({w.filename: w for w in found}.values())
            missing += builds
            sizes = _download_all(sess, folder, missing, progress)
        finally:
            sess.close()
    return WheelhouseResult(
        folder=folder,
        downloaded=tuple(w.filename for w in missing),
        present=tuple(w.filename for w in present) + tuple(held),
        bytes_downloaded=sum(sizes),
        sdists=sdists,
        build_wheels=tuple(held) + tuple(w.filename for w in builds),
    )


def _download_all(
    sess: requests.Session,
    folder: Path,
    missing: list[LockedFile],
    progress: Callable[[str], None] | None,
) -> list[int]:
    sizes: list[int] = []
    if missing:
        mode = _file_mode()
        with ThreadPoolExecutor(max_workers=min(WORKERS, len(missing))) as pool:
            futures = [pool.submit(_download, sess, folder, w, mode) for w in missing]
            for wheel, fut in zip(missing, futures, strict=True):
                sizes.append(fut.result())
                if progress:
                    progress(f"{wheel.filename} ({wheel.size} bytes)")
    return sizes


def wheelhouse_for(bundle: Path, output: Path, *, quiet: bool = False) -> Printed:
    """``envlock wheelhouse DIR -o WH`` as one call: the wheels downloaded (each on
    stderr unless ``quiet``), the --json document and the text naming the restore
    that needs no index."""
    from envlock.output import Printed
    from envlock.venv.install import RestoreRequest, default_venv, restore_command

    def progress(line: str) -> None:
        if not quiet:
            sys.stderr.write(f"  downloaded {line}\n")

    result = build_wheelhouse(bundle, output, progress=progress)
    doc = {
        "wheelhouse": str(result.folder),
        "downloaded": list(result.downloaded),
        "present": list(result.present),
        "bytes_downloaded": result.bytes_downloaded,
        "sdists": list(result.sdists),
        "build_requirements": list(result.build_wheels),
    }
    if quiet:  # --json: the text (and its default-venv lookup) is not needed
        return Printed(doc)
    # restore's default venv spelled out: the hint names the venv it will act on
    venv, why = default_venv(bundle)
    restore = restore_command(RestoreRequest(bundle, venv, wheelhouse=result.folder))
    extra = ""
    if result.sdists or result.build_wheels:
        extra = (
            f"; {len(result.sdists)} of them source archives, "
            f"{len(result.build_wheels)} the wheels of their build requirements"
        )
    return Printed(
        doc,
        f"{result.folder}: {result.total} {'files' if extra else 'wheels'} "
        f"({len(result.downloaded)} downloaded, "
        f"{result.bytes_downloaded} bytes; {len(result.present)} already there{extra})\n"
        f"  restore without an index (into {venv}, {why}; give --venv for another venv): "
        f"{restore}\n",
    )
