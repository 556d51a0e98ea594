"""Access to the data that ships inside the package (templates/, matrices/).

In a built wheel both folders live inside the ``envlock`` package (hatch
force-include maps them); in a source checkout or an editable install they are
the top-level folders of the repository. Read lazily, never at import time.
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path

if sys.version_info >= (3, 11):
    from importlib.resources.abc import Traversable
else:  # pragma: no cover - Python 3.9 and 3.10
    from importlib.abc import Traversable


def data_dir(name: str) -> Traversable:
    """Return the packaged folder ``name`` ("templates" or "matrices")."""
    packaged = resources.files("envlock") / name
    if packaged.is_dir():
        return packaged
    source = Path(__file__).resolve().parent.parent / name
    return source


def read_bytes(folder: str, filename: str) -> bytes:
    return (data_dir(folder) / filename).read_bytes()
