"""``envlock ci matrix|lock|init``: flags, the call into ``envlock.ci``, printing.

``ci matrix SPEC`` lists the cells (``envlock.ci.cells.expand``) as a GitHub
Actions matrix, a docker-bake.json or a JSON list; ``ci lock SPEC -o DIR``
locks each cell into ``DIR/<cell-id>`` (``envlock.ci.lockcells``); ``ci
init`` writes the GitHub Actions workflow (``envlock.ci.workflow``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envlock.errors import UsageError

if TYPE_CHECKING:
    from envlock.ci.cells import Expansion

SPEC_HELP = "a requirement on tensorflow: 'tensorflow>=2.14,<2.17', 'tensorflow==2.15', ..."


def _cell_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", metavar="SPEC", help=SPEC_HELP)
    p.add_argument(
        "--python",
        metavar="X.Y,...|all",
        help="CPython minors per release, comma-separated, or 'all' (every minor the "
        "release has wheels for); default: what `envlock resolve` picks for the release",
    )
    p.add_argument(
        "--cuda-source",
        metavar="system,pip",
        help="CUDA sources per release, comma-separated; default: what `envlock resolve` "
        "picks for the release",
    )
    p.add_argument(
        "--pre",
        action="store_true",
        help="consider pre-releases (release candidates) too, as `envlock resolve --pre`; "
        "a SPEC naming one admits them without it",
    )
    p.add_argument(
        "--repo",
        metavar="REPO",
        help="image repository of the cells' tags (REPO:<cell-id>), with its registry host, "
        "e.g. ghcr.io/OWNER/tf; default envlock-ci, a local name (the bake file then loads "
        "images into the local engine instead of pushing)",
    )


def register(ci_sub: Any) -> None:
    from envlock.commands.options import add_force_argument, add_pin_arguments, add_render_arguments

    m = ci_sub.add_parser(
        "matrix",
        help="expand a version range into cells (release x Python x CUDA source)",
        description="The newest patch of each TensorFlow minor SPEC admits, times the Pythons "
        "and CUDA sources asked for; each cell is what `envlock lock <cell spec> --python X "
        "--cuda-source Y` resolves. Cell ids: tf<version>-py<python>-cuda<cuda>, with -pip "
        "for the pip CUDA source. Exit 2 when SPEC admits nothing or a combination asked "
        "for does not exist.",
    )
    _cell_arguments(m)
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

    lk = ci_sub.add_parser(
        "lock",
        help="lock every cell into DIR/<cell-id>, several at once",
        description="One bundle per cell, as `envlock lock <cell spec> --python X "
        "--cuda-source Y -o DIR/<cell-id>` writes it, all-or-nothing per cell; then "
        "DIR/cells.json and DIR/docker-bake.json. A failed cell is named with its reason "
        "and the others still land; exit 1 if any cell failed.",
    )
    _cell_arguments(lk)
    lk.add_argument("-o", "--output", metavar="DIR", required=True, help="folder of the bundles")
    lk.add_argument("--jobs", type=int, default=4, metavar="N", help="cells locked at once (4)")
    add_pin_arguments(lk, " in every cell")
    lk.add_argument("--resolver", choices=("uv", "pip"), default="uv", help="resolver engine")
    lk.add_argument("--index-url", metavar="URL", help="simple-API index (default: pip/uv's)")
    lk.add_argument("--offline", action="store_true", help="use only uv's cached metadata")
    lk.add_argument("--json", action="store_true", help="print the result as JSON")
    add_render_arguments(lk)
    add_force_argument(lk)
    lk.set_defaults(func=run_lock)

    init = ci_sub.add_parser(
        "init",
        help="write a GitHub Actions workflow that locks, builds, pushes, smoke-tests and "
        "signs every cell",
        description="Write a GitHub Actions workflow: a job running `envlock ci matrix "
        "--format github`, one job per cell (lock, build, push to ghcr.io/<repository>, "
        "smoke on a GPU runner, sign with the ENVLOCK_SIGNING_KEY secret, upload the report) "
        "and a job collecting the reports. An existing file is kept unless --force.",
    )
    init.add_argument("--spec", required=True, metavar="SPEC", help=SPEC_HELP)
    init.add_argument(
        "-o",
        "--output",
        default=".github/workflows/envlock-images.yml",
        metavar="FILE",
        help="workflow file to write (default .github/workflows/envlock-images.yml)",
    )
    init.add_argument(
        "--runner-label",
        default="gpu",
        metavar="LABEL",
        help="default runner label of the GPU machines (a workflow input; default gpu)",
    )
    init.add_argument(
        "--install",
        metavar="REQ",
        help="what the workflow pip-installs as envlock (default envlock==<this version>)",
    )
    init.add_argument("--force", action="store_true", help="replace an existing file")
    init.set_defaults(func=run_init)


def _expand(args: argparse.Namespace) -> Expansion:
    from envlock.ci.cells import DEFAULT_REPO, expand, parse_pythons, parse_sources

    expansion = expand(
        args.spec,
        parse_pythons(args.python),
        parse_sources(args.cuda_source),
        args.repo or DEFAULT_REPO,
        prereleases=args.pre,
    )
    for note in expansion.notes:
        sys.stderr.write(f"envlock: note: {note}\n")
    return expansion


def run_matrix(args: argparse.Namespace) -> int:
    from envlock.ci.formats import bake_file, cell_list, github_matrix
    from envlock.output import emit_json

    cells = _expand(args).cells
    if args.format == "github":
        sys.stdout.write(github_matrix(cells) + "\n")
    elif args.format == "bake":
        emit_json(bake_file(cells))
    else:
        emit_json(cell_list(cells))
    return 0


def _progress(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def run_lock(args: argparse.Namespace) -> int:
    from envlock.bundle.folder import LockRequest
    from envlock.bundle.guard import check_output_folder
    from envlock.ci.lockcells import lock_cells, write_index
    from envlock.commands.options import render_options
    from envlock.model import Constraints
    from envlock.output import emit_json, table

    if args.jobs < 1:
        raise UsageError(f"--jobs {args.jobs}: give at least 1", hint="e.g. --jobs 4")
    output = Path(args.output)
    check_output_folder(output, "-o")
    cells = _expand(args).cells
    template = LockRequest(
        constraints=Constraints(),
        output=output,
        with_requirements=tuple(args.with_requirements),
        requirement_files=tuple(args.requirement_files),
        resolver=args.resolver,
        index_url=args.index_url,
        offline=args.offline,
        render=render_options(args),
        force=args.force,
    )
    output.mkdir(parents=True, exist_ok=True)
    results = lock_cells(cells, output, template, jobs=args.jobs, progress=_progress)
    cells_path, bake_path = write_index(output, args.spec, results, args.base_image)
    failed = [r for r in results if not r.ok]
    if args.json:
        emit_json(
            {
                "dir": str(output),
                "ok": not failed,
                "cells": [r.to_dict() for r in results],
                "cells_json": str(cells_path),
                "bake_file": str(bake_path),
            }
        )
    else:
        rows = [
            [r.cell.id, "locked" if r.ok else "FAILED", r.digest or (r.error or "")[:100]]
            for r in results
        ]
        sys.stdout.write(table(["cell", "status", "lock digest / reason"], rows))
        sys.stdout.write(
            f"\n{len(results) - len(failed)} of {len(results)} cells locked into {output}; "
            f"wrote {cells_path.name} and {bake_path.name}\n"
        )
    for r in failed:
        sys.stderr.write(f"envlock: error: cell {r.cell.id} failed: {r.error}\n")
    return 1 if failed else 0


def run_init(args: argparse.Namespace) -> int:
    from envlock.ci.workflow import render_workflow, workflow_context, write_workflow

    ctx = workflow_context(args.spec, args.runner_label, args.install, args.output)
    path = Path(args.output)
    write_workflow(path, render_workflow(ctx), force=args.force)
    sys.stdout.write(
        f"wrote {path}: cells of {args.spec}, smoke on runner label {args.runner_label!r}\n"
        "add the repository secret ENVLOCK_SIGNING_KEY (a key made by `envlock keygen`) "
        "before the first run\n"
    )
    return 0
