"""Build, push, smoke-test and sign every cell of a ``ci lock`` folder.

A cell is a direct subfolder of DIR with a Dockerfile; its folder name is the
cell id and the image tag (``REPO:<cell-id>`` when pushing, else
``envlock-ci:<cell-id>``). Cells run in a thread pool of ``jobs`` workers
(docker-py calls block); a cell that fails is recorded with its reason and the
others go on. Progress goes to a ``Progress`` sink: plain lines
(``[cell] build step 3/12 ...``) or a live table on a terminal. The summary is
returned and written to DIR/summary.json (envlock.ci.summary, which owns that
file).
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from envlock.ci.summary import CellOutcome, CiBuildSummary, write_ci_page, write_summary
from envlock.errors import EnvlockError, UsageError
from envlock.image.ref import ImageRef

if TYPE_CHECKING:
    from envlock.report.dsse import Envelope
    from envlock.smoke.result import SmokeResult

LOCAL_REPOSITORY = "envlock-ci"
REPORT_NAME = "report.intoto.json"  # beside the bundle's files, as `smoke --sign -o` suggests
SMOKE_NAME = "smoke.json"
SMOKE_LOG_NAME = "smoke.log"
_CELL_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")  # a valid image tag


@dataclass(frozen=True)
class CiBuildOptions:
    jobs: int = 1
    push: str | None = None  # a repository with its registry host, no tag
    sign: Path | None = None  # private key
    base_image: str | None = None
    build_args: Mapping[str, str] = field(default_factory=dict)
    allow_cpu: bool = False
    network: str | None = None
    gpus: str = "all"
    smoke_timeout: float = 3600


class Progress(Protocol):
    def update(self, outcome: CellOutcome, line: str | None = None) -> None: ...


class PlainProgress:
    """One line per event on a stream: ``[cell-id] build step 3/12 RUN ...``."""

    def __init__(self, write: Callable[[str], Any] | None = None) -> None:
        self._write = write or _stderr
        self._lock = threading.Lock()

    def update(self, outcome: CellOutcome, line: str | None = None) -> None:
        if line:
            with self._lock:
                self._write(f"[{outcome.cell}] {line}\n")


def _stderr(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()


# ---------------------------------------------------------------- input


def find_cells(directory: Path) -> list[tuple[str, Path]]:
    """(cell id, folder) of every direct subfolder with a Dockerfile, sorted; UsageError if none."""
    if not directory.is_dir():
        raise UsageError(
            f"{directory}: no such folder"
            if not directory.exists()
            else f"{directory}: not a folder",
            hint="pass the folder `envlock ci lock SPEC -o DIR` wrote",
        )
    cells = sorted(
        (p.name, p) for p in directory.iterdir() if p.is_dir() and (p / "Dockerfile").is_file()
    )
    if not cells:
        raise UsageError(
            f"{directory}: no cells (no subfolder with a Dockerfile)",
            hint="write one bundle per cell with `envlock ci lock SPEC -o DIR`",
        )
    for name, _ in cells:
        if not _CELL_ID.match(name):
            raise UsageError(
                f"{directory / name}: the folder name {name!r} cannot be an image tag",
                hint="name cell folders with letters, digits, '_', '.' and '-' (128 at most)",
            )
    return cells


def check_repository(value: str) -> ImageRef:
    """--push REPO: a repository with a registry host, without tag or digest.

    The one parse of the reference a pushed cell is named by: the cell's tag,
    the pushed digest, the smoke run, the report and the registry are all
    handed ``ImageRef`` objects made from it.
    """
    from envlock.image import ref as imageref

    ref = imageref.parse(value, "--push")
    if ref.registry is None or ref.tag or ref.digest:
        raise UsageError(
            f"--push {value!r}: give a repository with its registry host and no tag "
            "(each cell is pushed as REPO:<cell-id>)",
            hint="e.g. --push ghcr.io/OWNER/tf or --push 127.0.0.1:5000/team/tf",
        )
    return ref


def cell_ref(repository: ImageRef | None, cell: str) -> ImageRef:
    """``REPO:<cell-id>`` (``envlock-ci:<cell-id>`` without --push); a cell id is a valid tag."""
    return (repository or ImageRef(LOCAL_REPOSITORY)).with_tag(cell)


def check_cell(folder: Path, options: CiBuildOptions) -> None:
    """The checks `envlock build` makes before it contacts the engine, for one cell."""
    from envlock.image.build import check_build_args, check_reference, declared_args

    dockerfile = folder / "Dockerfile"
    declared = declared_args(dockerfile.read_text(encoding="utf-8", errors="replace"))
    args = dict(options.build_args)
    if options.base_image is not None:
        check_reference(options.base_image, "--base-image")
        if "BASE_IMAGE" not in declared:
            raise UsageError(
                f"{dockerfile}: takes no BASE_IMAGE build argument, so --base-image cannot apply",
                hint="re-render the cell with envlock, or drop --base-image",
            )
        args["BASE_IMAGE"] = options.base_image
    check_build_args(dockerfile, declared, args)


# ---------------------------------------------------------------- the run


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


def _attach(
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


def short_reason(error: BaseException) -> str:
    """One short line for the summary table: for a failed step, which step and how
    (the fields of ``BuildFailed``, never its message parsed again)."""
    from envlock.image.build import BuildFailed

    if isinstance(error, BuildFailed) and error.step is not None:
        instruction = error.instruction or ""
        if len(instruction) > 40:
            instruction = instruction[:37] + "..."
        lines = error.reason.strip().splitlines()
        how = (
            f"exit code {error.step_exit_code}"
            if error.step_exit_code is not None
            else (lines[0] if lines else "")
        )
        return f"step {error.step} {instruction}: {how}"[:200]
    lines = str(error).strip().splitlines()
    first = lines[0] if lines else type(error).__name__
    return first[:200]


def _smoke_reason(result: SmokeResult) -> str:
    failed = result.failed_checks
    if not failed:
        return f"smoke {result.status}"
    first = failed[0]
    return f"smoke FAILED: {first.name}: {first.reason[:200]}"


def run_cell(
    cell: str, folder: Path, options: CiBuildOptions, outcome: CellOutcome, progress: Progress
) -> CellOutcome:
    """Build, push, smoke-test and sign one cell; failures are recorded, never raised."""
    from envlock.image.build import build_image
    from envlock.image.push import push

    started = time.perf_counter()
    outcome.started = started

    def say(line: str) -> None:
        outcome.detail = line
        progress.update(outcome, line)

    try:
        outcome.stage = "build"
        say("build started")
        result = build_image(
            folder,
            tag=outcome.image or outcome.tag,
            base_image=options.base_image,
            build_args=options.build_args,
            network=options.network,
            progress="steps",
            out=lambda s: say("build " + s.rstrip("\n")),
        )
        outcome.image_id = result.image_id
        outcome.build = "cached" if result.fully_cached else "ok"
        outcome.steps = f"{result.cached_steps}/{result.cacheable_steps} cached"
        say(f"built {result.image_id[:19]} ({outcome.steps}, {result.seconds:.1f} s)")
        if options.push:
            outcome.stage = "push"
            pushed = push(
                outcome.image or outcome.tag,
                out=lambda s: say(s.rstrip("\n")) if s.startswith("pushed") else None,
            )
            outcome.digest, outcome.pinned = pushed.digest, pushed.pinned
        outcome.stage = "smoke"
        say("smoke started")
        from envlock.fsutil import atomic_write
        from envlock.smoke import container
        from envlock.smoke.result import SmokeResult

        # the harness's own log goes to the cell's folder, not between other cells' lines
        with open(folder / SMOKE_LOG_NAME, "w", encoding="utf-8", errors="replace") as log:
            say(f"smoke log: {cell}/{SMOKE_LOG_NAME}")
            document = container.run_in_image(
                outcome.pinned or outcome.image or outcome.tag,  # a pushed cell: by digest
                gpus=options.gpus,
                allow_cpu=options.allow_cpu,
                timeout=options.smoke_timeout,
                log=log,
            )
        smoke = SmokeResult.from_dict(document)  # read once; the document is what is kept
        outcome.smoke = str(smoke.status)
        atomic_write(folder / SMOKE_NAME, json.dumps(document, indent=2) + "\n")
        say(f"smoke {outcome.smoke}")
        if options.sign is not None:
            outcome.stage = "sign"
            from envlock.report import envelope_bytes

            envelope = sign_cell_report(smoke, options.sign, folder, outcome)
            report = envelope_bytes(envelope.to_dict())
            atomic_write(folder / REPORT_NAME, report)
            outcome.report = f"{cell}/{REPORT_NAME}"
            say(f"signed {outcome.report}")
            if outcome.pinned:
                _attach(envelope, report, outcome, say)
        if not smoke.passed:
            outcome.stage = "smoke"
            raise _CellFailed(_smoke_reason(smoke))
        outcome.stage = "done"
    except _CellFailed as e:
        outcome.reason = str(e)
    except EnvlockError as e:
        outcome.reason = f"{outcome.stage}: {short_reason(e)}"
        outcome.error = str(e) + (f"\nhint: {e.hint}" if e.hint else "")
        if outcome.stage == "build":
            outcome.build = "failed"
    except Exception as e:  # noqa: BLE001 - one cell's surprise must not stop the others
        outcome.reason = f"{outcome.stage}: {type(e).__name__}: {short_reason(e)}"
        outcome.error = f"{type(e).__name__}: {e}"
        if outcome.stage == "build":
            outcome.build = "failed"
    outcome.seconds = time.perf_counter() - started
    if not outcome.ok:
        failed_at, outcome.stage = outcome.stage, "failed"
        outcome.reason = outcome.reason or f"{failed_at} failed"
        say(f"FAILED: {outcome.reason}")
    else:
        say(f"done in {outcome.seconds:.1f} s")
    return outcome


class _CellFailed(Exception):
    """A cell's check failed (its smoke run); the reason is the message."""


def build_cells(
    directory: Path,
    options: CiBuildOptions,
    *,
    progress: Progress | None = None,
    outcomes: list[CellOutcome] | None = None,
) -> CiBuildSummary:
    """Run every cell of ``directory``; write DIR/summary.json; return the summary.

    Bad input (no cells, a bad --push, a build argument a cell's Dockerfile does
    not declare) raises UsageError before anything is built; an engine that
    cannot be reached raises EnvironmentFailure. A cell that fails is recorded.
    ``outcomes``, when given, is filled with the cells' live outcomes before the
    run starts (a live view reads them).
    """
    from envlock.image import engine

    if options.jobs < 1:
        raise UsageError(f"--jobs {options.jobs}: must be at least 1", hint="--jobs 2")
    cells = find_cells(directory)
    repository = check_repository(options.push) if options.push else None
    for _, folder in cells:
        check_cell(folder, options)
    if options.sign is not None:
        from envlock.report.keys import load_private

        load_private(options.sign)  # a bad key is exit 2 before the first build
    engine.connect(timeout=30).close()  # exit 3 now if the engine is not there
    sink: Progress = progress or PlainProgress()
    refs = [(cell, folder, cell_ref(repository, cell)) for cell, folder in cells]
    made = [CellOutcome(cell, folder, str(ref), image=ref) for cell, folder, ref in refs]
    if outcomes is not None:
        outcomes.extend(made)
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=options.jobs, thread_name_prefix="envlock-ci") as pool:
        futures = [pool.submit(run_cell, o.cell, o.folder, options, o, sink) for o in made]
        for future in futures:
            future.result()
    summary = CiBuildSummary(
        directory=directory,
        repository=repository.repository if repository else None,
        cells=tuple(made),
        seconds=time.perf_counter() - started,
        jobs=options.jobs,
    )
    write_summary(summary)
    if options.sign is not None:  # every signed report verified, as one page: DIR/report-page/
        write_ci_page(directory, options.sign)
    return summary
