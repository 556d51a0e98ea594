"""Build, smoke-test, push and sign every cell of a ``ci lock`` folder.

A cell is a direct subfolder of DIR with a Dockerfile; its folder name is the
cell id and the image tag (``REPO:<cell-id>`` when pushing, else
``envlock-ci:<cell-id>``). Each cell is built, its local image (by id)
smoke-tested, and only then pushed: an image that failed never lands under its
cell tag. The report names ``REPO@<manifest digest>``; its signed smoke result
records the image id that ran, which ``verify`` compares with the pushed
manifest's config digest. A cell whose inputs did not change since the last
summary.json is reused (same image, same digest, no new signature or
attachment). The build-stage images a multi-stage build leaves are removed at
the end unless ``keep``.

Cells run in a thread pool of ``jobs`` workers (docker-py calls block); a cell
that fails is recorded with its reason and the others go on. Progress goes to a
``Progress`` sink: plain lines, each prefixed ``[cell-id]``, with a heartbeat
line for a cell silent for ``heartbeat`` seconds (bytes pushed, log lines of
the running step), or a live table on a terminal. The summary is returned and
written to DIR/summary.json (envlock.ci.summary, which owns that file).

This module is the orchestration; its parts live beside it: the options in
envlock.ci.options, the reuse of an unchanged cell in envlock.ci.reuse, the
report, the SBOM and their attaching in envlock.ci.evidence, and the progress
lines, heartbeat and short error reasons in envlock.ci.progress.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envlock.ci.evidence import (
    REPORT_NAME,
    SBOM_NAME,
    SBOM_STATEMENT_NAME,
    SMOKE_LOG_NAME,
    SMOKE_NAME,
    attach,
    make_cell_sbom,
    sign_cell_report,
)
from envlock.ci.options import CiBuildOptions
from envlock.ci.progress import LogWatch, PlainProgress, Progress, heartbeat, short_reason
from envlock.ci.reuse import cell_inputs, keyid, previous_cells, reuse
from envlock.ci.summary import CellOutcome, CiBuildSummary, write_ci_page, write_summary
from envlock.errors import EnvironmentFailure, EnvlockError, UsageError
from envlock.image.ref import ImageRef

if TYPE_CHECKING:
    from envlock.smoke.result import SmokeResult

LOCAL_REPOSITORY = "envlock-ci"
_CELL_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")  # a valid image tag


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
    from envlock.image.build import check_reference
    from envlock.image.dockerfile import check_build_args, declared_args, read_dockerfile

    dockerfile = folder / "Dockerfile"
    declared = declared_args(read_dockerfile(dockerfile))
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


def _smoke_reason(result: SmokeResult) -> str:
    failed = result.failed_checks
    if not failed:
        return f"smoke {result.status}"
    first = failed[0]
    return f"smoke FAILED: {first.name}: {first.reason[:200]}"


def run_cell(
    cell: str,
    folder: Path,
    options: CiBuildOptions,
    outcome: CellOutcome,
    progress: Progress,
    previous: Mapping[str, Any] | None = None,
) -> CellOutcome:
    """Build, smoke-test the local image, then push and sign one cell; failures are
    recorded, never raised.

    The order is the point: the smoke test runs on the image the engine just
    built (by its id), and only an image that passed is pushed under its cell
    tag, so a failing image never lands in the registry. A cell whose inputs
    (bundle files, build arguments, base image id, repository, signer) are
    those of ``previous`` (its entry in the last summary.json), and whose image
    is still where that run left it, is reused: same image, same digest, not
    re-signed, not re-attached.
    """
    from envlock.image.build import build_image
    from envlock.image.push import PushProgress, push

    started = time.perf_counter()
    outcome.started = started

    def say(line: str) -> None:
        outcome.detail = line
        outcome.said = time.monotonic()
        progress.update(outcome, line)

    try:
        outcome.stage = "build"
        outcome.inputs = cell_inputs(folder, options)
        if previous is not None and reuse(outcome, previous, options, say):
            outcome.stage = "done"
            outcome.seconds = time.perf_counter() - started
            say(f"done in {outcome.seconds:.1f} s (reused)")
            return outcome
        say("build started")
        log = LogWatch()
        outcome.pulse = lambda: f"build step {log.where}: {log.describe()}"

        def step(text: str) -> None:
            log.step(text.strip())
            say("build " + text.rstrip("\n"))

        result = build_image(
            folder,
            tag=outcome.image or outcome.tag,
            base_image=options.base_image,
            build_args=options.build_args,
            network=options.network,
            progress="steps",
            out=step,
            on_log=log.line,
        )
        outcome.image_id = result.image_id
        outcome.stage_images = stage_images(result.log)
        outcome.build = "cached" if result.fully_cached else "ok"
        outcome.steps = f"{result.cached_steps}/{result.cacheable_steps} cached"
        say(f"built {result.image_id[:19]} ({outcome.steps}, {result.seconds:.1f} s)")

        outcome.stage = "smoke"
        say(f"smoke started in {result.image_id[:19]} (the local image; pushed only if it passes)")
        from envlock.fsutil import atomic_write
        from envlock.smoke import container
        from envlock.smoke.result import SmokeResult

        # the harness's own log goes to the cell's folder, not between other cells' lines
        with open(folder / SMOKE_LOG_NAME, "w", encoding="utf-8", errors="replace") as raw:
            say(f"smoke log: {cell}/{SMOKE_LOG_NAME}")
            smoke_log = LogWatch(raw)
            outcome.pulse = lambda: f"smoke: {smoke_log.describe()}"
            document = container.run_in_image(
                outcome.image_id,  # the image just built, by id: what is pushed is what ran
                gpus=options.gpus,
                allow_cpu=options.allow_cpu,
                timeout=options.smoke_timeout,
                log=smoke_log,
                warn=say,
            )
        smoke = SmokeResult.from_dict(document)  # read once; the document is what is kept
        outcome.smoke = str(smoke.status)
        atomic_write(folder / SMOKE_NAME, json.dumps(document, indent=2) + "\n")
        say(f"smoke {outcome.smoke}")

        if options.push and smoke.passed:
            outcome.stage = "push"
            sent = PushProgress()
            outcome.pulse = lambda: f"push: {sent.line()}"
            pushed = push(
                outcome.image or outcome.tag,
                out=lambda s: say(s.rstrip("\n")),  # each layer as it lands, then the digest
                progress=sent,
            )
            outcome.digest, outcome.pinned = pushed.digest, pushed.pinned
            from envlock.image import registry

            config = registry.manifest_config_digest(pushed.pinned)
            if config != outcome.image_id:  # the tag moved between the smoke run and the push
                raise _CellFailed(
                    f"push: {pushed.pinned} has config {config}, not the image the smoke "
                    f"test ran ({outcome.image_id})"
                )
            say(f"the pushed manifest's config is the image the smoke test ran ({config[:19]})")
        elif options.push:
            say(f"not pushed: the smoke test {outcome.smoke}")
        outcome.pulse = None
        if options.sign is not None:
            outcome.stage = "sign"
            from envlock.report import envelope_bytes

            if outcome.pinned and smoke.passed:
                # before the report: it names the SBOM (sbom.cdx.json) by digest
                make_cell_sbom(options.sign, folder, outcome, say)
            if outcome.sbom is None and previous is not None and previous.get("sbom"):
                # none made this run: the report must not name the one the last run made
                (folder / SBOM_NAME).unlink(missing_ok=True)
                (folder / SBOM_STATEMENT_NAME).unlink(missing_ok=True)
            envelope = sign_cell_report(smoke, options.sign, folder, outcome)
            report = envelope_bytes(envelope.to_dict())
            atomic_write(folder / REPORT_NAME, report)
            outcome.report = f"{cell}/{REPORT_NAME}"
            outcome.signer = keyid(options.sign)
            say(f"signed {outcome.report}")
            if outcome.pinned:
                attach(envelope, report, outcome, say)
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
    outcome.pulse = None
    outcome.seconds = time.perf_counter() - started
    if not outcome.ok:
        failed_at, outcome.stage = outcome.stage, "failed"
        outcome.reason = outcome.reason or f"{failed_at} failed"
        say(f"FAILED: {outcome.reason}")
    else:
        say(f"done in {outcome.seconds:.1f} s")
    return outcome


# ---------------------------------------------------------------- build-stage images

_STAGE_FROM = re.compile(r"^Step \d+/\d+ : FROM\s", re.IGNORECASE)
_LAYER_ID = re.compile(r"^\s*---> ([0-9a-f]{12,64})\s*$")


def stage_images(log: Sequence[str]) -> tuple[str, ...]:
    """The short ids of the images that end each build stage but the last one, read
    from the classic builder's log (the id it prints after each step): the
    build-stage images the engine keeps untagged after a multi-stage build."""
    ends: list[str] = []
    last: str | None = None
    seen_from = False
    for line in log:
        if _STAGE_FROM.match(line):
            if seen_from and last:
                ends.append(last)
            seen_from = True
            last = None
            continue
        m = _LAYER_ID.match(line)
        if m:
            last = m.group(1)
    return tuple(dict.fromkeys(ends))


def remove_stage_images(outcomes: Sequence[CellOutcome], progress: Progress) -> None:
    """Remove each cell's build-stage images (and their untagged parent layers);
    an image still tagged or used is left, and said so."""
    from envlock.image import engine

    wanted = [(o, i) for o in outcomes for i in o.stage_images]
    if not wanted:
        return
    try:
        with engine.session("while removing build-stage images", timeout=120) as client:
            for outcome, short_id in wanted:
                try:
                    image = client.images.get(short_id)
                    if image.tags:
                        continue
                    size = (image.attrs or {}).get("Size") or 0
                    client.images.remove(image.id, noprune=False)
                    outcome.removed.append(image.id)
                    progress.update(
                        outcome,
                        f"removed build-stage image {image.id[:19]} ({size / 1e6:.0f} MB; "
                        "--keep keeps it)",
                    )
                except Exception as e:  # noqa: BLE001 - gone already, or in use: noted
                    progress.update(
                        outcome, f"build-stage image {short_id} left: {short_reason(e)}"
                    )
    except EnvlockError as e:
        for o in outcomes:
            if o.stage_images:
                progress.update(o, f"build-stage images left: {e.message}")


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
    with _building(directory):
        engine.connect(timeout=30).close()  # exit 3 now if the engine is not there
        return _build_locked(directory, options, cells, repository, progress, outcomes)


LOCK_NAME = ".envlock-ci-build.lock"


@contextlib.contextmanager
def _building(directory: Path) -> Iterator[None]:
    """The cells folder's writer lock (``DIR/.envlock-ci-build.lock``, an
    exclusive ``flock``): a second ``ci build`` of the same folder is exit 3 at
    once instead of two runs writing the cells' results and DIR/summary.json at
    the same time (issue #38). The file stays (removing a lock file races)."""
    import fcntl

    path = directory / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError as e:
        raise EnvironmentFailure(
            f"cannot open {path}: {e.strerror or e}", hint="check the folder's permissions"
        ) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise EnvironmentFailure(
                f"another envlock ci build is working on {directory}",
                hint="wait for it to finish, then run ci build again",
            ) from None
        yield
    finally:
        os.close(fd)


def _build_locked(
    directory: Path,
    options: CiBuildOptions,
    cells: list[tuple[str, Path]],
    repository: ImageRef | None,
    progress: Progress | None,
    outcomes: list[CellOutcome] | None,
) -> CiBuildSummary:
    sink: Progress = progress or PlainProgress()
    refs = [(cell, folder, cell_ref(repository, cell)) for cell, folder in cells]
    made = [CellOutcome(cell, folder, str(ref), image=ref) for cell, folder, ref in refs]
    if outcomes is not None:
        outcomes.extend(made)
    before = previous_cells(directory)
    started = time.perf_counter()
    stop = threading.Event()
    beat = threading.Thread(
        target=heartbeat, args=(made, sink, options.heartbeat, stop), daemon=True
    )
    beat.start()
    try:
        with ThreadPoolExecutor(max_workers=options.jobs, thread_name_prefix="envlock-ci") as pool:
            futures = [
                pool.submit(run_cell, o.cell, o.folder, options, o, sink, before.get(o.cell))
                for o in made
            ]
            for future in futures:
                future.result()
    finally:
        stop.set()
        beat.join()
    if not options.keep:
        remove_stage_images(made, sink)
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
