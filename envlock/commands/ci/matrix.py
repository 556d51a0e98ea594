"""``envlock ci matrix``: flags, the call into ``envlock.ci``, printing.

``ci matrix SPEC`` lists the cells (``envlock.ci.cells.expand``) as a GitHub
Actions matrix, a docker-bake.json or a JSON list; ``--from DIR`` the cells a
``ci lock`` folder holds. The cell flags and their expansion are ``ci lock``'s
too (``envlock.commands.options``: ``add_cell_arguments``, ``cells_from_args``).
"""

from __future__ import annotations

import argparse
from typing import Any

from envlock.commands.options import CELL_SPEC_HELP, add_cell_arguments
from envlock.output import finish


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
    from envlock.ci.matrix_run import MatrixRequest, list_cells

    request = MatrixRequest(
        spec=args.spec,
        python=args.python,
        cuda_source=args.cuda_source,
        pre=args.pre,
        repo=args.repo,
        from_dir=args.from_dir,
        format=args.format,
    )
    return finish(list_cells(request), args.format != "github")
