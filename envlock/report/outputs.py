"""Outputs never overwrite the key a run signs with, nor any input of the run.

``report sign -o``, ``smoke --sign -o`` and ``keygen -o`` compare the output
path with every input by its resolved path (symbolic links and ``..``
followed) and, where both exist, by device and inode (a hard link), and refuse
a clash with exit 2 naming both.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from envlock.errors import UsageError


def same_file(a: Path, b: Path) -> bool:
    """True when writing ``a`` would replace or change ``b``."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def refuse_clobber(
    output: Path, inputs: Iterable[tuple[str, Path]], *, flag: str = "-o", hint: str
) -> None:
    """Exit 2 when ``output`` is one of ``inputs`` ((what, path) pairs)."""
    for what, path in inputs:
        if same_file(output, path):
            raise UsageError(
                f"{flag} {output} is {what} {path}; it would be overwritten", hint=hint
            )
