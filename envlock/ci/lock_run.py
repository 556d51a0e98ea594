"""``envlock ci lock`` as one call: ``lock_cells_into(CiLockRequest)`` locks each
cell into ``DIR/<cell-id>``; with ``check``, ``check_cells_in`` checks each against
the cells expanded again from DIR/cells.json. Results are ``envlock.output.Printed``."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from envlock.errors import UsageError
from envlock.output import Printed, progress, table
from envlock.render import RenderOptions

if TYPE_CHECKING:
    from envlock.ci.cells import Expansion


@dataclass(frozen=True)
class CiLockRequest:
    """``envlock ci lock``'s flags as typed values (``check``: --check DIR)."""

    spec: str | None = None
    output: str | None = None
    check: str | None = None
    python: str | None = None
    cuda_source: str | None = None
    pre: bool = False
    repo: str | None = None
    exclude_newer: str | None = None
    jobs: int = 4
    with_requirements: tuple[str, ...] = ()
    requirement_files: tuple[str, ...] = ()
    resolver: str = "uv"
    index_url: str | None = None
    # --index NAME=URL / --route, as `envlock lock` takes them, given to every cell
    indexes: tuple[str, ...] = ()
    routes: tuple[str, ...] = ()
    offline: bool = False
    render: RenderOptions = field(default_factory=RenderOptions)
    base_image: str | None = None
    force: bool = False


def lock_cells_into(args: CiLockRequest) -> Printed:
    """``ci lock SPEC -o DIR`` (``--check DIR``: ``check_cells_in``); --json: dir, ok,
    cells, cells_json, bake_file."""
    from envlock.bundle.folder import LockRequest
    from envlock.bundle.guard import check_output_folder
    from envlock.ci.lockcells import lock_cells, write_index
    from envlock.model import Constraints

    if args.jobs < 1:
        raise UsageError(f"--jobs {args.jobs}: give at least 1", hint="e.g. --jobs 4")
    if args.check is not None:
        return check_cells_in(args)
    if args.output is None:
        raise UsageError("give -o DIR (or --check DIR)", hint="envlock ci lock SPEC -o cells")
    from envlock.ci.lockcells import CellsInput
    from envlock.door import redact
    from envlock.index import routing
    from envlock.instant import exclude_newer as instant

    exclude_newer = instant(args.exclude_newer) if args.exclude_newer else None
    output = Path(args.output)
    check_output_folder(output, "-o")
    if not args.spec:
        raise UsageError("give SPEC", hint="e.g. envlock ci matrix 'tensorflow>=2.14,<2.17'")
    cells = expand_cells(
        args.spec, args.python, args.cuda_source, args.repo, args.pre, exclude_newer
    ).cells
    indexes, routes = routing.pairs(routing.parse(list(args.indexes), list(args.routes)))
    template = LockRequest(
        constraints=Constraints(),
        output=output,
        with_requirements=tuple(args.with_requirements),
        requirement_files=tuple(args.requirement_files),
        resolver=args.resolver,
        index_url=args.index_url,
        indexes=indexes,
        routes=routes,
        offline=args.offline,
        render=args.render,
        force=args.force,
    )
    output.mkdir(parents=True, exist_ok=True)
    results = lock_cells(cells, output, template, jobs=args.jobs, progress=progress)
    recorded = CellsInput(
        spec=args.spec,
        python=args.python,
        cuda_source=args.cuda_source,
        pre=args.pre,
        repo=args.repo,
        exclude_newer=exclude_newer,
        with_requirements=tuple(args.with_requirements),
        indexes=tuple(f"{name}={redact(url)}" for name, url in indexes),
        routes=tuple(f"{match}={name}" for match, name in routes),
    )
    cells_path, bake_path = write_index(output, recorded, results, args.base_image)
    failed = [r for r in results if not r.ok]
    doc = {
        "dir": str(output),
        "ok": not failed,
        "cells": [r.to_dict() for r in results],
        "cells_json": str(cells_path),
        "bake_file": str(bake_path),
    }
    rows = [
        [r.cell.id, "locked" if r.ok else "FAILED", r.digest or (r.error or "")[:100]]
        for r in results
    ]
    text = table(["cell", "status", "lock digest / reason"], rows) + (
        f"\n{len(results) - len(failed)} of {len(results)} cells locked into {output}; "
        f"wrote {cells_path.name} and {bake_path.name}\n"
    )
    stderr = "".join(f"envlock: error: cell {r.cell.id} failed: {r.error}\n" for r in failed)
    return Printed(doc, text, 1 if failed else 0, stderr=stderr)


def check_cells_in(args: CiLockRequest) -> Printed:
    """``ci lock --check DIR``: exit 0 when every cell is current, 1 naming those that are not."""
    from envlock.ci.cells import DEFAULT_REPO, expand, parse_pythons, parse_sources
    from envlock.ci.lockcells import check_cells, read_index

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
            ("--index", args.indexes),
            ("--route", args.routes),
            ("--force", args.force),
        )
        if value
    ]
    if given:
        import shlex

        raise UsageError(
            f"--check reuses the input {args.check}/cells.json records; "
            f"{', '.join(given)} not used",
            hint=f"envlock ci lock --check {shlex.quote(str(args.check))}",
        )
    assert args.check is not None  # called for --check DIR
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
        progress=progress,
    )
    bad = [c for c in checks if not c.ok]
    fix = recorded.command(str(folder))
    doc = {"dir": str(folder), "ok": not bad, "cells": [c.to_dict() for c in checks], "fix": fix}
    rows_out = [[c.id, c.state, c.changes[0][:100] if c.changes else ""] for c in checks]
    text = table(["cell", "state", "first change"], rows_out)
    text += "".join(f"  {c.id}: {line}\n" for c in bad for line in c.changes[1:])
    if bad:
        stderr = (
            f"envlock: error: {len(bad)} of {len(checks)} cells would change: "
            + ", ".join(f"{c.id} ({c.state})" for c in bad)
            + f"\nhint: {fix}\n"
        )
        return Printed(doc, text, 1, stderr=stderr)
    return Printed(
        doc, text, stderr=f"ci lock --check: all {len(checks)} cells of {folder} are current\n"
    )


def expand_cells(
    spec: str,
    python: str | None,
    cuda_source: str | None,
    repo: str | None,
    pre: bool,
    exclude_newer: str | None = None,
) -> Expansion:
    """The cells SPEC and the cell flags ask for (``envlock.ci.cells.expand``); its
    notes on stderr."""
    from envlock.ci.cells import DEFAULT_REPO, expand, parse_pythons, parse_sources

    expansion = expand(
        spec,
        parse_pythons(python),
        parse_sources(cuda_source),
        repo or DEFAULT_REPO,
        prereleases=pre,
        exclude_newer=exclude_newer,
    )
    for note in expansion.notes:
        sys.stderr.write(f"envlock: note: {note}\n")
    return expansion
