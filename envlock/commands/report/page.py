"""envlock report page: verify many reports and write them as one static HTML page."""

from __future__ import annotations

import argparse
from typing import Any

from envlock.output import finish


def register(rsub: Any) -> None:
    g = rsub.add_parser(
        "page",
        help="verify many reports and write them as one static HTML page",
        description="Verify every REPORT (as 'envlock verify' does) against the trusted keys "
        "and, where known, the image and lock it claims (ci build's summary.json, or "
        "--image/--lock for every report); write DIR/index.html (one self-contained file) "
        "and DIR/summary.json. A report that does not verify is listed as not verified, "
        "never as a result. Exit 1 when some report did not verify (the page is written).",
    )
    g.add_argument("reports", metavar="REPORT", nargs="*", help="DSSE envelopes (.intoto.json)")
    g.add_argument(
        "--key",
        action="append",
        required=True,
        metavar="PUB",
        help="a trusted public key (repeatable)",
    )
    g.add_argument(
        "--summary",
        metavar="SUMMARY.json",
        help="ci build's summary.json: each cell's "
        "report, pushed image and folder (its lock); its reports when no REPORT is given",
    )
    g.add_argument("--lock", metavar="DIR", help="the bundle every report must match")
    g.add_argument("--image", metavar="REF", help="the image every report must name")
    g.add_argument("--title", default="envlock report page", help="the page's title")
    g.add_argument("-o", "--output", required=True, metavar="DIR", help="write the page here")
    g.add_argument(
        "--force",
        action="store_true",
        help="overwrite DIR/index.html and DIR/summary.json even when they are inputs of "
        "this run or were not written by a report page",
    )
    g.add_argument("--json", action="store_true", help="print the page's summary as JSON")
    g.set_defaults(func=run_page)


def run_page(args: argparse.Namespace) -> int:
    from envlock.ci.page_run import PageRequest, write_report_page

    request = PageRequest(
        reports=args.reports,
        key=args.key,
        output=args.output,
        summary=args.summary,
        lock=args.lock,
        image=args.image,
        title=args.title,
        force=args.force,
    )
    return finish(write_report_page(request), args.json)
