"""The validated matrices, kept in a per-user cache between runs.

Parsing and validating the three TOML files costs more than starting Python
(tomllib is pure Python; ~100 ms here), so ``load_matrix`` keeps the validated
``Matrix`` in ``cache_dir()`` as ``marshal`` data (built into the interpreter),
together with a stamp: the Python version and the exact bytes of the three
matrix files and of the modules that parse them and lay out the cache. The
cache is used only when its stamp equals the current one byte for byte, so any
change to a matrix file or a parser misses it. One file per installation
(named by a checksum of its paths and the Python version), rewritten when the
stamp changes. A cache that cannot be read or written is ignored: the result
is the same. The folder is the user's own (mode 0700), as for pip's and uv's
caches.
"""

from __future__ import annotations

import dataclasses
import marshal
import os
import sys
import zlib
from typing import Any

from packaging.version import Version

import envlock
from envlock.matrix import Matrix, TFMatrix, TFRelease, load
from envlock.matrix.cuda import CudaMatrix, CudaRelease, DriverBranch, ImageRelease, UbuntuRelease
from envlock.matrix.gpus import GpuMatrix, GpuModel, GpuName

MATRIX_FILES = ("tensorflow.toml", "cuda.toml", "gpus.toml")
# the modules whose code decides what a cached Matrix holds
PARSER_FILES = ("__init__.py", "tensorflow.py", "cuda.py", "gpus.py", "cache.py")

# every class a cached Matrix is made of, by name
CLASSES: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        Matrix,
        TFMatrix,
        TFRelease,
        CudaMatrix,
        CudaRelease,
        DriverBranch,
        ImageRelease,
        UbuntuRelease,
        GpuMatrix,
        GpuModel,
        GpuName,
    )
}


def cache_dir() -> str:
    """Where envlock keeps its per-user cache: $ENVLOCK_CACHE_DIR, else
    $XDG_CACHE_HOME/envlock, else ~/.cache/envlock."""
    explicit = os.environ.get("ENVLOCK_CACHE_DIR")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "envlock")


def matrix_folder() -> str | None:
    """The matrices/ folder as a plain path (inside the installed package, or
    beside it in a source checkout); None when it is not a plain folder (a
    zipped install)."""
    here = os.path.dirname(os.path.abspath(envlock.__file__))
    for folder in (os.path.join(here, "matrices"), os.path.join(os.path.dirname(here), "matrices")):
        if os.path.isdir(folder):
            return folder
    return None


def to_plain(obj: object) -> object:
    """A validated matrix as marshal-able data: text, numbers, booleans, None
    and tuples of those stay as they are; a ``Version`` is ["V", text]; a
    dataclass is ["D", class name, field values]; a tuple holding any of these
    is ["T", items]. Anything else is a TypeError (no cache then)."""
    if isinstance(obj, tuple):
        items = tuple(to_plain(item) for item in obj)
        return ["T", items] if any(isinstance(item, list) for item in items) else items
    if obj is None or isinstance(obj, (str, int, float)):
        return obj
    if isinstance(obj, Version):
        return ["V", str(obj)]
    name = type(obj).__name__
    if CLASSES.get(name) is not type(obj) or not dataclasses.is_dataclass(obj):
        raise TypeError(f"cannot cache a {name}")
    values = tuple(to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj))
    return ["D", name, values]


def from_plain(obj: object) -> object:
    """The inverse of ``to_plain``."""
    if type(obj) is not list:
        return obj
    tag = obj[0]
    if tag == "V":
        return Version(obj[1])
    if tag == "T":
        return tuple(from_plain(item) for item in obj[1])
    return CLASSES[obj[1]](*(from_plain(value) for value in obj[2]))


def load_matrix() -> Matrix:
    """``envlock.matrix.load()``, kept validated in the per-user cache."""
    matrices = matrix_folder()
    package = os.path.dirname(os.path.abspath(envlock.__file__))
    parsers = os.path.join(package, "matrix")
    where = f"{sys.version}|{matrices}|{package}".encode()  # marshal's format follows Python's
    parts = [where]
    try:
        if matrices is None:
            raise OSError("matrices/ is not a plain folder")
        for folder, names in ((matrices, MATRIX_FILES), (parsers, PARSER_FILES)):
            for name in names:
                with open(os.path.join(folder, name), "rb") as f:
                    parts.append(f.read())
    except OSError:
        return load()  # no cache; the loader names a missing file
    stamp = b"".join(b"%d:%s|" % (len(part), part) for part in parts)
    path = os.path.join(cache_dir(), f"matrix-{zlib.crc32(where):08x}.marshal")
    try:
        with open(path, "rb") as f:
            cached_stamp, cached_plain = marshal.loads(f.read())
        if cached_stamp == stamp:
            cached = from_plain(cached_plain)
            if isinstance(cached, Matrix):
                return cached
    except Exception:  # noqa: BLE001 - missing, unreadable, stale, damaged: parse again
        pass
    loaded = load()
    try:
        from pathlib import Path

        from envlock.fsutil import atomic_write

        plain: Any = to_plain(loaded)
        data = marshal.dumps((stamp, plain))
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        atomic_write(Path(path), data)
    except Exception:  # noqa: BLE001 - a read-only home must not break resolve
        pass
    return loaded
