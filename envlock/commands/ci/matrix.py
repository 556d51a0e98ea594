"""``envlock ci matrix``: flags, the call into ``envlock.ci``, printing.

``ci matrix SPEC`` lists the cells (``envlock.ci.cells.expand``) as a GitHub
Actions matrix, a docker-bake.json or a JSON list; ``--from DIR`` the cells a
``ci lock`` folder holds. The cell flags and their expansion are ``ci lock``'s
too (``envlock.commands.options``: ``add_cell_arguments``, ``cells_from_args``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from envlock.commands.options import CELL_SPEC_HELP, add_cell_arguments, cells_from_args
from envlock.errors import UsageError


def register(ci_sub: Any) -> None:
    m = ci_sub.add_parser(
        "matrix",
        help="expand a version range into cells (release x Python x CUDA source or build)",
        description="The newest patch of each TensorFlow minor SPEC admits, times the Pythons "
        "and CUDA sources asked for; each cell is what `envlock lock <cell spec> --python X "
        "--cuda-source Y` resolves. Cell ids: tf<version>-py<python>-cuda<cuda>, with -pip "
        "for the pip CUDA source. torch and jax: each CUDA build of each minor (its newest "
        "patch) times the Pythons, as `envlock lock 'torch==X' --cuda Y.Z` or "
        "`envlock lock 'jax[cudaNN]==X'` resolves it; ids torch<version>-py<python>-cu<XYZ>, "
        "jax<version>-py<python>-cuda<NN>; a build only PyTorch's own index has is a cell "
        'marked "index": "pytorch". Exit 2 when SPEC admits nothing or a combination asked '
        "for does not exist.",
    )
    add_cell_arguments(m, CELL_SPEC_HELP + "; not with --from")
    m.add_argument(
        "--from",
        dest="from_dir",
        metavar="DIR",
        help="list the cells a `ci lock -o DIR` folder holds (the locked ones, from "
        "DIR/cells.json) instead of expanding SPEC",
    )
    m.add_argument(
        "--format",
        choices=("github", "bake", "json"),
        default="json",
        help='github: {"include": [...]} on one line for strategy.matrix; bake: a '
        "docker-bake.json for the folder `ci lock -o DIR` fills (contexts <cell-id>, "
        "relative to it: save it as DIR/docker-bake.json, then cd DIR && docker buildx bake); "
        "json: a list (default)",
    )
    m.set_defaults(func=run_matrix)


def run_matrix(args: argparse.Namespace) -> int:
    from envlock.ci.formats import bake_file, cell_list, github_matrix
    from envlock.output import emit_json

    if args.from_dir is not None:
        return _matrix_from(args)
    cells = cells_from_args(args).cells
    if args.format == "github":
        sys.stdout.write(github_matrix(cells) + "\n")
    elif args.format == "bake":
        emit_json(bake_file(cells))
    else:
        emit_json(cell_list(cells))
    return 0


def _matrix_from(args: argparse.Namespace) -> int:
    """``ci matrix --from DIR``: the cells DIR holds, as the matrix of the workflow's jobs."""
    import json

    from envlock.ci.cells import BUILD_CELL_FIELDS
    from envlock.ci.lockcells import read_index
    from envlock.output import emit_json

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
        sys.stdout.write(json.dumps({"include": cells}, separators=(",", ":")) + "\n")
    else:
        emit_json(cells)
    return 0
