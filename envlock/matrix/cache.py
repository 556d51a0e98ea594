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

The stamp is built from public inputs only, so it says whether a cache is
current, not who wrote it: anyone who can write the file could also compute
it. A cache is therefore believed only under a MAC (keyed BLAKE2b, 256 bits)
keyed by a per-user secret, ``cache-key`` in the same folder: 32 random bytes, created
with ``O_EXCL`` and mode 0600, read with ``O_NOFOLLOW`` and used only while
it is a regular file of this user that nobody else may read. A cache without
a valid MAC (a forgery, a damaged or truncated file, one written under
another key) is ignored and rewritten; its bytes reach ``marshal`` only after
the MAC matched. Without a usable key no cache is read or written. The cache
file is read only when it is a regular file of at most ``MAX_CACHE_BYTES``,
and replaced by a rename (a link planted at its name is replaced, never
written through).
"""

from __future__ import annotations

import dataclasses
import marshal
import os
import stat
import sys
import zlib
from typing import Any

from packaging.version import Version

# keyed BLAKE2b is a MAC by design (RFC 7693); hashlib.blake2b and hmac both
# load OpenSSL (~5-7 ms of every start-up here), the built-in module does not
try:
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - a Python without the built-in module
    from hashlib import blake2b
from _operator import _compare_digest as compare_digest  # what hmac.compare_digest is

import envlock
from envlock.matrix import Matrix, TFMatrix, TFRelease, load
from envlock.matrix.cuda import CudaMatrix, CudaRelease, DriverBranch, ImageRelease, UbuntuRelease
from envlock.matrix.gpus import GpuMatrix, GpuModel, GpuName
from envlock.userstate import secret_key

MATRIX_FILES = ("tensorflow.toml", "cuda.toml", "gpus.toml")
KEY_NAME = "cache-key"
MAC_BYTES = 32  # keyed BLAKE2b-256, ahead of the marshal data
MAX_CACHE_BYTES = 16 * 1024 * 1024  # a bigger file is not ours (today's: ~180 KB)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
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
    """The package's data/matrices/ folder as a plain path (what
    ``envlock.resources`` reads, found without importing importlib.resources);
    None when it is not a plain folder (a zipped install)."""
    here = os.path.dirname(os.path.abspath(envlock.__file__))
    folder = os.path.join(here, "data", "matrices")
    return folder if os.path.isdir(folder) else None


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


def cache_key(folder: str) -> bytes | None:
    """The per-user secret the cache is signed with: ``folder/cache-key``,
    created (``O_EXCL``, mode 0600) when absent. None when it cannot be made or
    read, or is not this user's private regular file (a link, another owner,
    readable by others): then no cache is trusted (``envlock.userstate.secret_key``)."""
    return secret_key(folder, KEY_NAME)


def _mac(key: bytes, body: bytes) -> bytes:
    return blake2b(body, key=key, digest_size=MAC_BYTES, person=b"envlock-matrix").digest()


def _read_cache(path: str) -> bytes:
    """The cache file's bytes, if it is a regular file of a plausible size ("" else)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _CLOEXEC)  # a FIFO must not block
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_CACHE_BYTES:
            return b""
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read(MAX_CACHE_BYTES + 1)
    finally:
        os.close(fd)


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
    folder = cache_dir()
    key = cache_key(folder)
    if key is None:
        return load()  # no secret of our own: no cache is believed, none written
    name = f"matrix-{zlib.crc32(where):08x}.marshal"
    try:
        data = _read_cache(os.path.join(folder, name))
        body = data[MAC_BYTES:]
        if len(data) > MAC_BYTES and compare_digest(data[:MAC_BYTES], _mac(key, body)):
            cached_stamp, cached_plain = marshal.loads(body)
            if cached_stamp == stamp:
                cached = from_plain(cached_plain)
                if isinstance(cached, Matrix):
                    return cached
    except Exception:  # noqa: BLE001 - missing, unreadable, stale, damaged: parse again
        pass
    loaded = load()
    try:
        from pathlib import Path

        from envlock.fsutil import write_files

        plain: Any = to_plain(loaded)
        body = marshal.dumps((stamp, plain))
        # write_files renames into place: a link at the name is replaced, not followed
        write_files(Path(folder), {name: _mac(key, body) + body}, modes={name: 0o600})
    except Exception:  # noqa: BLE001 - a read-only home must not break resolve
        pass
    return loaded
