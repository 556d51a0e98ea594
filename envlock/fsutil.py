"""Atomic file output: a failed run leaves earlier outputs as they were.

Also ``read_input``: reading a file the user named, with exit-2 messages.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from envlock.errors import EnvironmentFailure, UsageError
from envlock.readers import read_capped


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


MAX_INPUT_BYTES = 64 * 1024 * 1024  # no report, key, result or summary is near this


def read_input(
    path: str | Path,
    what: str,
    *,
    hint: str,
    kind: str = "file",
    stdin: bool = False,
    limit: int = MAX_INPUT_BYTES,
) -> bytes:
    """The bytes of the file the user named as ``what`` ('-' is stdin when ``stdin``),
    at most ``limit`` of them.

    A missing file, a folder, something that is not a regular file (a FIFO, a
    device: opened without blocking, never read), a file over ``limit`` or an
    unreadable file is a UsageError (exit 2) naming ``what`` and the path;
    ``hint`` goes with the missing file, ``kind`` says what was expected instead
    of a folder ("file", "PEM file").
    """
    if stdin and str(path) == "-":
        data = read_capped(sys.stdin.buffer, limit)
        if len(data) > limit:
            raise UsageError(f"{what} on stdin: more than the {limit} bytes allowed", hint=hint)
        return data
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError as e:
        raise UsageError(f"{what} {path} does not exist", hint=hint) from e
    except IsADirectoryError as e:
        raise UsageError(f"{what} {path} is a folder, not a {kind}") from e
    except OSError as e:
        raise UsageError(f"cannot read {what} {path}: {e.strerror or e}") from e
    except ValueError as e:  # a NUL byte in the path
        raise UsageError(f"{what} {path!r} is not a valid path", hint=hint) from e
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise UsageError(f"{what} {path} is a folder, not a {kind}")
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(
                f"{what} {path} is not a regular file (a FIFO, a device or a socket)", hint=hint
            )
        if info.st_size > limit:
            raise UsageError(
                f"{what} {path}: {info.st_size} bytes, more than the {limit} allowed", hint=hint
            )
        with os.fdopen(os.dup(fd), "rb") as f:
            data = read_capped(f, limit)
    except OSError as e:
        raise UsageError(f"cannot read {what} {path}: {e.strerror or e}") from e
    finally:
        os.close(fd)
    if len(data) > limit:
        raise UsageError(f"{what} {path}: more than the {limit} bytes allowed", hint=hint)
    return data


def _temp_for(path: Path, data: bytes, mode: int | None) -> Path:
    # the suffix envlock.bundle.manifest knows: a killed run's leftovers are removed there
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".envlock-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return Path(tmp)


def atomic_write(path: Path, data: bytes | str, mode: int | None = None) -> None:
    """Write ``path`` through a temp file in the same folder and a rename.

    A symbolic link stays a link: the file it points to is replaced. A target
    that is not a regular file (``-o /dev/stdout``, a pipe, a terminal) is
    written into as a stream; a folder is refused (exit 2).
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        st = os.stat(path)  # through links: /dev/stdout -> /proc/self/fd/1 -> a pipe
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise EnvironmentFailure(f"cannot write to {path}: {e.strerror or e}") from e
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{path} is a folder, not a file", hint="give a file name to write")
    if st is not None and not stat.S_ISREG(st.st_mode):
        try:
            with open(path, "wb") as stream:
                stream.write(raw)
        except OSError as e:
            raise EnvironmentFailure(f"cannot write to {path}: {e.strerror or e}") from e
        return
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    write_files(path.parent, {path.name: raw}, modes={path.name: mode} if mode else None)


def write_files(
    directory: Path,
    files: Mapping[str, bytes | str],
    modes: Mapping[str, int | None] | None = None,
) -> None:
    """Write several files into ``directory`` as one step.

    Every file is first written to a temp file beside its target; only when all
    of them are on disk are they renamed into place. A failure before that point
    removes the temp files and leaves the folder as it was.
    """
    modes = modes or {}
    temps: list[tuple[Path, Path]] = []
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for rel, data in files.items():
            target = directory / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            raw = data.encode("utf-8") if isinstance(data, str) else data
            temps.append((_temp_for(target, raw, modes.get(rel)), target))
        for tmp, target in temps:
            os.replace(tmp, target)
    except OSError as e:
        for tmp, _ in temps:
            with contextlib.suppress(OSError):
                tmp.unlink()
        raise EnvironmentFailure(
            f"cannot write to {directory}: {e.strerror or e}",
            hint="check that the folder is writable and the disk is not full",
        ) from e
