"""The version matrices: load and validate ``matrices/*.toml``.

``load()`` reads the three files that ship with envlock (cached per process):
``tensorflow.toml`` (parsed by ``envlock.matrix.tensorflow``), ``cuda.toml``
and ``gpus.toml`` (parsed by ``envlock.matrix.cuda`` and ``envlock.matrix.gpus``,
imported only when loading). Every problem is a ``DataError`` that names the
file and the place inside it.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from envlock.errors import DataError
from envlock.matrix.cuda import CudaMatrix
from envlock.matrix.gpus import GpuMatrix
from envlock.matrix.tensorflow import TFMatrix, TFRelease

if TYPE_CHECKING:
    from pathlib import Path  # pathlib is imported where a file is read

# tomllib and hashlib are imported where a file is read: a resolve that finds the
# validated matrices in its cache (envlock.matrix.cache) needs this package's
# classes, not its readers.

__all__ = ["Matrix", "TFMatrix", "TFRelease", "load", "load_tensorflow", "read_toml"]

MATRIX_FOLDER = "matrices"


@dataclass(frozen=True)
class Matrix:
    """All matrix data, each part parsed by its own module."""

    tensorflow: TFMatrix
    cuda: CudaMatrix
    gpus: GpuMatrix

    @property
    def data_version(self) -> str:
        return self.tensorflow.data_version

    @property
    def digest(self) -> str:
        """sha256 hex of tensorflow.toml's bytes."""
        return self.tensorflow.digest


def display_name(name: str) -> str:
    return f"{MATRIX_FOLDER}/{name}"


def decode_toml(data: bytes, filename: str) -> dict[str, Any]:
    """Parse TOML bytes; a syntax error becomes a DataError naming the file."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.9/3.10
        import tomli as tomllib

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataError(
            f"{filename}: not UTF-8 text (byte {e.start})",
            hint="restore the file from the envlock release or regenerate it",
        ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise DataError(
            f"{filename}: not valid TOML: {e}",
            hint="restore the file from the envlock release or regenerate it",
        ) from None


def read_toml(name: str, path: Path | None = None) -> tuple[dict[str, Any], str, str]:
    """Read a matrix file: (document, sha256 hex of its bytes, name for messages).

    ``name`` is the file name inside the packaged ``matrices/`` folder; ``path``
    reads another file instead (``envlock matrix check FILE``).
    """
    import hashlib

    from envlock import resources

    shown = str(path) if path is not None else display_name(name)
    try:
        data = path.read_bytes() if path else resources.read_bytes(MATRIX_FOLDER, name)
    except FileNotFoundError:
        raise DataError(
            f"{shown}: file not found",
            hint="reinstall envlock, or regenerate the matrix with 'envlock matrix refresh'",
        ) from None
    except OSError as e:
        raise DataError(f"{shown}: cannot read: {e.strerror or e}") from None
    return decode_toml(data, shown), hashlib.sha256(data).hexdigest(), shown


def load_tensorflow(path: Path | None = None) -> TFMatrix:
    from envlock.matrix import tensorflow

    doc, digest, shown = read_toml("tensorflow.toml", path)
    return tensorflow.parse(doc, shown, digest=digest)


def load_cuda(path: Path | None = None) -> CudaMatrix:
    from envlock.matrix import cuda

    doc, _digest, shown = read_toml("cuda.toml", path)
    return cuda.parse(doc, shown)


def load_gpus(path: Path | None = None) -> GpuMatrix:
    from envlock.matrix import gpus

    doc, _digest, shown = read_toml("gpus.toml", path)
    return gpus.parse(doc, shown)


@functools.lru_cache(maxsize=1)
def load() -> Matrix:
    """The matrices shipped with envlock, validated; cached per process."""
    return Matrix(tensorflow=load_tensorflow(), cuda=load_cuda(), gpus=load_gpus())
