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


def _cell_arguments(p: argparse.ArgumentParser, spec_help: str = SPEC_HELP) -> None:
    p.add_argument("spec", metavar="SPEC", nargs="?", help=spec_help)
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
    _cell_arguments(m, SPEC_HELP + "; not with --from")
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

    lk = ci_sub.add_parser(
        "lock",
        help="lock every cell into DIR/<cell-id>, several at once",
        description="One bundle per cell, as `envlock lock <cell spec> --python X "
        "--cuda-source Y -o DIR/<cell-id>` writes it, all-or-nothing per cell; then "
        "DIR/cells.json and DIR/docker-bake.json. A failed cell is named with its reason "
        "and the others still land; exit 1 if any cell failed.",
    )
    _cell_arguments(lk, SPEC_HELP + "; not with --check")
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

    init = ci_sub.add_parser(
        "init",
        help="write a GitHub Actions workflow that gates, builds, smoke-tests, pushes and "
        "signs the committed cells",
        description="Write a GitHub Actions workflow over the cells committed in --cells "
        "(`envlock ci lock SPEC -o cells`): on a pull request `ci lock --check` and a build "
        "without push; on the default branch each cell built and smoke-tested on a GPU "
        "runner, pushed to ghcr.io/<repository>, signed with the ENVLOCK_SIGNING_KEY secret "
        "and attached; then one report page over all cells and `verify --require-pass` of "
        "each pushed digest. Beside it, in --install-dir: requirements.txt (envlock's wheel "
        "and closure, every file by sha256; the workflow installs with --require-hashes), "
        "the wheel when --envlock-wheel is a file, the public key with --public-key. Every "
        "`uses:` is pinned to a commit from envlock's actions table (or --actions-from). "
        "Existing files are kept unless --force.",
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
        "--cells",
        default="cells",
        metavar="DIR",
        help="the committed `ci lock` folder, relative to the repository root (default cells)",
    )
    init.add_argument(
        "--install-dir",
        default=".github/envlock",
        metavar="DIR",
        help="where requirements.txt, the wheel and the public key go, relative to the "
        "repository root (default .github/envlock)",
    )
    init.add_argument(
        "--envlock-wheel",
        required=True,
        metavar="WHEEL|URL#sha256=HEX",
        help="envlock's wheel: a file (copied into --install-dir and committed; make it with "
        "`uv build --wheel` in envlock's checkout) or an https URL with its sha256",
    )
    init.add_argument(
        "--public-key",
        metavar="PUB",
        help="the public key (`envlock keygen`'s NAME.pub.pem) the report job verifies "
        "with, copied into --install-dir",
    )
    init.add_argument(
        "--actions-from",
        metavar="FILE",
        help="table of pinned actions (action, tag, sha, read), laid out as envlock's "
        "matrices/actions.toml; default: that table",
    )
    init.add_argument(
        "--build-arg",
        metavar="NAME=VALUE",
        action="append",
        default=[],
        help="a build argument the workflow's `ci build` passes (repeatable), e.g. "
        "PIP_INDEX_URL=https://mirror.example/simple for a runner that installs from a mirror",
    )
    init.add_argument(
        "--build-network",
        metavar="MODE",
        help="network for the RUN steps of the workflow's builds (host, none, a network "
        "name): for self-hosted runners whose Docker daemon has no default bridge",
    )
    init.add_argument("--index-url", metavar="URL", help="simple-API index (default: pip/uv's)")
    init.add_argument(
        "--exclude-newer",
        metavar="DATE",
        help="lock envlock's dependencies from files uploaded before DATE (YYYY-MM-DD: the "
        "start of that day in UTC, or an RFC 3339 timestamp)",
    )
    init.add_argument("--force", action="store_true", help="replace existing files")
    init.set_defaults(func=run_init)


def _expand(args: argparse.Namespace, exclude_newer: str | None = None) -> Expansion:
    from envlock.ci.cells import DEFAULT_REPO, expand, parse_pythons, parse_sources

    if not args.spec:
        raise UsageError("give SPEC", hint="e.g. envlock ci matrix 'tensorflow>=2.14,<2.17'")
    expansion = expand(
        args.spec,
        parse_pythons(args.python),
        parse_sources(args.cuda_source),
        args.repo or DEFAULT_REPO,
        prereleases=args.pre,
        exclude_newer=exclude_newer,
    )
    for note in expansion.notes:
        sys.stderr.write(f"envlock: note: {note}\n")
    return expansion


def run_matrix(args: argparse.Namespace) -> int:
    from envlock.ci.formats import bake_file, cell_list, github_matrix
    from envlock.output import emit_json

    if args.from_dir is not None:
        return _matrix_from(args)
    cells = _expand(args).cells
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

    from envlock.ci.cells import CELL_FIELDS
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
        {k: row[k] for k in CELL_FIELDS if k in row}
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
    cells = _expand(args, exclude_newer).cells
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


def run_init(args: argparse.Namespace) -> int:
    from envlock.ci.actions import load_actions
    from envlock.ci.install import REQUIREMENTS, closure_text, envlock_wheel
    from envlock.ci.workflow import (
        render_workflow,
        workflow_context,
        write_files,
    )
    from envlock.render.values import checked

    extra: list[str] = []
    for flag in ("envlock_wheel", "public_key", "actions_from", "index_url", "exclude_newer"):
        value = getattr(args, flag)
        if value is not None:
            name = "--" + flag.replace("_", "-")
            extra += [name, str(checked(value, name, max_len=1000))]
    table = load_actions(Path(args.actions_from)) if args.actions_from else None
    ctx = workflow_context(
        args.spec,
        args.runner_label,
        args.output,
        cells=args.cells,
        install_dir=args.install_dir,
        actions=table,
        extra_words=tuple(extra),
        build_args=tuple(args.build_arg),
        build_network=args.build_network,
    )
    files: dict[Path, bytes] = {}
    if args.public_key:
        from envlock.report.keys import load_public

        load_public(Path(args.public_key))  # a bad key is exit 2 here
        from envlock.readers import read_bytes

        files[Path(ctx.public_key)] = read_bytes(args.public_key, "--public-key")
    wheel = envlock_wheel(args.envlock_wheel)
    exclude_newer = None
    if args.exclude_newer:
        from envlock.instant import exclude_newer as instant

        exclude_newer = instant(args.exclude_newer)
    install_dir = str(ctx.requirements).rsplit("/", 1)[0]
    requirements = closure_text(
        wheel, install_dir, index_url=args.index_url, exclude_newer=exclude_newer
    )
    if wheel.url is None:
        files[Path(install_dir) / wheel.filename] = wheel.data
    files[Path(install_dir) / REQUIREMENTS] = requirements.encode()
    files[Path(args.output)] = render_workflow(ctx).encode()
    write_files(files, force=args.force)
    for path in files:
        sys.stdout.write(f"wrote {path}\n")
    sys.stdout.write(
        f"cells of {args.spec} from {ctx.cells}/, smoke on runner label {args.runner_label!r}\n"
        "before the first run: add the repository secret ENVLOCK_SIGNING_KEY (a key made "
        "by `envlock keygen`)"
        + ("" if args.public_key else f" and commit its public key as {ctx.public_key}")
        + f", and commit {ctx.cells}/ (`envlock ci lock SPEC -o {ctx.cells}`)\n"
    )
    return 0
