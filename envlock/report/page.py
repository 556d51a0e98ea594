"""The matrix report page: many signed reports, verified, as one static HTML file.

``build_page`` verifies every report with ``verify_envelope`` (the code
``envlock verify`` runs) against each trusted key, and against the image and
lock it claims when those are known (the claims are given: ``ci build``'s
summary.json as ``envlock.ci.summary`` reads it, or ``--image``/``--lock``);
``render_page`` turns the result into one self-contained HTML file from
``envlock/data/templates/report_page.html.j2`` (Jinja2, autoescaping on); ``write_page``
writes ``index.html`` and ``summary.json`` into a folder in one atomic step. A
report that does not verify is never a row of the matrix: it goes to the page's
"not verified" section.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from envlock.errors import UsageError
from envlock.report.page_rows import (
    Claim,
    ImageIds,
    Row,
    RowDict,
    TrustedKey,
    check_report,
)

SCHEMA = "envlock.report-page/v1"
TEMPLATE = "report_page.html.j2"


class PageDict(TypedDict):
    """The page's summary JSON (``SCHEMA``)."""

    schema: str
    ok: bool
    verified: int
    not_verified: int
    keys: list[dict[str, str]]  # path, keyid
    summary: str | None
    checks: list[str]
    cells: list[RowDict]
    unverified: list[RowDict]
    cells_without_report: list[dict[str, str]]


@dataclass
class Page:
    rows: list[Row]  # verified, sorted by cell
    unverified: list[Row]
    check_names: list[str]
    keys: list[TrustedKey]
    missing: list[dict[str, str]] = field(default_factory=list)  # ci cells without a report
    source: str | None = None  # the summary.json the claims came from

    def to_dict(self, base: Path | None = None) -> PageDict:
        """The page's summary; ``base``: the folder it is written to, every path then
        relative to it (as the HTML shows them)."""
        rel = relative_to(base)

        def row(r: Row) -> RowDict:
            d = r.to_dict()
            d["report"], d["signer"] = rel(r.report), rel(r.signer) or r.signer
            return d

        return {
            "schema": SCHEMA,
            "ok": not self.unverified,
            "verified": len(self.rows),
            "not_verified": len(self.unverified),
            "keys": [{"path": rel(k.path), "keyid": k.keyid} for k in self.keys],
            "summary": rel(self.source) or None,
            "checks": self.check_names,
            "cells": [row(r) for r in self.rows],
            "unverified": [row(r) for r in self.unverified],
            "cells_without_report": self.missing,
        }


# ---------------------------------------------------------------- the page


def _release_key(row: Row) -> tuple[Any, ...]:
    from packaging.version import InvalidVersion, Version

    try:
        version: Any = (0, Version(row.version))
    except InvalidVersion:
        version = (1, row.version)
    try:
        python: Any = (0, Version(row.python))
    except InvalidVersion:
        python = (1, row.python)
    return (row.framework, version, python, row.cuda_source, row.gpu)


def _rank(rows: list[Row], name: str, key: Any) -> None:
    for i, row in enumerate(sorted(rows, key=key)):
        row.sort[name] = i


def build_page(
    reports: Sequence[str],
    keys: Sequence[TrustedKey],
    *,
    claims: dict[Path, Claim] | None = None,
    default: Claim | None = None,
    missing: Sequence[dict[str, str]] = (),
    source: str | None = None,
) -> Page:
    """Verify every report; the page's rows, sorted by release (numerically) and cell.

    ``default`` (from --lock/--image) applies to every report; otherwise the
    report's entry in ``claims`` (ci build's summary) says what it claims.
    """
    ids = ImageIds()
    rows: list[Row] = []
    for path in reports:
        claim = default or (claims or {}).get(Path(path).resolve(), Claim())
        if default is not None and claims:
            claim = Claim(
                cell=(claims.get(Path(path).resolve()) or Claim()).cell,
                lock_dir=default.lock_dir,
                image_ref=default.image_ref,
                image_id=default.image_id,
                image_name=default.image_name,
            )
        rows.append(check_report(path, keys, claim, ids))
    good = sorted((r for r in rows if r.verified), key=_release_key)
    bad = [r for r in rows if not r.verified]
    names: list[str] = []
    for row in good:
        names += [n for n in row.checks if n not in names]
    _rank(good, "release", _release_key)
    _rank(good, "python", lambda r: _release_key(r)[2:])
    _rank(good, "result", lambda r: (r.result or "", _release_key(r)))
    _rank(good, "gpu", lambda r: (r.gpu, _release_key(r)))
    _rank(good, "date", lambda r: (r.created or "", _release_key(r)))
    _rank(good, "bench", lambda r: (-_best_fraction(r), _release_key(r)))
    return Page(good, bad, names, list(keys), list(missing), source)


def _best_fraction(row: Row) -> float:
    return max((b["fraction_of_peak"] or 0.0 for b in row.bench), default=0.0)


BAR_WIDTH = 120  # px of a bar at 100% of the datasheet peak


def bar_width(fraction: float | None) -> float | None:
    """A benchmark bar's length: its share of the datasheet peak (capped at the
    full bar); None where no peak is known: such a number gets no bar, since a
    length relative to other rows would say something the number does not."""
    if fraction is None:
        return None
    return round(max(0.0, min(fraction, 1.0)) * BAR_WIDTH, 1)


def tflops_text(value: float) -> str:
    """TFLOP/s as shown beside a bar: 3 significant digits below 100, whole above."""
    if value >= 100:
        return f"{value:.0f}"
    if value >= 1:
        return f"{value:.1f}"
    return f"{value:.3g}"


def relative_to(base: Path | None) -> Any:
    """The template's ``rel``: a path as seen from the page's folder (no absolute
    paths of the machine that wrote the page)."""
    import os

    def rel(path: str | None) -> str:
        if not path:
            return ""
        if base is None:
            return path
        try:
            return os.path.relpath(os.path.abspath(path), os.path.abspath(base))
        except ValueError:  # another drive (Windows): the name only
            return Path(path).name

    return rel


def render_page(page: Page, *, title: str = "envlock report page", base: Path | None = None) -> str:
    """The page as one self-contained HTML document (no external assets); paths
    are shown relative to ``base``, the folder the page is written to."""
    from envlock.report.statement import now_rfc3339

    env = _environment()
    return str(
        env.get_template(TEMPLATE).render(
            page=page,
            title=title,
            made=now_rfc3339(),
            status_class=_STATUS_CLASS,
            rel=relative_to(base),
            bar_width=bar_width,
            bar_full=BAR_WIDTH,
            tflops=tflops_text,
        )
    )


_STATUS_CLASS = {
    "PASS": "pass",
    "PASSED": "pass",
    "WARN": "warn",
    "WARNED": "warn",
    "FAIL": "fail",
    "FAILED": "fail",
    "SKIP": "skip",
}


@functools.lru_cache(maxsize=1)
def _environment() -> Any:
    """One Jinja2 environment per process; the template is compiled once."""
    from envlock.resources import template_environment

    # every reason, name and version is text, never markup
    env = template_environment(autoescape=True)
    env.filters["pct"] = lambda f: "-" if f is None else f"{100 * f:.0f}%"
    env.filters["short"] = lambda s, n=16: s if len(s) <= n else s[:n] + "\u2026"
    return env


GENERATOR = '<meta name="generator" content="envlock report page">'  # in the template
OUTPUTS = ("index.html", "summary.json")


def _written_by_page(path: Path) -> bool:
    """Whether ``path`` is a regular file a report page wrote: index.html with the
    template's generator line, summary.json with the page's schema (both near the top)."""
    import os
    import stat

    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return False
        with path.open("rb") as f:
            head = f.read(4096).decode("utf-8", "replace")
    except OSError:
        return False
    if path.name == "index.html":
        return GENERATOR in head
    return head.lstrip().startswith("{") and f'"schema": "{SCHEMA}"' in head


def refuse_overwrite(out_dir: Path, inputs: Sequence[tuple[str, Path]], *, force: bool) -> None:
    """Exit 2 (hint --force) when DIR/index.html or DIR/summary.json is one of the run's
    ``inputs`` ((what, path) pairs: a report, ci build's summary.json, a key) or a file
    a report page did not write, as `lock -o` refuses a bundle folder's foreign files."""
    from envlock.report.outputs import same_file

    if force:
        return
    for name in OUTPUTS:
        target = out_dir / name
        clash = next((f"{w} {p}" for w, p in inputs if same_file(target, p)), None)
        if clash is not None:
            raise UsageError(
                f"-o {out_dir}: {target} is {clash}; the page would overwrite it",
                hint="give -o another folder (or --force to overwrite it)",
            )
        if (target.exists() or target.is_symlink()) and not _written_by_page(target):
            raise UsageError(
                f"-o {out_dir}: {target} was not written by envlock report page; the page "
                "would overwrite it",
                hint="give -o another folder, move the file away, or --force to overwrite it",
            )


def write_page(out_dir: Path, page: Page, *, title: str = "envlock report page") -> Path:
    """index.html and summary.json into ``out_dir``, as one atomic step."""
    from envlock.fsutil import write_files

    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"{out_dir} is a file", hint="give -o a folder for index.html")
    html = render_page(page, title=title, base=out_dir)
    summary = json.dumps(page.to_dict(out_dir), indent=2) + "\n"
    write_files(out_dir, {"index.html": html, "summary.json": summary})
    return out_dir / "index.html"


def page_for(
    reports: Sequence[str],
    keys: Sequence[TrustedKey],
    *,
    claims: Mapping[Path, Claim] | None = None,
    missing: Sequence[dict[str, str]] = (),
    source: str | None = None,
    lock: str | None = None,
    image: str | None = None,
) -> Page:
    """`envlock report page`'s inputs as a verified page (UsageError for bad ones).

    ``claims``: what each report is the report of, by its resolved path (the
    caller reads them: ``envlock.ci.summary.read_summary`` for ci build's
    summary.json, which is ``source``); its reports are the page's when no
    ``reports`` are given. ``lock``/``image``: the subject every other report
    must name.
    """
    claimed = dict(claims or {})
    paths = list(reports) or [str(p) for p in claimed]
    if not paths:
        raise UsageError(
            "no REPORT given" + (f" and {source} names none" if source else ""),
            hint="envlock report page REPORT... --key PUB -o DIR (or --summary DIR/summary.json)",
        )
    default = None
    if lock is not None or image is not None:
        from envlock.report import statement

        lock_dir = Path(lock) if lock is not None else None
        if lock_dir is not None:
            statement.lock_configuration(lock_dir)  # exit 2 for a folder without pylock.toml
        default = Claim(lock_dir=lock_dir, image_name=image)
    return build_page(paths, keys, claims=claimed, default=default, missing=missing, source=source)


def describe(page: Page, path: Path) -> str:
    """What `report page` prints: one line per report that did not verify, then the page."""
    lines = [f"NOT VERIFIED {r.report}: {'; '.join(r.reasons)}" for r in page.unverified]
    lines.append(f"{len(page.rows)} verified, {len(page.unverified)} not verified: {path}")
    return "\n".join(lines) + "\n"
