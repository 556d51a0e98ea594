"""``envlock report page`` as one call: ``write_report_page(PageRequest)`` (in
envlock.ci: it reads ``ci build``'s summary.json)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from envlock.output import Printed


@dataclass(frozen=True)
class PageRequest:
    """``envlock report page``'s flags as typed values."""

    reports: list[str]
    key: list[str]
    output: str
    summary: str | None = None
    lock: str | None = None
    image: str | None = None
    title: str = "envlock report page"
    force: bool = False


def write_report_page(args: PageRequest) -> Printed:
    """Verify every report and write DIR/index.html and DIR/summary.json; --json: page
    and the page's summary; exit 1 (raised after printing) when a report did not verify."""
    from envlock.ci.summary import read_summary
    from envlock.errors import CheckFailed
    from envlock.report import page
    from envlock.report.page_rows import load_keys

    keys = load_keys(args.key)  # a bad key is named before a bad summary, as always
    claims, missing = read_summary(Path(args.summary)) if args.summary is not None else ({}, [])
    inputs = [("the report", Path(r)) for r in args.reports or [str(p) for p in claims]]
    inputs += [("the trusted key", Path(k)) for k in args.key]
    if args.summary is not None:
        inputs.append(("the summary --summary", Path(args.summary)))
    page.refuse_overwrite(Path(args.output), inputs, force=args.force)
    made = page.page_for(
        args.reports,
        keys,
        claims=claims,
        missing=missing,
        source=args.summary,
        lock=args.lock,
        image=args.image,
    )
    path = page.write_page(Path(args.output), made, title=args.title)
    failure = None
    if made.unverified:
        failure = CheckFailed(f"{len(made.unverified)} report(s) did not verify (see {path})")
    return Printed(
        {"page": str(path), **made.to_dict()}, page.describe(made, path), failure=failure
    )
