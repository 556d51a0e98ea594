"""``envlock wheelhouse DIR -o WH``: every locked wheel, downloaded and hash-checked.

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

    from envlock.model import Lock, LockedWheel
    from envlock.output import Printed

TEMP_MARK = ".envlock-part-"
WORKERS = 8
CHUNK = 1 << 20  # bytes read at a time (a body past the lock's size is stopped within one)


@dataclass(frozen=True)
class WheelhouseResult:
    folder: Path
    downloaded: tuple[str, ...]  # file names fetched in this run
    present: tuple[str, ...]  # file names already there with the right hash
    bytes_downloaded: int

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


def _safe_name(filename: str) -> str:
    if not filename or "/" in filename or "\\" in filename or filename.startswith("."):
        raise UsageError(
            f"the lock names a wheel file {filename!r} that is not a plain file name",
            hint="regenerate the lock with envlock lock",
        )
    return filename


def _origin(url: str) -> str:
    from envlock.door import redact

    parts = urlsplit(redact(url))
    return f"{parts.scheme}://{parts.netloc}"


def has_wheel(folder: Path, wheel: LockedWheel) -> bool:
    """``folder`` holds ``wheel``'s file with the lock's sha256."""
    from envlock.fsutil import sha256_file

    path = folder / _safe_name(wheel.filename)
    if not path.is_file():
        return False
    if path.stat().st_size != wheel.size:
        return False
    return sha256_file(path) == wheel.sha256


def wheel_problem(folder: Path, wheel: LockedWheel) -> str | None:
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


def check_wheelhouse(lock: Lock, folder: Path) -> list[tuple[str, str]]:
    """Every locked wheel that ``folder`` lacks or holds damaged, as (file name,
    what is wrong), in the lock's order; [] when it holds them all. The files are
    hashed in threads (hashlib lets go of the GIL), so a whole TensorFlow
    wheelhouse takes a second or two."""
    wheels = locked_wheels(lock)
    if not wheels:
        return []
    with ThreadPoolExecutor(max_workers=min(WORKERS, len(wheels))) as pool:
        found = list(pool.map(lambda w: wheel_problem(folder, w), wheels))
    return [(w.filename, p) for w, p in zip(wheels, found, strict=True) if p is not None]


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


def _download(sess: requests.Session, folder: Path, wheel: LockedWheel, mode: int) -> int:
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
    """Download every wheel of ``bundle``'s lock into ``folder``, hash-checked."""
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
    wheels = locked_wheels(lock)
    present = [w for w in wheels if has_wheel(folder, w)]
    missing = [w for w in wheels if w not in present]
    sizes: list[int] = []
    if missing:
        mode = _file_mode()
        sess = session()
        try:
            with ThreadPoolExecutor(max_workers=min(WORKERS, len(missing))) as pool:
                futures = [pool.submit(_download, sess, folder, w, mode) for w in missing]
                for wheel, fut in zip(missing, futures, strict=True):
                    sizes.append(fut.result())
                    if progress:
                        progress(f"{wheel.filename} ({wheel.size} bytes)")
        finally:
            sess.close()
    return WheelhouseResult(
        folder=folder,
        downloaded=tuple(w.filename for w in missing),
        present=tuple(w.filename for w in present),
        bytes_downloaded=sum(sizes),
    )


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
    }
    if quiet:  # --json: the text (and its default-venv lookup) is not needed
        return Printed(doc)
    # restore's default venv spelled out: the hint names the venv it will act on
    venv, why = default_venv(bundle)
    restore = restore_command(RestoreRequest(bundle, venv, wheelhouse=result.folder))
    return Printed(
        doc,
        f"{result.folder}: {result.total} wheels ({len(result.downloaded)} downloaded, "
        f"{result.bytes_downloaded} bytes; {len(result.present)} already there)\n"
        f"  restore without an index (into {venv}, {why}; give --venv for another venv): "
        f"{restore}\n",
    )
