"""envlock ci build: build, smoke-test, push and sign every cell of a `ci lock` folder."""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path
from typing import Any


def register(ci_sub: Any) -> None:
    p = ci_sub.add_parser(
        "build",
        help="build, smoke-test, push and sign every cell of a `ci lock` folder",
        description="Every direct subfolder of DIR with a Dockerfile is a cell (its name is "
        "the cell id). Each cell is built (tag REPO:<cell-id> with --push, else "
        "envlock-ci:<cell-id>), smoke-tested in the image just built, and only when the "
        "smoke test passed pushed; with --sign its result is signed into "
        "DIR/<cell-id>/report.intoto.json, naming REPO@<manifest digest> and the image id "
        "that ran. With --push and --sign a pushed cell's SBOM (the lock's closure and the "
        "image's dpkg packages) is written to DIR/<cell-id>/sbom.cdx.json, signed, attached "
        "beside the report and named by it. A cell unchanged since the last run (same "
        "bundle files, base image and "
        "build arguments; its image still in the registry) is reused: same digest, not "
        "re-signed or re-attached. Build-stage images are removed at the end unless --keep. "
        "Cells run --jobs at a time; one failing cell does not stop the others. Progress on "
        "stderr (a live table on a terminal, plain lines prefixed [cell-id] otherwise, with a "
        "line at least every 30 s per running cell); the summary on stdout and in "
        "DIR/summary.json. Exit 1 if a cell failed, 2 for bad input, 3 when Docker cannot be "
        "reached.",
    )
    p.add_argument("dir", metavar="DIR", help="folder with one bundle per cell (`ci lock -o`)")
    p.add_argument("--jobs", type=int, default=1, metavar="N", help="cells at a time (default 1)")
    p.add_argument(
        "--push",
        metavar="REPO",
        help="push each cell as REPO:<cell-id>; REPO names its registry host, "
        "e.g. ghcr.io/OWNER/tf",
    )
    p.add_argument("--sign", metavar="KEY", help="sign each smoke result with this private key")
    p.add_argument("--base-image", metavar="REF", help="build every cell on this image")
    p.add_argument(
        "--build-arg",
        metavar="NAME=VALUE",
        action="append",
        default=[],
        help="a build argument the cells' Dockerfiles declare (repeatable)",
    )
    p.add_argument(
        "--allow-cpu", action="store_true", help="a smoke run without a GPU passes as WARNED"
    )
    p.add_argument(
        "--network", metavar="MODE", help="network for RUN steps: host, none, or a network name"
    )
    p.add_argument(
        "--keep",
        action="store_true",
        help="keep the build-stage images a multi-stage build leaves (removed by default)",
    )
    p.add_argument(
        "--summary-format",
        choices=("text", "markdown"),
        default="text",
        help="the summary on stdout: a text table (default) or a Markdown table, e.g. "
        '>> "$GITHUB_STEP_SUMMARY"',
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from envlock.ci.build import build_cells
    from envlock.ci.options import CiBuildOptions
    from envlock.image.dockerfile import parse_build_args

    options = CiBuildOptions(
        jobs=args.jobs,
        push=args.push,
        sign=Path(args.sign) if args.sign else None,
        base_image=args.base_image,
        build_args=parse_build_args(args.build_arg),
        allow_cpu=args.allow_cpu,
        network=args.network,
        keep=args.keep,
    )
    directory = Path(args.dir)
    if sys.stderr.isatty():
        summary = _run_live(directory, options)
    else:
        summary = build_cells(directory, options)
    if args.json:
        from envlock.output import emit_json

        emit_json(summary.to_dict())
    elif args.summary_format == "markdown":
        from envlock.ci.summary import markdown_summary

        sys.stdout.write(markdown_summary(summary))
    else:
        sys.stdout.write(describe(summary))
    return 0 if summary.ok else 1


def describe(summary: Any) -> str:
    from envlock.ci.summary import SUMMARY_HEADERS, SUMMARY_NAME, summary_rows
    from envlock.output import table

    failed = len(summary.failed)
    head = (
        f"{len(summary.cells)} cells, {len(summary.cells) - failed} ok, {failed} failed, "
        f"{summary.seconds:.1f} s (--jobs {summary.jobs})"
    )
    lines = [table(SUMMARY_HEADERS, summary_rows(summary)).rstrip(), "", head]
    for cell in summary.cells:
        if cell.pinned:
            lines.append(f"pushed {cell.pinned}")
    lines.append(f"summary: {summary.directory / SUMMARY_NAME}")
    return "\n".join(lines) + "\n"


def _run_live(directory: Path, options: Any) -> Any:
    """build_cells under a rich live table on stderr, redrawn as the cells move."""
    from rich.console import Console
    from rich.live import Live
    from rich.table import Table

    from envlock.ci.build import build_cells
    from envlock.ci.summary import CellOutcome

    outcomes: list[CellOutcome] = []
    lock = threading.Lock()

    def render() -> Table:
        grid = Table(title=f"envlock ci build {directory}", expand=True)
        with lock:
            width = max([len(o.cell) for o in outcomes] + [4])
        grid.add_column("cell", no_wrap=True, min_width=width)
        grid.add_column("stage", no_wrap=True, min_width=6)
        grid.add_column("s", no_wrap=True, justify="right", min_width=4)
        grid.add_column("latest", no_wrap=True, overflow="ellipsis", ratio=1)
        now = time.perf_counter()
        with lock:
            for o in outcomes:
                seconds = o.seconds or ((now - o.started) if o.started else 0.0)
                style = "red" if o.stage == "failed" else "green" if o.stage == "done" else ""
                grid.add_row(
                    o.cell, o.stage, f"{seconds:.0f}", (o.reason or o.detail)[:90], style=style
                )
        return grid

    class LiveProgress:
        def update(self, outcome: CellOutcome, line: str | None = None) -> None:
            live.update(render())

    console = Console(stderr=True)
    with Live(render(), console=console, refresh_per_second=4, transient=False) as live:
        return build_cells(directory, options, progress=LiveProgress(), outcomes=outcomes)
