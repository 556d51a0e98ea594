"""``envlock ci lock``: one bundle per cell, several at once, all-or-nothing per cell.

Each cell is ``envlock.bundle.folder.lock_folder`` (what ``envlock lock`` calls)
with the cell's resolution and a ``LockRequest`` made from the template the
command line gave, the output folder being ``DIR/<cell-id>``: the same
bundle ``envlock lock <cell spec> -o DIR/<cell-id>`` writes (with ``--python X``
and ``--cuda-source Y`` where the command line listed them), through the same
atomic, manifest-backed write. Cells run in a thread pool (the resolver is a
child process, so threads overlap the waits); a cell that fails is recorded
with its reason and the others go on. When all are done, ``DIR/cells.json``
(every cell, its status and lock digest, and the input the cells were
expanded from) and ``DIR/docker-bake.json`` (the cells that locked) are
written atomically.

``check_cells`` is ``ci lock --check DIR``: the cells expanded again from the
input cells.json records (with its ``--exclude-newer`` instant, so the same
files are candidates) must be the cells DIR holds, and each cell's bundle must
be what ``envlock lock --check`` finds current (``envlock.bundle.check``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypedDict

from envlock.bundle.folder import LockedFolder, LockRequest, lock_folder
from envlock.ci.cells import Cell, CellDict
from envlock.ci.formats import bake_file
from envlock.errors import EnvlockError
from envlock.fsutil import atomic_write
from envlock.model import Resolution

CELLS_JSON = "cells.json"
BAKE_JSON = "docker-bake.json"
SCHEMA_VERSION = 1

Progress = Callable[[str], None]
LockOne = Callable[[LockRequest, Any, Any], LockedFolder]


class CellRow(CellDict):
    """One row of cells.json's ``cells``: the cell and how its lock went."""

    status: str  # locked | failed
    folder: str
    lock_digest: str | None  # "sha256:<hex of pylock.toml>" when locked
    packages: int
    seconds: float


class FailedCellRow(CellRow):
    error: str  # why the cell failed


# cells.json's ``input`` (``with`` is a Python keyword: the functional form)
CellsInputDict = TypedDict(
    "CellsInputDict",
    {
        "spec": str,
        "python": str,
        "cuda_source": str,
        "repo": str,
        "exclude_newer": str,
        "pre": bool,
        "with": list[str],
        "indexes": list[str],
        "routes": list[str],
    },
    total=False,
)


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

    def to_dict(self) -> CellRow:
        row: CellRow = {
            **self.cell.to_dict(),
            "status": "locked" if self.ok else "failed",
            "folder": str(self.folder),
            "lock_digest": self.digest,
            "packages": self.packages,
            "seconds": round(self.seconds, 3),
        }
        if self.error is not None:
            failed: FailedCellRow = {**row, "error": self.error}
            return failed
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


@dataclass(frozen=True)
class CellsInput:
    """What the cells were expanded from (``ci lock``'s flags), recorded in cells.json."""

    spec: str
    python: str | None = None  # --python as given ("3.10,3.11", "all")
    cuda_source: str | None = None  # --cuda-source as given ("system,pip")
    pre: bool = False
    repo: str | None = None
    exclude_newer: str | None = None  # a UTC instant (envlock.instant)
    with_requirements: tuple[str, ...] = ()  # --with lines
    # --index NAME=URL (URL without user and password: envlock.door.redact) and --route
    # MATCH=NAME, as given to every cell's lock
    indexes: tuple[str, ...] = ()
    routes: tuple[str, ...] = ()

    def to_dict(self) -> CellsInputDict:
        out: CellsInputDict = {"spec": self.spec}
        if self.python is not None:
            out["python"] = self.python
        if self.cuda_source is not None:
            out["cuda_source"] = self.cuda_source
        if self.repo is not None:
            out["repo"] = self.repo
        if self.exclude_newer is not None:
            out["exclude_newer"] = self.exclude_newer
        if self.pre:
            out["pre"] = True
        if self.with_requirements:
            out["with"] = list(self.with_requirements)
        if self.indexes:
            out["indexes"] = list(self.indexes)
        if self.routes:
            out["routes"] = list(self.routes)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, object], where: str) -> CellsInput:
        """``data``: cells.json's ``input`` as read (unchecked JSON); DataError if unusable."""
        from envlock.errors import DataError

        def text(key: str) -> str | None:
            value = data.get(key)
            if value is None or isinstance(value, str):
                return value
            raise DataError(f"{where}.{key}: {value!r} is not a string", hint=_RELOCK)

        def lines(key: str, what: str) -> tuple[str, ...]:
            value = data.get(key, [])
            if not isinstance(value, list) or not all(isinstance(w, str) for w in value):
                raise DataError(f"{where}.{key}: not a list of {what}", hint=_RELOCK)
            return tuple(value)

        extra = lines("with", "requirement lines")
        indexes = lines("indexes", "NAME=URL strings")
        routes = lines("routes", "MATCH=NAME strings")
        if indexes or routes:  # the same rules as --index/--route on the command line
            from envlock.index import routing

            try:
                routing.parse(list(indexes), list(routes))
            except EnvlockError as e:
                raise DataError(f"{where}: {e.message}", hint=_RELOCK) from None
        spec = text("spec")
        if not spec:
            raise DataError(f"{where}.spec: missing", hint=_RELOCK)
        return cls(
            spec=spec,
            python=text("python"),
            cuda_source=text("cuda_source"),
            pre=data.get("pre") is True,
            repo=text("repo"),
            exclude_newer=text("exclude_newer"),
            with_requirements=extra,
            indexes=indexes,
            routes=routes,
        )

    def command(self, output: str) -> str:
        """The ``envlock ci lock`` that writes these cells again."""
        import shlex

        words = ["envlock", "ci", "lock", self.spec]
        for flag, value in (
            ("--python", self.python),
            ("--cuda-source", self.cuda_source),
            ("--repo", self.repo),
            ("--exclude-newer", self.exclude_newer),
        ):
            if value is not None:
                words += [flag, value]
        if self.pre:
            words.append("--pre")
        for line in self.with_requirements:
            words += ["--with", line]
        for index in self.indexes:
            words += ["--index", index]
        for route in self.routes:
            words += ["--route", route]
        return shlex.join([*words, "-o", output, "--force"])


_RELOCK = "write the cells again with `envlock ci lock SPEC -o DIR --force`"


def write_index(
    output: Path,
    spec: str | CellsInput,
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
    recorded = spec if isinstance(spec, CellsInput) else CellsInput(spec)
    document = {
        "schema_version": SCHEMA_VERSION,
        "spec": recorded.spec,
        "input": recorded.to_dict(),
        "cells": [r.to_dict() for r in results],
    }
    cells_path, bake_path = output / CELLS_JSON, output / BAKE_JSON
    atomic_write(cells_path, json.dumps(document, indent=2) + "\n")
    atomic_write(bake_path, json.dumps(bake, indent=2) + "\n")
    return cells_path, bake_path


# ---------------------------------------------------------------- ci lock --check


class CellCheckDict(TypedDict):
    id: str
    state: str
    changes: list[str]


@dataclass(frozen=True)
class CellCheck:
    id: str
    state: str  # current, changed, new, gone, failed
    changes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.state == "current"

    def to_dict(self) -> CellCheckDict:
        return {"id": self.id, "state": self.state, "changes": list(self.changes)}


def read_index(folder: Path) -> tuple[CellsInput, list[Mapping[str, object]]]:
    """DIR/cells.json: the recorded input and the cell rows (each checked for a string
    ``id`` only: JSON as read); UsageError/DataError if unusable."""
    from envlock.errors import DataError, UsageError

    path = folder / CELLS_JSON
    try:
        from envlock.readers import MAX_JSON_BYTES, read_bytes

        if not path.exists():
            raise FileNotFoundError(path)
        data = json.loads(read_bytes(path, limit=MAX_JSON_BYTES, error=DataError))
    except FileNotFoundError as e:
        raise UsageError(
            f"{path}: no such file; {folder} is not a folder `envlock ci lock` wrote",
            hint="envlock ci lock SPEC -o DIR writes it",
        ) from e
    except (OSError, ValueError) as e:
        raise DataError(f"{path}: unreadable: {e}", hint=_RELOCK) from e
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
        raise DataError(f"{path}: not a cells.json of schema {SCHEMA_VERSION}", hint=_RELOCK)
    recorded = data.get("input") or {"spec": data.get("spec")}
    if not isinstance(recorded, dict):
        raise DataError(f"{path}: input: not a table", hint=_RELOCK)
    rows = data.get("cells")
    if not isinstance(rows, list) or not all(
        isinstance(r, dict) and isinstance(r.get("id"), str) for r in rows
    ):
        raise DataError(f"{path}: cells: not a list of cells with ids", hint=_RELOCK)
    return CellsInput.from_dict(recorded, f"{path}: input"), rows


def check_cells(
    folder: Path,
    cells: Sequence[Cell],
    rows: Sequence[Mapping[str, object]],
    *,
    index_url: str | None = None,
    offline: bool = False,
    jobs: int = 4,
    progress: Progress | None = None,
) -> list[CellCheck]:
    """Each cell of ``cells`` (expanded again now) against DIR: new, gone, changed, current.

    A locked cell's folder is checked as ``envlock lock --check`` checks it,
    ``jobs`` at once; a cell the recorded run failed to lock is checked too
    (it is not current: locking it now would add it)."""
    from envlock.bundle.check import CheckRequest, check_folder

    recorded = {str(r["id"]): r for r in rows}
    locked = {i for i, r in recorded.items() if r.get("status") == "locked"}
    now = {c.id for c in cells}
    lock = threading.Lock()

    def say(message: str) -> None:
        if progress is not None:
            with lock:
                progress(message)

    def one(cell_id_: str) -> CellCheck:
        if cell_id_ not in locked:
            row = recorded.get(cell_id_)
            why = (
                f"its lock failed when {folder} was written: {str(row.get('error', ''))[:120]}"
                if row is not None
                else f"not in {folder}"
            )
            return CellCheck(cell_id_, "new", (f"+ {cell_id_} ({why})",))
        try:
            result = check_folder(
                CheckRequest(folder / cell_id_, index_url=index_url, offline=offline)
            )
        except EnvlockError as e:
            check = CellCheck(cell_id_, "failed", (_reason(e),))
        else:
            check = CellCheck(
                cell_id_, "current" if result.ok else "changed", tuple(result.changes)
            )
        say(f"ci lock --check: {cell_id_}: {check.state}")
        return check

    order = [c.id for c in cells]
    with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(order) or 1))) as pool:
        checks = list(pool.map(one, order))
    for gone in sorted(locked - now):
        checks.append(CellCheck(gone, "gone", (f"- {gone} (SPEC no longer gives it)",)))
    return checks
