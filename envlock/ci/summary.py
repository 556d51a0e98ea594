"""``envlock ci build``'s summary.json: its schema, written and read here only.

``CellOutcome`` and ``CiBuildSummary`` are what the file holds (schema
``envlock.ci-build/v1``); ``write_summary`` writes it into DIR, ``read_summary``
reads it back as what each cell's report claims (its lock, its pushed image):
the report page (``envlock report page --summary``, and ``write_ci_page`` after
``ci build --sign``) is given those claims and never reads this file itself.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from envlock.errors import DataError, EnvlockError

if TYPE_CHECKING:
    from envlock.image.ref import ImageRef
    from envlock.report.page_rows import Claim

SCHEMA = "envlock.ci-build/v1"
SUMMARY_NAME = "summary.json"
PAGE_FOLDER = "report-page"  # DIR/report-page/index.html after `ci build --sign`


class CellOutcomeDict(TypedDict):
    """One cell of summary.json."""

    cell: str
    ok: bool
    stage: str
    tag: str
    build: str
    image_id: str | None
    steps: str
    digest: str | None
    pinned: str | None
    smoke: str | None
    report: str | None
    attached: str | None
    sbom: str | None  # sbom.cdx.json relative to DIR (#28): a pushed, signed cell's SBOM
    sbom_digest: str | None  # sha256:<hex>, as the report names it
    sbom_attached: str | None  # REPO@sha256:<bundle manifest>
    seconds: float
    reason: str | None
    error: str | None
    inputs: str | None
    signer: str | None
    removed: list[str]


class SummaryDict(TypedDict):
    """ci build's summary.json (``SCHEMA``)."""

    schema: str
    directory: str
    repository: str | None
    jobs: int
    ok: bool
    failed: list[str]
    seconds: float
    cells: list[CellOutcomeDict]


@dataclass
class CellOutcome:
    """What happened to one cell; ``stage`` is where it is (or where it failed)."""

    cell: str
    folder: Path
    tag: str
    stage: str = "queued"  # queued, build, smoke, push, sign, done, failed
    build: str = "-"  # ok, cached, reused (unchanged since the last run), failed, -
    image_id: str | None = None
    steps: str = ""  # "12/14 cached"
    digest: str | None = None
    pinned: ImageRef | None = None  # REPO@sha256:<digest>, once pushed (Pushed.pinned)
    smoke: str | None = None  # PASSED, WARNED, FAILED
    report: str | None = None  # path relative to DIR
    attached: str | None = None  # REPO:sha256-<hex>.att, when the registry took the report
    sbom: str | None = None  # the SBOM (sbom.cdx.json), path relative to DIR: pushed and signed
    sbom_digest: str | None = None  # sha256:<hex> of that file, as the report names it
    sbom_attached: str | None = None  # REPO@sha256:<bundle manifest>, when the registry took it
    seconds: float = 0.0
    reason: str | None = None  # short: for the summary table
    error: str | None = None  # the whole message (with a failed build's last log lines)
    detail: str = ""  # the latest progress line, for the live table
    started: float | None = None
    image: ImageRef | None = None  # ``tag`` parsed, as the stages are handed it
    inputs: str | None = None  # sha256 of what decides the image (ci.reuse.cell_inputs)
    signer: str | None = None  # keyid of the key that signed the report
    stage_images: tuple[str, ...] = ()  # build-stage images the build left (short ids)
    removed: list[str] = field(default_factory=list)  # those removed (no --keep)
    said: float | None = None  # time.monotonic() of the cell's latest line (heartbeat)
    pulse: Callable[[], str] | None = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.stage == "done"

    def to_dict(self) -> CellOutcomeDict:
        return {
            "cell": self.cell,
            "ok": self.ok,
            "stage": self.stage,
            "tag": self.tag,
            "build": self.build,
            "image_id": self.image_id,
            "steps": self.steps,
            "digest": self.digest,
            "pinned": str(self.pinned) if self.pinned else None,
            "smoke": self.smoke,
            "report": self.report,
            "attached": self.attached,
            "sbom": self.sbom,
            "sbom_digest": self.sbom_digest,
            "sbom_attached": self.sbom_attached,
            "seconds": round(self.seconds, 1),
            "reason": self.reason,
            "error": self.error,
            "inputs": self.inputs,
            "signer": self.signer,
            "removed": list(self.removed),
        }


@dataclass(frozen=True)
class CiBuildSummary:
    directory: Path
    repository: str | None
    cells: tuple[CellOutcome, ...]
    seconds: float
    jobs: int

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.cells)

    @property
    def failed(self) -> tuple[CellOutcome, ...]:
        return tuple(c for c in self.cells if not c.ok)

    def to_dict(self) -> SummaryDict:
        return {
            "schema": SCHEMA,
            "directory": str(self.directory),
            "repository": self.repository,
            "jobs": self.jobs,
            "ok": self.ok,
            "failed": [c.cell for c in self.failed],
            "seconds": round(self.seconds, 1),
            "cells": [c.to_dict() for c in self.cells],
        }


def write_summary(summary: CiBuildSummary) -> Path:
    from envlock.fsutil import atomic_write

    path = summary.directory / SUMMARY_NAME
    atomic_write(path, json.dumps(summary.to_dict(), indent=2) + "\n")
    return path


def read_summary(path: Path) -> tuple[dict[Path, Claim], list[dict[str, str]]]:
    """ci build's summary.json: {report path: what it claims}, and cells without a report.

    Report paths in the summary are relative to the summary's folder; each
    cell's folder is its lock, its ``pinned`` ref (or image id) its image.
    """
    from envlock.fsutil import read_input
    from envlock.readers import parse_json
    from envlock.report.page_rows import Claim

    hint = "give the summary.json 'envlock ci build' wrote"
    data = read_input(path, "summary", hint=hint)
    doc = parse_json(data, str(path), hint=hint, error=DataError)
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise DataError(
            f"{path}: not a ci build summary (schema {SCHEMA!r})",
            hint="give the summary.json 'envlock ci build' wrote",
        )
    base = path.parent
    claims: dict[Path, Claim] = {}
    missing: list[dict[str, str]] = []
    for i, cell in enumerate(doc.get("cells") or []):
        if not isinstance(cell, dict) or not isinstance(cell.get("cell"), str):
            raise DataError(f"{path}: cells[{i}]: not a cell", hint="re-run 'envlock ci build'")
        name = cell["cell"]
        report = cell.get("report")
        for part, value in (("cell", name), ("report", report)):
            if isinstance(value, str) and "\0" in value:  # no path holds one
                raise DataError(
                    f"{path}: cells[{i}].{part}: holds a NUL character ({value!r})",
                    hint="give the summary.json 'envlock ci build' wrote",
                )
        if not isinstance(report, str) or not report:
            reason = cell.get("reason") or cell.get("stage") or "no report"
            missing.append({"cell": name, "reason": str(reason)})
            continue
        folder = base / name
        pinned, image_id = cell.get("pinned"), cell.get("image_id")
        try:
            where = (base / report).resolve()
        except (OSError, RuntimeError, ValueError) as e:  # RuntimeError: a link loop (< 3.13)
            raise DataError(
                f"{path}: cells[{i}].report: {report!r} cannot be followed ({e})",
                hint="give the summary.json 'envlock ci build' wrote",
            ) from None
        claims[where] = Claim(
            cell=name,
            lock_dir=folder if (folder / "pylock.toml").is_file() else None,
            image_ref=pinned if isinstance(pinned, str) and pinned else None,
            image_id=image_id if isinstance(image_id, str) and not pinned else None,
        )
    return claims, missing


def summary_rows(summary: CiBuildSummary) -> list[list[str]]:
    """The summary table's rows: cell, build, push digest, smoke, report, seconds, reason."""
    from envlock.output import short

    rows = []
    for c in summary.cells:
        digest = c.digest[:19] + "..." if c.digest else "-"
        rows.append(
            [
                c.cell,
                c.build,
                digest,
                c.smoke or "-",
                c.report or "-",
                f"{c.seconds:.1f}",
                short(c.reason or ""),
            ]
        )
    return rows


SUMMARY_HEADERS = ("cell", "build", "push digest", "smoke", "report", "seconds", "reason")

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|~])")


def md_text(value: str) -> str:
    """Text as one Markdown table cell: on one line, every character Markdown (or
    the HTML GitHub allows in it) would act on escaped with a backslash."""
    return _MD_SPECIAL.sub(r"\\\1", " ".join(value.split()))


def md_code(value: str) -> str:
    """A value shown as code (a reference, a digest): backticks never occur in one."""
    return f"`{value}`" if value and "`" not in value and "|" not in value else md_text(value)


def markdown_summary(summary: CiBuildSummary) -> str:
    """The summary as GitHub-flavoured Markdown, for ``$GITHUB_STEP_SUMMARY``: one
    row per cell (its pushed reference and a pull-by-digest command), then totals."""
    failed = len(summary.failed)
    lines = [
        "### envlock ci build",
        "",
        f"{len(summary.cells)} cells, {len(summary.cells) - failed} ok, {failed} failed, "
        f"{summary.seconds:.1f} s (--jobs {summary.jobs})",
        "",
        "| cell | result | build | smoke | image | report | seconds |",
        "| --- | --- | --- | --- | --- | --- | ---: |",
    ]
    for c in summary.cells:
        result = "ok" if c.ok else "FAILED: " + (c.reason or c.stage)
        image = md_code(str(c.pinned)) if c.pinned else md_code(c.image_id or "") or "-"
        lines.append(
            "| "
            + " | ".join(
                [
                    md_code(c.cell),
                    md_text(result),
                    md_text(c.build),
                    md_text(c.smoke or "-"),
                    image,
                    md_code(c.report) if c.report else "-",
                    f"{c.seconds:.1f}",
                ]
            )
            + " |"
        )
    pulls = [f"docker pull {c.pinned}" for c in summary.cells if c.pinned]
    if pulls:
        lines += ["", "Pull by digest:", "", "```sh", *pulls, "```"]
    return "\n".join(lines) + "\n"


def write_ci_page(directory: Path, private_key: Path) -> Path | None:
    """After `ci build --sign`: DIR/report-page/ from DIR/summary.json, verified with
    the public key beside the private one (NAME.pub.pem; derived from the private
    key when that file is absent). A failure is noted on stderr, never raised:
    the reports and the summary are the record."""
    from envlock.report import keys as keymod
    from envlock.report.page import build_page, write_page
    from envlock.report.page_rows import TrustedKey, load_keys

    summary = directory / SUMMARY_NAME
    try:
        pub_path = keymod.key_paths(private_key)[1]
        if pub_path.is_file():
            trusted = load_keys([str(pub_path)])
        else:
            pub = keymod.load_private(private_key).public_key()
            trusted = [TrustedKey(f"{private_key} (public part)", pub, keymod.keyid(pub))]
        claims, missing = read_summary(summary)
        page = build_page(
            [str(p) for p in claims], trusted, claims=claims, missing=missing, source=str(summary)
        )
        path = write_page(directory / PAGE_FOLDER, page, title=f"envlock ci build {directory}")
    except EnvlockError as e:
        sys.stderr.write(f"envlock: note: no report page written: {e.message}\n")
        return None
    sys.stderr.write(
        f"report page: {path} ({len(page.rows)} verified, {len(page.unverified)} not verified)\n"
    )
    return path
