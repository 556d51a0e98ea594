"""``envlock ci build DIR`` as one call: ``build_all(CiBuildRequest)``: every cell
built, smoke-tested, pushed and signed (``envlock.ci.build.build_cells``), under a
live table on stderr when it is a terminal. The result's ``to_dict`` is the
summary (``ci build --json``), ``text`` the table or the Markdown summary."""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class CiBuildRequest:
    """``envlock ci build``'s flags as typed values."""

    dir: str
    jobs: int = 1
    push: str | None = None
    sign: str | None = None
    base_image: str | None = None
    build_arg: tuple[str, ...] = ()
    allow_cpu: bool = False
    network: str | None = None
    keep: bool = False
    markdown: bool = False  # --summary-format markdown


@dataclass(frozen=True)
class CiBuilt:
    summary: Any  # envlock.ci.summary's BuildSummary
    markdown: bool = False

    @property
    def exit_code(self) -> int:
        return 0 if self.summary.ok else 1

    def to_dict(self) -> Any:
        return self.summary.to_dict()

    def text(self) -> str:
        if self.markdown:
            from envlock.ci.summary import markdown_summary

            return markdown_summary(self.summary)
        return describe(self.summary)


def build_all(args: CiBuildRequest) -> CiBuilt:
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
    return CiBuilt(summary, args.markdown)


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
