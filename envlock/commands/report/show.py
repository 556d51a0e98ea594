"""envlock report show: what a report says (the signature is not checked)."""

from __future__ import annotations

import argparse
from typing import Any

from envlock.output import finish


def register(rsub: Any) -> None:
    w = rsub.add_parser(
        "show",
        help="show what a report says (does not check the signature)",
        description="Print the statement inside a report. The signature is NOT checked; "
        "use 'envlock verify REPORT --key PUB' for that.",
    )
    w.add_argument("report", metavar="REPORT")
    w.add_argument("--json", action="store_true", help="print the decoded statement as JSON")
    w.set_defaults(func=run_show)


def run_show(args: argparse.Namespace) -> int:
    from envlock.report.shown import show_report

    return finish(show_report(args.report), args.json)
