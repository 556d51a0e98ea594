"""The guards of a bundle folder: where a bundle may be written, and the lock
that makes writers of one folder take turns.

``check_output_folder`` refuses a folder that is a file, the root or the home
folder (exit 2). ``BundleLock`` is ``fcntl.flock`` on ``DIR/.envlock-lock``: a
second envlock waits for the first (the locked part of a write lasts
milliseconds) and gives up with exit 3, naming the holder's pid, after
``LOCK_TIMEOUT_S``. ``envlock.bundle.manifest`` writes and recovers bundles
under it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import sys
import time
from pathlib import Path

from envlock.errors import EnvironmentFailure, UsageError

LOCKFILE = ".envlock-lock"
LOCK_TIMEOUT_S = 120.0


def check_output_folder(folder: Path, what: str) -> None:
    """Refuse a bundle folder that is a file, the root, or the home folder (exit 2)."""
    if folder.exists() and not folder.is_dir():
        raise UsageError(
            f"{what} {folder} is a file, not a folder",
            hint="give a folder for the bundle (it is made when missing)",
        )
    where = folder.resolve()
    if where.parent == where:
        raise UsageError(
            f"{what} {folder} is the root of the file system; envlock does not write a "
            "bundle there",
            hint="give a folder of its own, e.g. -o env/",
        )
    home: Path | None = None
    with contextlib.suppress(RuntimeError, KeyError, OSError):
        home = Path.home().resolve()
    if home is not None and where == home:
        raise UsageError(
            f"{what} {folder} is your home folder; envlock does not write a bundle there",
            hint="give a folder of its own, e.g. -o ~/env-tf215/",
        )


class BundleLock:
    """``fcntl.flock`` on DIR/.envlock-lock, exclusive; a second envlock waits
    (up to ``timeout`` seconds, then exit 3 naming the holder's pid)."""

    def __init__(self, folder: Path, timeout: float = LOCK_TIMEOUT_S) -> None:
        self.folder = folder
        self.timeout = timeout
        self.fd: int | None = None
        self.note: str | None = None  # what recovery did once the lock was held

    def __enter__(self) -> BundleLock:
        path = self.folder / LOCKFILE
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise EnvironmentFailure(
                f"cannot write to {self.folder}: {e.strerror or e}",
                hint="check that the folder is writable",
            ) from e
        deadline = time.monotonic() + self.timeout
        said = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES):
                    os.close(fd)
                    raise EnvironmentFailure(
                        f"cannot lock {path}: {e.strerror or e}",
                        hint="the folder's file system must support file locks",
                    ) from e
            holder = _holder(fd)
            if time.monotonic() > deadline:
                os.close(fd)
                raise EnvironmentFailure(
                    f"{self.folder} is being written by another envlock{holder} for more "
                    f"than {self.timeout:.0f} s",
                    hint="wait for it to finish, or stop it; the next run cleans up after it",
                )
            if not said:
                sys.stderr.write(
                    f"envlock: waiting for another envlock{holder} writing {self.folder}\n"
                )
                said = True
            time.sleep(0.02)
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the only descriptor releases the flock
            self.fd = None


def _holder(fd: int) -> str:
    with contextlib.suppress(OSError, ValueError):
        pid = int(os.pread(fd, 32, 0).decode().strip())
        return f" (pid {pid})"
    return ""
