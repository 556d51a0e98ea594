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
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
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
SBOM_NAME = "sbom.cdx.json"  # envlock.report.sbom.FILE: the report names it by digest (#28)
SBOM_STATEMENT_NAME = "sbom.intoto.json"  # the signed SBOM, as attached
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
    keep: bool = False  # keep the build-stage images (removed by default)
    heartbeat: float = 30.0  # seconds of silence before a cell says what it is doing


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
        locked = read_lock(folder)
        packages = sbom.image_packages(outcome.image_id)  # the image that ran
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
        if previous is not None and _reuse(outcome, previous, options, say):
            outcome.stage = "done"
            outcome.seconds = time.perf_counter() - started
            say(f"done in {outcome.seconds:.1f} s (reused)")
            return outcome
        say("build started")
        log = _LogWatch()
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
            smoke_log = _LogWatch(raw)
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
            outcome.signer = _keyid(options.sign)
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
    outcome.pulse = None
    outcome.seconds = time.perf_counter() - started
    if not outcome.ok:
        failed_at, outcome.stage = outcome.stage, "failed"
        outcome.reason = outcome.reason or f"{failed_at} failed"
        say(f"FAILED: {outcome.reason}")
    else:
        say(f"done in {outcome.seconds:.1f} s")
    return outcome


# ---------------------------------------------------------------- reuse of an unchanged cell

# what ci build writes into a cell's folder: never part of its inputs
OUTPUT_NAMES = frozenset({REPORT_NAME, SMOKE_NAME, SMOKE_LOG_NAME, SBOM_NAME, SBOM_STATEMENT_NAME})


def cell_inputs(folder: Path, options: CiBuildOptions) -> str:
    """sha256 over what decides a cell's image: the files of its build context as
    the engine is sent them (docker-py's own .dockerignore filter), the
    Dockerfile, the build arguments, the base image as the engine has it (its
    id and repo digests), the repository it is pushed to and the RUN network.
    ci build's own outputs in the folder (smoke.json, smoke.log, the report,
    the SBOM and its signed statement) never count, even where no .dockerignore
    keeps them out of the context."""
    import hashlib

    from docker.utils.build import exclude_paths

    from envlock.image.build import declared_args, final_base

    ignore = folder / ".dockerignore"
    patterns = []
    if ignore.is_file():  # as docker-py's APIClient.build reads it
        lines = ignore.read_text(encoding="utf-8", errors="replace").splitlines()
        patterns = [x.strip() for x in lines if x.strip() and not x.strip().startswith("#")]
    names = sorted(set(exclude_paths(str(folder), patterns, dockerfile="Dockerfile")))
    files: dict[str, str] = {}
    for name in [*names, "Dockerfile"]:
        if name in OUTPUT_NAMES:
            continue
        path = folder / name
        if path.is_file() and not path.is_symlink():
            files[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    text = (folder / "Dockerfile").read_text(encoding="utf-8", errors="replace")
    declared = declared_args(text)
    args = {k: v for k, v in declared.items() if v is not None} | dict(options.build_args)
    if options.base_image is not None:
        args["BASE_IMAGE"] = options.base_image
    base = final_base(text, args) or args.get("BASE_IMAGE")
    doc = {
        "files": files,
        "build_args": dict(sorted(options.build_args.items())),
        "base_image": options.base_image,
        "base": _base_identity(base),
        "push": options.push,
        "network": options.network,
    }
    blob = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    return "sha256:" + hashlib.sha256(blob).hexdigest()


def _base_identity(base: str | None) -> dict[str, Any] | None:
    """The base image as the engine holds it: id and repo digests (None: not local)."""
    if not base:
        return None
    from envlock.image import engine

    try:
        with engine.session("while reading the base image", timeout=60) as client:
            image = client.images.get(base)
            attrs = image.attrs or {}
            return {
                "name": base,
                "id": image.id,
                "repo_digests": sorted(attrs.get("RepoDigests") or []),
            }
    except Exception:  # noqa: BLE001 - not local (the build pulls it): never reused
        return {"name": base, "id": None, "nonce": time.time_ns()}


def _keyid(key: Path) -> str:
    from envlock.report import keys as keymod

    return keymod.keyid(keymod.load_private(key).public_key())


def _reuse(
    outcome: CellOutcome,
    previous: Mapping[str, Any],
    options: CiBuildOptions,
    say: Callable[[str], None],
) -> bool:
    """Take the last run's image, digest and report when nothing changed and the
    image is still where it was left; False (and the cell is built) otherwise."""
    if not previous.get("ok") or previous.get("inputs") != outcome.inputs:
        return False
    image_id = previous.get("image_id")
    if not isinstance(image_id, str) or not image_id.startswith("sha256:"):
        return False
    signer = _keyid(options.sign) if options.sign is not None else None
    report = previous.get("report")
    if signer is not None and (
        previous.get("signer") != signer
        or not isinstance(report, str)
        or not (outcome.folder.parent / report).is_file()
    ):
        return False
    pinned_text = previous.get("pinned")
    if options.push:
        if not isinstance(pinned_text, str) or not pinned_text:
            return False
        from envlock.image import ref as imageref
        from envlock.image import registry

        pinned = imageref.parse(pinned_text, "summary.json pinned")
        if pinned.repository != (outcome.image.repository if outcome.image else None):
            return False
        if registry.manifest_config_digest(pinned) != image_id:
            return False  # gone from the registry, or no longer that image
        if outcome.image is None or registry.tag_digest(outcome.image) != pinned.digest:
            return False  # the cell's tag was moved: push it again
        outcome.pinned, outcome.digest = pinned, pinned.digest
        outcome.attached = previous.get("attached")
        if signer is not None:  # the SBOM the kept report names, as the last run left it
            outcome.sbom = _text(previous.get("sbom"))
            outcome.sbom_digest = _text(previous.get("sbom_digest"))
            outcome.sbom_attached = _text(previous.get("sbom_attached"))
    elif not _local_image(image_id):
        return False
    outcome.image_id = image_id
    outcome.build = "reused"
    outcome.steps = str(previous.get("steps") or "")
    outcome.smoke = previous.get("smoke")
    outcome.report = report if signer is not None else None
    outcome.signer = signer
    where = str(outcome.pinned) if outcome.pinned else image_id[:19]
    say(
        f"unchanged since the last run (inputs {str(outcome.inputs)[:19]}): reusing {where}, "
        "not rebuilt, not re-signed, not re-attached"
    )
    return True


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _local_image(image_id: str) -> bool:
    from envlock.image import engine

    try:
        with engine.session("while looking for the image", timeout=60) as client:
            client.images.get(image_id)
            return True
    except Exception:  # noqa: BLE001 - gone (or unreadable): build again
        return False


def previous_cells(directory: Path) -> dict[str, dict[str, Any]]:
    """The last summary.json's cells by id ({} when there is none or it cannot be read)."""
    from envlock.ci.summary import SCHEMA, SUMMARY_NAME

    try:
        doc = json.loads((directory / SUMMARY_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        return {}
    cells = doc.get("cells")
    return {
        c["cell"]: c
        for c in (cells if isinstance(cells, list) else [])
        if isinstance(c, dict) and isinstance(c.get("cell"), str)
    }


# ---------------------------------------------------------------- progress while silent


class _LogWatch:
    """Counts the lines of a log as they pass (and writes them on to ``sink``):
    what the heartbeat says about a long RUN step or smoke run."""

    def __init__(self, sink: Any = None) -> None:
        self._sink = sink
        self.lines = 0
        self.last = ""
        self.where = ""
        self._partial = ""

    def step(self, text: str) -> None:
        words = text.split()
        self.where = words[1] if len(words) > 1 and words[0] == "step" else self.where
        self.lines = 0

    def line(self, text: str) -> None:
        text = " ".join(text.split())
        if text and not text.startswith("Step ") and not text.startswith("---> "):
            self.lines += 1
            self.last = text

    def write(self, text: str) -> int:
        if self._sink is not None:
            self._sink.write(text)
        parts = (self._partial + text).split("\n")
        self._partial = parts.pop()
        for part in parts:
            self.line(part)
        return len(text)

    def flush(self) -> None:
        if self._sink is not None:
            self._sink.flush()

    def describe(self) -> str:
        last = self.last if len(self.last) <= 100 else self.last[:97] + "..."
        return f"{self.lines} log lines" + (f", last: {last}" if last else "")


def heartbeat(
    outcomes: list[CellOutcome], progress: Progress, interval: float, stop: threading.Event
) -> None:
    """Until ``stop``: a line for every running cell that has said nothing for
    ``interval`` seconds (what it is doing, bytes pushed, log lines), so a
    plain CI log never goes silent past a no-output timeout."""
    tick = min(1.0, interval / 4)
    while not stop.wait(tick):
        now = time.monotonic()
        for o in outcomes:
            if o.stage in ("queued", "done", "failed") or o.said is None:
                continue
            if now - o.said >= interval:
                pulse = o.pulse
                what = pulse() if pulse is not None else o.stage
                elapsed = time.perf_counter() - o.started if o.started else 0.0
                o.said = now
                progress.update(o, f"... {what} ({elapsed:.0f} s in the cell)")


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
    engine.connect(timeout=30).close()  # exit 3 now if the engine is not there
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
