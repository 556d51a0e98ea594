"""``envlock ci lock``: flags, the call into ``envlock.ci.lockcells``, printing.

``ci lock SPEC -o DIR`` locks each cell into ``DIR/<cell-id>``; ``ci lock
--check DIR`` checks each against the cells expanded again from DIR/cells.json.
"""

from __future__ import annotations

import argparse
from typing import Any

from envlock.commands.options import CELL_SPEC_HELP, add_cell_arguments, render_options
from envlock.output import finish


def register(ci_sub: Any) -> None:
    from envlock.commands.options import (
        add_force_argument,
        add_index_arguments,
        add_pin_arguments,
        add_render_arguments,
    )

    lk = ci_sub.add_parser(
        "lock",
        help="lock every cell into DIR/<cell-id>, several at once",
        description="One bundle per cell, as `envlock lock <cell spec> --python X "
        "--cuda-source Y -o DIR/<cell-id>` writes it (torch: `--cuda Y.Z` for the cell's "
        "CUDA build), all-or-nothing per cell; then "
        "DIR/cells.json and DIR/docker-bake.json. A failed cell is named with its reason "
        "and the others still land; exit 1 if any cell failed.",
    )
    add_cell_arguments(lk, CELL_SPEC_HELP + "; not with --check")
    lk.add_argument("-o", "--output", metavar="DIR", help="folder of the bundles")
    lk.add_argument(
        "--check",
        metavar="DIR",
        help="write nothing: expand the cells again from the input DIR/cells.json records "
        "and check each bundle as `envlock lock --check` does; exit 1 naming every cell "
        "that would change (new, gone, or a lock or file that differs)",
    )
    lk.add_argument(
        "--exclude-newer",
        metavar="DATE",
        help="ignore releases and files uploaded at or after DATE (YYYY-MM-DD: the start of "
        "that day in UTC, or an RFC 3339 timestamp), as uv's --exclude-newer; recorded in "
        "DIR/cells.json and each lock, so --check reuses it",
    )
    lk.add_argument("--jobs", type=int, default=4, metavar="N", help="cells locked at once (4)")
    add_pin_arguments(lk, " in every cell")
    lk.add_argument("--resolver", choices=("uv", "pip"), default="uv", help="resolver engine")
    lk.add_argument("--index-url", metavar="URL", help="simple-API index (default: pip/uv's)")
    add_index_arguments(lk)  # every cell's lock takes them (torch builds of PyTorch's index)
    lk.add_argument("--offline", action="store_true", help="use only uv's cached metadata")
    lk.add_argument("--json", action="store_true", help="print the result as JSON")
    add_render_arguments(lk)
    add_force_argument(lk)
    lk.set_defaults(func=run_lock)


def run_lock(args: argparse.Namespace) -> int:
    from envlock.ci.lock_run import CiLockRequest, lock_cells_into

    request = CiLockRequest(
        spec=args.spec,
        output=args.output,
        check=args.check,
        python=args.python,
        cuda_source=args.cuda_source,
        pre=args.pre,
        repo=args.repo,
        exclude_newer=args.exclude_newer,
        jobs=args.jobs,
        with_requirements=tuple(args.with_requirements),
        requirement_files=tuple(args.requirement_files),
        resolver=args.resolver,
        index_url=args.index_url,
        indexes=tuple(args.indexes),
        routes=tuple(args.routes),
        offline=args.offline,
        render=render_options(args),
        base_image=args.base_image,
        force=args.force,
    )
    return finish(lock_cells_into(request), args.json)  # --check DIR: check_cells_in
