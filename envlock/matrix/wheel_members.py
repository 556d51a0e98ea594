"""The two members ``matrix refresh`` reads from a remote wheel, by either reader.

- ``zipfile``: the standard ``zipfile.ZipFile`` over ``RangeFile``, a file
  object whose reads become HTTP range requests.
- ``wheelzip``: ``RemoteZip``, the hand-written reader that searches the
  central directory's bytes for the two names instead of decoding every entry.

Which one runs is ``DEFAULT_READER`` (the one-line switch), or the
``ENVLOCK_WHEEL_READER`` environment variable (``zipfile`` or ``wheelzip``),
which ``bench/refresh.py --reader`` sets to compare them. Both choose the same
members and fail the same way: a ``DataError`` naming the wheel.
"""

from __future__ import annotations

import os
import struct
import sys
import zlib
from dataclasses import dataclass

from envlock.errors import DataError, EnvlockError, UsageError
from envlock.matrix.rangefile import Fetch, RangeFile

READERS = ("wheelzip", "zipfile")
DEFAULT_READER = "wheelzip"
READER_ENV = "ENVLOCK_WHEEL_READER"

METADATA_SUFFIX = ".dist-info/METADATA"
BUILD_INFO_SUFFIX = "/python/platform/build_info.py"


@dataclass(frozen=True)
class WheelMembers:
    metadata: bytes
    build_info: bytes | None  # None when the wheel has no build_info.py
    build_info_path: str
    requests: int
    bytes_read: int


def reader() -> str:
    """The reader to use: ``ENVLOCK_WHEEL_READER`` if set, else ``DEFAULT_READER``."""
    name = os.environ.get(READER_ENV, "").strip() or DEFAULT_READER
    if name not in READERS:
        raise UsageError(
            f"{READER_ENV}={name} is not a wheel reader",
            hint=f"use one of: {', '.join(READERS)} (or leave it unset)",
        )
    return name


def read_members(fetch: Fetch, filename: str, which: str | None = None) -> WheelMembers:
    """METADATA (top-level ``*.dist-info/METADATA``) and build_info.py (the
    shortest path ending ``/python/platform/build_info.py``: ``tensorflow/``
    from 2.2 on, ``tensorflow_core/`` in 2.0 and 2.1) of one remote wheel."""
    if (which or reader()) == "zipfile":
        return _with_zipfile(fetch, filename)
    return _with_wheelzip(fetch, filename)


def _pick(names: list[str]) -> tuple[str | None, str | None]:
    metadata = sorted(n for n in names if n.endswith(METADATA_SUFFIX) and n.count("/") == 1)
    info = [n for n in names if n.endswith(BUILD_INFO_SUFFIX)]
    return (
        metadata[0] if metadata else None,
        min(info, key=lambda n: (n.count("/"), n)) if info else None,
    )


def _no_metadata(filename: str) -> DataError:
    return DataError(f"{filename}: no .dist-info/METADATA in the wheel")


def _with_zipfile(fetch: Fetch, filename: str) -> WheelMembers:
    import zipfile

    file = RangeFile(fetch, filename)
    member = ""  # the member being read, for the message
    try:
        # a wheel's names are UTF-8 (the wheel spec); the utf-8 codec also decodes
        # TensorFlow's 15-24k names about a quarter faster than zipfile's default cp437
        if sys.version_info >= (3, 11):
            zf = zipfile.ZipFile(file, metadata_encoding="utf-8")
        else:
            zf = zipfile.ZipFile(file)
        with zf:
            metadata, info = _pick(zf.namelist())
            if metadata is None:
                raise _no_metadata(filename)
            member = info or ""
            info_bytes = zf.read(info) if info else None
            member = metadata
            metadata_bytes = zf.read(metadata)
    except EnvlockError:
        raise
    except zlib.error as e:  # compressed data that does not inflate
        raise file.damaged(f"{member} does not inflate: {e}") from None
    except (
        zipfile.BadZipFile,  # a broken directory or header, a CRC mismatch
        zipfile.LargeZipFile,
        EOFError,  # compressed data cut short
        NotImplementedError,  # a compression method or zip version zipfile lacks
        RuntimeError,  # an encrypted member
        ValueError,  # a name that is not UTF-8, a bad date, ...
        OSError,  # a seek before the start
        struct.error,
    ) as e:
        where = f"{member}: " if member else ""
        raise file.damaged(f"{where}{e or type(e).__name__}") from None
    return WheelMembers(
        metadata=metadata_bytes,
        build_info=info_bytes,
        build_info_path=info or "",
        requests=file.requests,
        bytes_read=file.bytes_read,
    )


def _with_wheelzip(fetch: Fetch, filename: str) -> WheelMembers:
    from envlock.matrix.wheelzip import RemoteZip

    z = RemoteZip(fetch, filename)
    metadata = [m for m in z.find_suffix(METADATA_SUFFIX) if m.name.count("/") == 1]
    if not metadata:
        raise _no_metadata(filename)
    info = z.find_suffix(BUILD_INFO_SUFFIX)
    info.sort(key=lambda m: (m.name.count("/"), m.name))
    info_bytes = z.read(info[0]) if info else None
    return WheelMembers(
        metadata=z.read(metadata[0]),
        build_info=info_bytes,
        build_info_path=info[0].name if info else "",
        requests=z.requests,
        bytes_read=z.bytes_read,
    )
