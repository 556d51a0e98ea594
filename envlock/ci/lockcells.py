"""``envlock ci lock``: one bundle per cell, several at once, all-or-nothing per cell.

Each cell is ``envlock.bundle.folder.lock_folder`` (what ``envlock lock`` calls)
with the cell's resolution and a ``LockRequest`` made from the template the
command line gave, the output folder being ``DIR/<cell-id>``: the same
bundle ``envlock lock <cell spec> -o DIR/<cell-id>`` writes (with ``--python X``
and ``--cuda-source Y`` where the command line listed them), through the same
atomic, manifest-backed write. Cells run in a thread pool (the resolver is a
child process, so threads overlap the waits); a cell that fails is recorded
with its reason and the others go on. When all are done, ``DIR/cells.json``
(every cell, its status and lock digest) and ``DIR/docker-bake.json`` (the
cells that locked) are written atomically.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from envlock.bundle.folder import LockedFolder, LockRequest, lock_folder
from envlock.ci.cells import Cell
from envlock.ci.formats import bake_file
from envlock.errors import EnvlockError
from envlock.fsutil import atomic_write
from envlock.model import Resolution

CELLS_JSON = "cells.json"
BAKE_JSON = "docker-bake.json"
SCHEMA_VERSION = 1

Progress = Callable[[str], None]
LockOne = Callable[[LockRequest, Any, Any], LockedFolder]


@dataclass(frozen=True)
class CellResult:
    cell: Cell
    folder: Path
    seconds: float
    digest: str | None = None  # "sha256:<hex of pylock.toml>" when locked
    packages: int = 0
    error: str | None = None  # why the cell failed

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        row = self.cell.to_dict()
        row["status"] = "locked" if self.ok else "failed"
        row["folder"] = str(self.folder)
        row["lock_digest"] = self.digest
        row["packages"] = self.packages
        row["seconds"] = round(self.seconds, 3)
        if self.error is not None:
            row["error"] = self.error
        return row


def _reason(error: BaseException) -> str:
    if isinstance(error, EnvlockError):
        return error.message + (f" (hint: {error.hint})" if error.hint else "")
    return f"{type(error).__name__}: {error}"


def lock_cells(
    cells: Sequence[Cell],
    output: Path,
    template: LockRequest,
    *,
    jobs: int = 4,
    progress: Progress | None = None,
    lock_one: LockOne = lock_folder,
) -> list[CellResult]:
    """Lock every cell into ``output/<cell-id>`` (``jobs`` at once); results in cell order.

    ``template`` holds the options every cell shares (index, resolver, --with,
    render options, --force); its constraints and output are the cell's."""
    lock = threading.Lock()
    done = [0]

    def say(message: str) -> None:
        if progress is not None:
            with lock:
                progress(message)

    def one(cell: Cell) -> CellResult:
        folder = output / cell.id
        request = replace(template, constraints=cell.asked, output=folder)
        start = time.perf_counter()
        try:
            written = lock_one(request, cell.resolution, None)
        except Exception as e:  # noqa: BLE001 - one cell's failure must not stop the others
            result = CellResult(cell, folder, time.perf_counter() - start, error=_reason(e))
        else:
            result = CellResult(
                cell,
                folder,
                time.perf_counter() - start,
                digest=f"sha256:{written.digest}",
                packages=len(written.lock.packages),
            )
        with lock:
            done[0] += 1
            count = done[0]
        state = f"locked {result.packages} packages" if result.ok else f"FAILED: {result.error}"
        say(f"ci lock: [{count}/{len(cells)}] {cell.id}: {state} ({result.seconds:.1f} s)")
        return result

    say(f"ci lock: {len(cells)} cells into {output}, {max(1, jobs)} at once")
    with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(cells) or 1))) as pool:
        return list(pool.map(one, cells))


def _rebased(resolution: Resolution, base_image: str) -> Resolution:
    return replace(resolution, base_image=base_image, base_image_digest=None)


def write_index(
    output: Path,
    spec: str,
    results: Sequence[CellResult],
    base_image: str | None = None,
) -> tuple[Path, Path]:
    """DIR/cells.json (every cell) and DIR/docker-bake.json (the locked ones), atomically.

    ``base_image``: the ``--base-image`` the bundles were rendered with, if any
    (the bake file's BASE_IMAGE then names it, as the Dockerfiles do)."""
    locked = [r for r in results if r.ok]
    digests = {r.cell.id: r.digest for r in locked if r.digest}
    cells = [r.cell for r in locked]
    if base_image:
        cells = [
            replace(
                c, resolution=replace(c.resolution, base_image=base_image, base_image_digest=None)
            )
            for c in cells
        ]
    bake = bake_file(cells, digests)
    document = {
        "schema_version": SCHEMA_VERSION,
        "spec": spec,
        "cells": [r.to_dict() for r in results],
    }
    cells_path, bake_path = output / CELLS_JSON, output / BAKE_JSON
    atomic_write(cells_path, json.dumps(document, indent=2) + "\n")
    atomic_write(bake_path, json.dumps(bake, indent=2) + "\n")
    return cells_path, bake_path
