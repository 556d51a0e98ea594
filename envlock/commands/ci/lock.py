"""``envlock ci lock``: flags, the call into ``envlock.ci.lockcells``, printing.

``ci lock SPEC -o DIR`` locks each cell into ``DIR/<cell-id>``; ``ci lock
--check DIR`` checks each against the cells expanded again from DIR/cells.json.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from envlock.commands.options import CELL_SPEC_HELP, add_cell_arguments, cells_from_args
from envlock.errors import UsageError


def register(ci_sub: Any) -> None:
    from envlock.commands.options import add_force_argument, add_pin_arguments, add_render_arguments

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
    lk.add_argument("--offline", action="store_true", help="use only uv's cached metadata")
    lk.add_argument("--json", action="store_true", help="print the result as JSON")
    add_render_arguments(lk)
    add_force_argument(lk)
    lk.set_defaults(func=run_lock)


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
    if args.check is not None:
        return run_lock_check(args)
    if args.output is None:
        raise UsageError("give -o DIR (or --check DIR)", hint="envlock ci lock SPEC -o cells")
    from envlock.ci.lockcells import CellsInput
    from envlock.instant import exclude_newer as instant

    exclude_newer = instant(args.exclude_newer) if args.exclude_newer else None
    output = Path(args.output)
    check_output_folder(output, "-o")
    cells = cells_from_args(args, exclude_newer).cells
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
    recorded = CellsInput(
        spec=args.spec,
        python=args.python,
        cuda_source=args.cuda_source,
        pre=args.pre,
        repo=args.repo,
        exclude_newer=exclude_newer,
        with_requirements=tuple(args.with_requirements),
    )
    cells_path, bake_path = write_index(output, recorded, results, args.base_image)
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


def run_lock_check(args: argparse.Namespace) -> int:
    """``ci lock --check DIR``: exit 0 when every cell is current, 1 naming those that are not."""
    from envlock.ci.cells import DEFAULT_REPO, expand, parse_pythons, parse_sources
    from envlock.ci.lockcells import check_cells, read_index
    from envlock.output import emit_json, table

    given = [
        flag
        for flag, value in (
            ("SPEC", args.spec),
            ("-o", args.output),
            ("--python", args.python),
            ("--cuda-source", args.cuda_source),
            ("--pre", args.pre),
            ("--repo", args.repo),
            ("--exclude-newer", args.exclude_newer),
            ("--with", args.with_requirements),
            ("-r", args.requirement_files),
            ("--force", args.force),
        )
        if value
    ]
    if given:
        raise UsageError(
            f"--check reuses the input {args.check}/cells.json records; "
            f"{', '.join(given)} not used",
            hint=f"envlock ci lock --check {args.check}",
        )
    folder = Path(args.check)
    recorded, rows = read_index(folder)
    expansion = expand(
        recorded.spec,
        parse_pythons(recorded.python),
        parse_sources(recorded.cuda_source),
        recorded.repo or DEFAULT_REPO,
        prereleases=recorded.pre,
        exclude_newer=recorded.exclude_newer,
    )
    checks = check_cells(
        folder,
        expansion.cells,
        rows,
        index_url=args.index_url,
        offline=args.offline,
        jobs=args.jobs,
        progress=_progress,
    )
    bad = [c for c in checks if not c.ok]
    fix = recorded.command(str(folder))
    if args.json:
        emit_json(
            {"dir": str(folder), "ok": not bad, "cells": [c.to_dict() for c in checks], "fix": fix}
        )
    else:
        rows_out = [[c.id, c.state, c.changes[0][:100] if c.changes else ""] for c in checks]
        sys.stdout.write(table(["cell", "state", "first change"], rows_out))
        for c in bad:
            for line in c.changes[1:]:
                sys.stdout.write(f"  {c.id}: {line}\n")
    if bad:
        sys.stderr.write(
            f"envlock: error: {len(bad)} of {len(checks)} cells would change: "
            + ", ".join(f"{c.id} ({c.state})" for c in bad)
            + f"\nhint: {fix}\n"
        )
        return 1
    sys.stderr.write(f"ci lock --check: all {len(checks)} cells of {folder} are current\n")
    return 0
