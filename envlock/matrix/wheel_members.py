"""The members ``matrix refresh`` reads from a remote wheel.

``*.dist-info/METADATA`` and ``python/platform/build_info.py`` always; the CUDA
configuration header (``include/third_party/gpus/cuda/cuda_config.h``) and the
cuDNN version header (``include/external/cuda_cudnn/include/cudnn_version.h``)
where the wheel ships them (every CUDA build since 2.1x; TensorFlow 2.22.0rc0
and later state their CUDA, cuDNN and compute capabilities only there).

The standard ``zipfile.ZipFile`` over ``RangeFile``, a file object whose reads
become HTTP range requests: the tail, the central directory, then each member's
local header and data. Every byte used is checked: the directory's structure,
and each member against the CRC-32 the directory states. A damaged, swapped or
truncated file is an ``EnvironmentFailure`` (exit 3) naming the wheel: the
input was right, the bytes served were not. Bytes a range read never fetches
cannot be checked without downloading the whole file; the sha256 the index
lists is what the matrix records, and an install checks it.
"""

from __future__ import annotations

import struct
import sys
import zipfile
import zlib
from dataclasses import dataclass, field

from envlock.errors import DataError, EnvlockError
from envlock.matrix.rangefile import Fetch, RangeFile
from envlock.readers import read_member

METADATA_SUFFIX = ".dist-info/METADATA"
BUILD_INFO_SUFFIX = "/python/platform/build_info.py"
# below the package folder (tensorflow/, tensorflow_core/), preferred first
CUDA_CONFIG_PATHS = (
    "include/third_party/gpus/cuda/cuda_config.h",
    "include/external/local_config_cuda/cuda/cuda/cuda_config.h",
)
CUDNN_VERSION_PATHS = (
    "include/external/cuda_cudnn/include/cudnn_version.h",
    "include/third_party/gpus/cudnn/include/cudnn_version.h",
)
HEADERS = {"cuda_config.h": CUDA_CONFIG_PATHS, "cudnn_version.h": CUDNN_VERSION_PATHS}


@dataclass(frozen=True)
class WheelMembers:
    metadata: bytes
    build_info: bytes | None  # None when the wheel has no build_info.py
    build_info_path: str
    requests: int
    bytes_read: int
    # "cuda_config.h" / "cudnn_version.h" -> (member path, bytes), for those the wheel has
    headers: dict[str, tuple[str, bytes]] = field(default_factory=dict)


def pick(names: list[str]) -> tuple[str | None, str | None]:
    """METADATA (top-level ``*.dist-info/METADATA``, the first by name) and
    build_info.py (the shortest path ending ``/python/platform/build_info.py``:
    ``tensorflow/`` from 2.2 on, ``tensorflow_core/`` in 2.0 and 2.1)."""
    metadata = sorted(n for n in names if n.endswith(METADATA_SUFFIX) and n.count("/") == 1)
    info = [n for n in names if n.endswith(BUILD_INFO_SUFFIX)]
    return (
        metadata[0] if metadata else None,
        min(info, key=lambda n: (n.count("/"), n)) if info else None,
    )


def pick_headers(names: list[str], build_info: str | None) -> dict[str, str]:
    """The headers ``HEADERS`` names, below the package folder build_info.py is in
    (``tensorflow/`` when the wheel has none): the first path of each that exists."""
    root = build_info[: -len(BUILD_INFO_SUFFIX)] if build_info else "tensorflow"
    present = set(names)
    out: dict[str, str] = {}
    for key, paths in HEADERS.items():
        for rel in paths:
            if f"{root}/{rel}" in present:
                out[key] = f"{root}/{rel}"
                break
    return out


def _member(zf: zipfile.ZipFile, name: str, filename: str) -> bytes:
    """One member, bounded by its declared and actual size (readers.read_member):
    a zip-bombed build_info.py is a DataError, never inflated whole."""
    return read_member(
        zf, name, filename, hint="the wheel is not one envlock can read", error=DataError
    )


@dataclass(frozen=True)
class WheelListing:
    """What ``read_listing`` read of a remote wheel: every member's name with its
    CRC-32 and size (the central directory), and the small members asked for."""

    files: dict[str, tuple[int, int]]  # name -> (CRC-32, size); folders left out
    members: dict[str, bytes]  # the asked-for members the wheel has
    requests: int
    bytes_read: int


MAX_NAMES = 200_000  # a wheel listing more members is refused (TensorFlow: about 24k)


def _open(file: RangeFile) -> zipfile.ZipFile:
    # a wheel's names are UTF-8 (the wheel spec); the utf-8 codec also decodes
    # TensorFlow's 15-24k names about a quarter faster than zipfile's default cp437
    if sys.version_info >= (3, 11):
        return zipfile.ZipFile(file, metadata_encoding="utf-8")
    return zipfile.ZipFile(file)


def _damaged(file: RangeFile, member: str, e: BaseException) -> EnvlockError:
    """The error of bytes that are not a readable wheel, naming the member being read."""
    if isinstance(e, zlib.error):  # compressed data that does not inflate
        return file.damaged(f"{member} does not inflate: {e}")
    if isinstance(e, zipfile.BadZipFile) and str(e).startswith("Bad CRC-32"):
        return file.damaged(f"{member} fails its CRC check (the bytes served are not the file's)")
    where = f"{member}: " if member else ""
    return file.damaged(f"{where}{e or type(e).__name__}")


_ZIP_ERRORS = (
    zlib.error,
    zipfile.BadZipFile,  # a broken directory or header, a CRC mismatch
    zipfile.LargeZipFile,
    EOFError,  # compressed data cut short
    NotImplementedError,  # a compression method or zip version zipfile lacks
    RuntimeError,  # an encrypted member
    ValueError,  # a name that is not UTF-8, a bad date, ...
    OSError,  # a seek before the start
    struct.error,
)


def read_listing(fetch: Fetch, filename: str, wanted: tuple[str, ...] = ()) -> WheelListing:
    """The member list of one remote wheel (its central directory, read by range
    requests), and the members of ``wanted`` it has, each bounded
    (``readers.read_member``). A wheel that is not a readable zip is an
    ``EnvironmentFailure`` naming it, as in ``read_members``."""
    file = RangeFile(fetch, filename)
    member = ""
    try:
        with _open(file) as zf:
            infos = zf.infolist()
            if len(infos) > MAX_NAMES:
                raise DataError(
                    f"{filename}: lists {len(infos)} members, more than the {MAX_NAMES} allowed",
                    hint="the wheel is not one envlock can read",
                )
            files = {i.filename: (i.CRC, i.file_size) for i in infos if not i.is_dir()}
            members: dict[str, bytes] = {}
            for name in wanted:
                if name in files:
                    member = name
                    members[name] = _member(zf, name, filename)
    except EnvlockError:
        raise
    except _ZIP_ERRORS as e:
        raise _damaged(file, member, e) from None
    return WheelListing(files, members, file.requests, file.bytes_read)


def read_members(fetch: Fetch, filename: str) -> WheelMembers:
    """METADATA and build_info.py (see ``pick``) of one remote wheel."""
    file = RangeFile(fetch, filename)
    member = ""  # the member being read, for the message
    try:
        with _open(file) as zf:
            names = zf.namelist()
            metadata, info = pick(names)
            if metadata is None:
                raise DataError(f"{filename}: no .dist-info/METADATA in the wheel")
            member = info or ""
            info_bytes = _member(zf, info, filename) if info else None
            headers: dict[str, tuple[str, bytes]] = {}
            for key, path in pick_headers(names, info).items():
                member = path
                headers[key] = (path, _member(zf, path, filename))
            member = metadata
            metadata_bytes = _member(zf, metadata, filename)
    except EnvlockError:
        raise
    except _ZIP_ERRORS as e:
        raise _damaged(file, member, e) from None
    return WheelMembers(
        metadata=metadata_bytes,
        build_info=info_bytes,
        build_info_path=info or "",
        requests=file.requests,
        bytes_read=file.bytes_read,
        headers=headers,
    )
