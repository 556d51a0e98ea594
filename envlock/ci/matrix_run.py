"""``envlock ci matrix`` as one call: ``list_cells(MatrixRequest)``: the cells SPEC
expands to (``envlock.ci.cells.expand``), or those a ``ci lock`` folder holds
(``from_dir``), laid out as --format asks (github: one line; bake, json: JSON)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from envlock.errors import UsageError
from envlock.output import Printed


@dataclass(frozen=True)
class MatrixRequest:
    """``envlock ci matrix``'s flags as typed values."""

    spec: str | None = None
    python: str | None = None
    cuda_source: str | None = None
    pre: bool = False
    repo: str | None = None
    from_dir: str | None = None
    format: str = "json"


def list_cells(args: MatrixRequest) -> Printed:
    """The cells; ``envlock.output.finish`` prints ``doc`` as JSON for bake and json,
    ``body`` (one line) for github."""
    from envlock.ci.formats import bake_file, cell_list, github_matrix
    from envlock.ci.lock_run import expand_cells

    if args.from_dir is not None:
        return _matrix_from(args)
    if not args.spec:
        raise UsageError("give SPEC", hint="e.g. envlock ci matrix 'tensorflow>=2.14,<2.17'")
    cells = expand_cells(args.spec, args.python, args.cuda_source, args.repo, args.pre).cells
    if args.format == "github":
        return Printed(None, github_matrix(cells) + "\n")
    return Printed(bake_file(cells) if args.format == "bake" else cell_list(cells))


def _matrix_from(args: MatrixRequest) -> Printed:
    """``ci matrix --from DIR``: the cells DIR holds, as the matrix of the workflow's jobs."""
    from envlock.ci.cells import BUILD_CELL_FIELDS
    from envlock.ci.lockcells import read_index

    assert args.from_dir is not None
    if args.spec or args.python or args.cuda_source or args.pre or args.repo:
        raise UsageError(
            "--from DIR lists the cells DIR holds; SPEC and the cell flags are not used",
            hint=f"envlock ci matrix --from {args.from_dir}",
        )
    if args.format == "bake":
        raise UsageError(
            "--from DIR: DIR already holds docker-bake.json",
            hint="--format github or --format json",
        )
    folder = Path(args.from_dir)
    _, rows = read_index(folder)
    cells = [
        {k: row[k] for k in BUILD_CELL_FIELDS if k in row}
        for row in rows
        if row.get("status") == "locked" and (folder / str(row["id"])).is_dir()
    ]
    if not cells:
        raise UsageError(f"{folder}: no locked cells", hint="envlock ci lock SPEC -o DIR")
    if args.format == "github":
        return Printed(None, json.dumps({"include": cells}, separators=(",", ":")) + "\n")
    return Printed(cells)
