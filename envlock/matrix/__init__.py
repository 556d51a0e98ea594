"""The version matrices: load and validate ``envlock/data/matrices/*.toml``.

``load()`` reads the three files that ship with envlock (cached per process):
``tensorflow.toml`` (parsed by ``envlock.matrix.tensorflow``), ``cuda.toml``
and ``gpus.toml`` (parsed by ``envlock.matrix.cuda`` and ``envlock.matrix.gpus``,
imported only when loading). Every problem is a ``DataError`` that names the
file and the place inside it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from envlock.errors import DataError
from envlock.matrix.cuda import CudaMatrix
from envlock.matrix.gpus import GpuMatrix
from envlock.matrix.tensorflow import TFMatrix, TFRelease

if TYPE_CHECKING:
    from pathlib import Path  # pathlib is imported where a file is read

# envlock.readers (tomllib) and hashlib are imported where a file is read: a resolve that finds the
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


MATRIX_HINT = "restore the file from the envlock release or regenerate it"


def decode_toml(data: bytes, filename: str) -> dict[str, Any]:
    """Parse TOML bytes (strict UTF-8, ``envlock.readers``); any defect is a
    DataError naming the file."""
    from envlock import readers

    text = readers.decode_text(data, filename, hint=MATRIX_HINT, error=DataError)
    return readers.parse_toml(text, filename, hint=MATRIX_HINT, error=DataError)


def read_toml(name: str, path: Path | None = None) -> tuple[dict[str, Any], str, str]:
    """Read a matrix file: (document, sha256 hex of its bytes, name for messages).

    ``name`` is the file name inside the packaged ``envlock/data/matrices/``; ``path``
    reads another file instead (``envlock matrix check FILE``), through
    ``envlock.readers`` (a folder, a FIFO, an unreadable file: a DataError).
    """
    import hashlib

    from envlock import readers, resources

    shown = readers.shown(path) if path is not None else display_name(name)
    if path is not None:
        data = readers.read_bytes(path, hint="give the path of a matrix TOML file", error=DataError)
    else:
        try:
            data = resources.read_bytes(MATRIX_FOLDER, name)
        except FileNotFoundError:
            raise DataError(
                f"{shown}: no such file",
                hint="reinstall envlock, or regenerate the matrix with 'envlock matrix refresh'",
            ) from None
        except OSError as e:
            raise DataError(f"{shown}: cannot read it ({e.strerror or e})") from None
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
