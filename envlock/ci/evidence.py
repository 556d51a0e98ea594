"""The evidence ``envlock ci build`` leaves for a cell, signed and attached.

The names of the files it writes into a cell's folder (the smoke result and
log, the signed report, the SBOM and its signed statement), the report's
signature (``sign_cell_report``: which subject it names), the SBOM of a
pushed cell (``make_cell_sbom``), and the attaching of both to the pushed
image, where a registry that refuses is noted, never a failed cell.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from envlock.ci.progress import short_reason
from envlock.errors import EnvlockError

if TYPE_CHECKING:
    from envlock.ci.summary import CellOutcome
    from envlock.report.dsse import Envelope
    from envlock.smoke.result import SmokeResult

REPORT_NAME = "report.intoto.json"  # beside the bundle's files, as `smoke --sign -o` suggests
SMOKE_NAME = "smoke.json"
SMOKE_LOG_NAME = "smoke.log"
SBOM_NAME = "sbom.cdx.json"  # envlock.report.sbom.FILE: the report names it by digest (#28)
SBOM_STATEMENT_NAME = "sbom.intoto.json"  # the signed SBOM, as attached

# what ci build writes into a cell's folder: never part of its inputs
OUTPUT_NAMES = frozenset({REPORT_NAME, SMOKE_NAME, SMOKE_LOG_NAME, SBOM_NAME, SBOM_STATEMENT_NAME})


def sign_cell_report(
    result: SmokeResult, key: Path, folder: Path, outcome: CellOutcome
) -> Envelope:
    """The signed report of one cell's smoke result (a DSSE envelope).

    The one place that decides the report's subject: a pushed cell's report
    names REPO@sha256:<manifest digest> (it verifies on any machine, and a
    cached rebuild does not invalidate it); a local one the image id, named by
    its tag.
    """
    from envlock.report import sign_envelope

    lock_dir = folder if (folder / "pylock.toml").is_file() else None
    if outcome.pinned:
        return sign_envelope(
            result, key, lock_dir=lock_dir, image_id=None, image_ref=outcome.pinned
        )
    return sign_envelope(
        result, key, lock_dir=lock_dir, image_id=outcome.image_id, image_name=outcome.tag
    )


def attach(
    envelope: Envelope, report: bytes, outcome: CellOutcome, say: Callable[[str], None]
) -> None:
    """Attach the report to the pushed image (cosign's layout); a registry that
    refuses is noted, not a failed cell: the report file is the record."""
    from envlock.report.attach import attach_report

    assert outcome.pinned is not None
    try:
        outcome.attached = attach_report(
            envelope, outcome.pinned, data=report, where=str(outcome.report)
        )
        say(f"attached the report as {outcome.attached}")
    except EnvlockError as e:
        outcome.attached = None
        say(f"report not attached to the registry: {short_reason(e)}")


def make_cell_sbom(
    key: Path, folder: Path, outcome: CellOutcome, say: Callable[[str], None]
) -> None:
    """The SBOM of a pushed cell (issue #28): the lock's closure and the dpkg
    packages of the image the smoke test ran (by id), written atomically to
    ``sbom.cdx.json`` in the cell's folder, signed as an in-toto statement
    about ``REPO@sha256:<manifest digest>`` (``sbom.intoto.json``) and attached
    beside the report. A cell whose SBOM cannot be made (no readable
    pylock.toml, the engine failing) or attached is noted, not failed, as a
    report the registry refuses is: the report then names no SBOM, or names
    one the registry lacks (``verify --from-registry`` says so)."""
    import envlock
    from envlock.fsutil import atomic_write
    from envlock.lock.pylock import read_lock
    from envlock.report import envelope_bytes, sbom, statement
    from envlock.report.attach import attach_evidence
    from envlock.report.keys import load_private

    assert outcome.pinned is not None and outcome.image_id is not None
    try:
        packages = sbom.image_packages(outcome.image_id)  # the image that ran
        # the Python components are the image's own pylock.toml, the cell's lock checked
        locked = sbom.image_lock(
            packages, outcome.image_id, read_lock(folder), f"{outcome.cell}/pylock.toml"
        )
        doc = sbom.make_sbom(
            locked,
            packages,
            image=str(outcome.pinned),
            envlock_version=envlock.__version__,
            created=statement.now_rfc3339(),
        )
        envelope = sbom.sign_sbom(doc, load_private(key), outcome.pinned)
    except EnvlockError as e:
        say(f"no SBOM: {short_reason(e)}")
        return
    atomic_write(folder / SBOM_NAME, sbom.sbom_bytes(doc))
    data = envelope_bytes(envelope.to_dict())
    atomic_write(folder / SBOM_STATEMENT_NAME, data)
    outcome.sbom = f"{outcome.cell}/{SBOM_NAME}"
    outcome.sbom_digest = f"sha256:{sbom.sbom_digest(doc)}"
    say(
        f"SBOM {outcome.sbom} ({len(locked.packages)} Python, {len(packages.packages)} OS "
        f"packages; {outcome.sbom_digest[:19]}), signed as {outcome.cell}/{SBOM_STATEMENT_NAME}"
    )
    try:
        attached = attach_evidence(
            envelope, outcome.pinned, data=data, where=f"{outcome.cell}/{SBOM_STATEMENT_NAME}"
        )
        outcome.sbom_attached = attached.manifest
        say(f"attached the SBOM as {attached.manifest}")
    except EnvlockError as e:
        outcome.sbom_attached = None
        say(f"SBOM not attached to the registry: {short_reason(e)}")
