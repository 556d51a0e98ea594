"""Build a bundle's image through the Docker Engine API (docker-py).

The build context is the bundle folder alone, filtered by its .dockerignore
(docker-py's own context tar applies it). The log streams as it comes; each
``Step N/M`` of the classic builder is recorded with whether the engine took
it from its cache, so a rebuild can show that nothing ran again.

docker-py is imported inside the functions that use it.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envlock.errors import EnvironmentFailure, EnvlockError, UsageError
from envlock.image.dockerfile import (
    _VAR,
    check_build_args,
    check_bundle,
    declared_args,
    final_base,
    read_dockerfile,
    substitute,
)
from envlock.image.labels import OCI, base_labels, created_label, source_labels
from envlock.image.ref import ImageRef

PROGRESS = ("auto", "plain", "steps", "quiet")
_STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)$")
LOG_TAIL = 12


@dataclass(frozen=True)
class BuildStep:
    number: int
    instruction: str  # "RUN python3.11 -m venv /opt/venv"
    cached: bool  # the engine reused a cached layer
    cacheable: bool  # FROM and ARG before the first FROM never say "Using cache"

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "instruction": self.instruction,
            "cached": self.cached,
            "cacheable": self.cacheable,
        }


@dataclass
class TrackedStep:
    """A step as the build stream shows it, while it runs (``cached`` is known one
    line later); ``frozen()`` is the ``BuildStep`` the result keeps."""

    number: int
    total: int
    instruction: str
    cached: bool = False
    cacheable: bool = True

    @property
    def where(self) -> str:
        return f"{self.number}/{self.total}"

    def frozen(self) -> BuildStep:
        return BuildStep(self.number, self.instruction, self.cached, self.cacheable)


@dataclass(frozen=True)
class BuildResult:
    image_id: str
    tags: tuple[str, ...]
    cached_steps: int
    total_steps: int
    log: tuple[str, ...]
    steps: tuple[BuildStep, ...] = ()
    seconds: float = 0.0
    labels: dict[str, str] = field(default_factory=dict)
    size_bytes: int | None = None
    repo_digests: tuple[str, ...] = ()  # name@sha256:..., once pushed or pulled

    @property
    def cacheable_steps(self) -> int:
        return sum(1 for s in self.steps if s.cacheable)

    @property
    def fully_cached(self) -> bool:
        """Every step that can come from the cache did."""
        return bool(self.steps) and all(s.cached for s in self.steps if s.cacheable)

    def to_dict(self) -> dict[str, Any]:
        return {
            "image_id": self.image_id,
            "tags": list(self.tags),
            "seconds": round(self.seconds, 3),
            "total_steps": self.total_steps,
            "cacheable_steps": self.cacheable_steps,
            "cached_steps": self.cached_steps,
            "fully_cached": self.fully_cached,
            "size_bytes": self.size_bytes,
            "repo_digests": list(self.repo_digests),
            "labels": dict(self.labels),
            "steps": [s.to_dict() for s in self.steps],
            "log_tail": list(self.log[-LOG_TAIL:]),
        }


def check_reference(value: str | ImageRef, what: str) -> str:
    """``value`` as Docker is given it; text is parsed (UsageError when it is no
    reference), an ``ImageRef`` is already parsed."""
    from envlock.image import ref as imageref

    return str(imageref.parse(value, what))


class _StepTracker:
    """Follows the classic builder's stream: steps, cache hits, the image id."""

    def __init__(
        self,
        on_step: Callable[[TrackedStep], None] | None = None,
        args: Mapping[str, str] | None = None,
    ) -> None:
        self.steps: list[TrackedStep] = []
        self.log: list[str] = []
        self.image_id: str | None = None
        self.seen_from = False
        self.args = dict(args or {})  # build arguments in force: declared defaults + given
        self._partial = ""
        self._on_step = on_step
        self._pending: TrackedStep | None = None  # a step whose cache state is not known yet

    def feed_text(self, text: str) -> list[str]:
        text = self._partial + text
        lines = text.split("\n")
        self._partial = lines.pop()
        for line in lines:
            self._line(line.rstrip("\r"))
        return lines

    def flush(self) -> None:
        if self._partial:
            self._line(self._partial)
            self._partial = ""
        self._announce()

    def _announce(self) -> None:
        if self._pending is not None and self._on_step is not None:
            self._on_step(self._pending)
        self._pending = None

    def _line(self, line: str) -> None:
        self.log.append(line)
        m = _STEP.match(line)
        if self._pending is not None and not m:
            # the line after "Step N/M" says whether the engine reuses a layer
            if line.strip() == "---> Using cache":
                self._pending.cached = True
            self._announce()
        if m:
            self._announce()
            instruction = m.group(3).strip()
            keyword = instruction.split(None, 1)[0].upper() if instruction else ""
            is_from = keyword == "FROM"
            cacheable = not is_from and not (keyword == "ARG" and not self.seen_from)
            self.seen_from = self.seen_from or is_from
            self.steps.append(
                TrackedStep(int(m.group(1)), int(m.group(2)), instruction, False, cacheable)
            )
            self._pending = self.steps[-1]
            return
        if line.strip() == "---> Using cache" and self.steps:
            self.steps[-1].cached = True
        elif line.startswith("Successfully built "):
            self.image_id = self.image_id or line.split()[-1]

    @property
    def current(self) -> TrackedStep | None:
        return self.steps[-1] if self.steps else None

    def from_image(self, instruction: str) -> tuple[str, str | None]:
        """The image a FROM instruction names, variables resolved, and the variable used."""
        words = instruction.split()
        words = [w for w in words[1:] if not w.startswith("--")]
        name = words[0] if words else ""
        m = _VAR.fullmatch(name)
        variable = (m.group(1) or m.group(2)) if m else None
        return substitute(name, self.args), variable


def step_line(step: TrackedStep, width: int = 120) -> str:
    """One plain progress line for a build step: ``step 3/12 RUN ... (cached)``."""
    instruction = " ".join(step.instruction.split())
    if len(instruction) > width:
        instruction = instruction[: width - 3] + "..."
    return f"step {step.where} {instruction}" + (" (cached)" if step.cached else "")


def build_image(
    directory: Path,
    *,
    tag: str | ImageRef | None = None,
    base_image: str | None = None,
    build_args: Mapping[str, str] | None = None,
    no_cache: bool = False,
    network: str | None = None,
    progress: str = "auto",
    client: Any = None,
    out: Callable[[str], None] | None = None,
    on_log: Callable[[str], None] | None = None,
) -> BuildResult:
    """Build ``directory``'s Dockerfile with ``directory`` as the whole context.

    ``build_args`` must be declared by the Dockerfile (``ARG NAME``); ``base_image``
    is the BASE_IMAGE build argument. OCI labels (created, source, revision,
    base.name, base.digest) are set at build time. ``progress``: ``plain`` streams
    the log, ``steps`` writes one line per build step, ``quiet`` nothing, ``auto``
    the log on a terminal and step lines otherwise; all of it through ``out``
    (default: stderr). ``on_log``, when given, is handed every line of the
    build log as it arrives (whatever ``progress`` shows): ``ci build``'s
    heartbeat reads install progress from it.
    """
    from envlock.image import engine

    dockerfile = check_bundle(directory)
    if progress not in PROGRESS:
        raise UsageError(f"--progress {progress!r}", hint="use auto, plain, steps or quiet")
    if tag is not None:
        tag = check_reference(tag, "--tag")  # an ImageRef is not parsed again
    text = read_dockerfile(dockerfile)
    declared = declared_args(text)
    buildargs: dict[str, str] = dict(build_args or {})
    if base_image is not None:
        check_reference(base_image, "--base-image")
        if "BASE_IMAGE" not in declared:
            raise UsageError(
                f"{dockerfile}: takes no BASE_IMAGE build argument, so --base-image cannot apply",
                hint="re-render the bundle with envlock, or drop --base-image",
            )
        if buildargs.get("BASE_IMAGE", base_image) != base_image:
            raise UsageError(
                "--base-image and --build-arg BASE_IMAGE=... name different images",
                hint="give the base image once",
            )
        buildargs["BASE_IMAGE"] = base_image
    check_build_args(dockerfile, declared, buildargs)
    in_force = {k: v for k, v in declared.items() if v is not None} | buildargs
    labels = {OCI + "created": created_label(), **source_labels(directory)}
    if progress == "auto":
        progress = "plain" if sys.stderr.isatty() else "steps"
    write = out or (lambda s: (sys.stderr.write(s), sys.stderr.flush()))

    try:
        with engine.session("during the build", timeout=3600, client=client) as docker_client:
            labels |= base_labels(docker_client, final_base(text, in_force))
            started = time.perf_counter()
            for attempt in range(1, CACHE_RACE_TRIES + 1):
                try:
                    tracker = _stream_build(
                        docker_client,
                        directory,
                        tag,
                        no_cache,
                        network,
                        buildargs,
                        labels,
                        progress,
                        write,
                        in_force,
                        on_log,
                    )
                    break
                except BuildFailed as e:
                    if attempt == CACHE_RACE_TRIES or not cache_lookup_race(e.reason):
                        raise
                    if progress != "quiet":
                        write(_race_line(e, attempt + 1))
            elapsed = time.perf_counter() - started
            image_id = tracker.image_id or ""
            if not image_id.startswith("sha256:"):
                image_id = str(docker_client.images.get(image_id).id)
            image = docker_client.images.get(image_id)
    except OSError as e:  # docker-py tars the folder: an unreadable file lands here
        raise UsageError(
            f"cannot read the build context {directory}: {e.strerror or e}"
            + (f" ({e.filename})" if e.filename else ""),
            hint="make every file in the bundle folder readable, or list it in .dockerignore",
        ) from e
    attrs = image.attrs or {}
    image_labels = dict(((attrs.get("Config") or {}).get("Labels")) or {})
    steps = tuple(s.frozen() for s in tracker.steps)
    return BuildResult(
        image_id=image_id,
        tags=tuple(image.tags),
        cached_steps=sum(1 for s in steps if s.cached),
        total_steps=len(steps),
        log=tuple(tracker.log),
        steps=steps,
        seconds=elapsed,
        labels=image_labels,
        size_bytes=attrs.get("Size"),
        repo_digests=tuple(attrs.get("RepoDigests") or ()),
    )


# The classic builder's cache lookup (moby's GetCachedImage) lists the children of a
# step's parent image, then reads each: a child that another client removes between
# the two reads fails the build with `unable to find image "sha256:<id>"` (the
# image store's own error, "failed to get digest sha256:<id>: ... no such file or
# directory", in some engines). Nothing in the build is at fault, and the steps it
# finished are in the cache: build_image builds again, CACHE_RACE_TRIES times in all.
_CACHE_RACE = re.compile(
    r'^unable to find image "sha256:[0-9a-f]{64}"$'
    r"|failed to get digest sha256:[0-9a-f]{64}: .*no such file or directory"
)
CACHE_RACE_TRIES = 3


def cache_lookup_race(reason: str) -> bool:
    """Whether the engine's error ``reason`` is the classic builder's cache-lookup
    race (an image removed by another client while the lookup read it), which a
    second build meets only if another removal lands in its own lookup."""
    return _CACHE_RACE.search(reason.strip()) is not None


def _race_line(failed: BuildFailed, attempt: int) -> str:
    where = f"at step {failed.step}" if failed.step else "before its first step"
    return (
        f"the engine lost an image during its build-cache lookup {where} "
        f"({failed.reason}: another client removed it); building again, "
        f"try {attempt} of {CACHE_RACE_TRIES}\n"
    )


def _stream_build(
    client: Any,
    directory: Path,
    tag: str | None,
    no_cache: bool,
    network: str | None,
    buildargs: dict[str, str],
    labels: dict[str, str],
    progress: str,
    write: Callable[[str], Any],
    in_force: Mapping[str, str],
    on_log: Callable[[str], None] | None = None,
) -> _StepTracker:
    from docker.errors import APIError

    from envlock.image.engine import engine_errors

    lost = (*engine_errors(), _urllib3_error())
    show = progress == "plain"
    on_step = (lambda step: write(step_line(step) + "\n")) if progress == "steps" else None
    tracker = _StepTracker(on_step=on_step, args=in_force)
    try:
        stream = client.api.build(
            path=str(directory),
            tag=tag,
            nocache=no_cache,
            rm=True,
            forcerm=True,
            pull=False,
            buildargs=buildargs or None,
            labels=labels or None,
            network_mode=network,
            decode=True,
        )
        for chunk in stream:
            if "stream" in chunk:
                lines = tracker.feed_text(str(chunk["stream"]))
                if on_log is not None:
                    for line in lines:
                        on_log(line)
                if show:
                    for line in lines:
                        write(line + "\n")
            elif "status" in chunk:
                line = " ".join(str(chunk[k]) for k in ("id", "status", "progress") if chunk.get(k))
                tracker.log.append(line)
                if show and "progress" not in chunk:
                    write(line + "\n")
            elif "aux" in chunk and isinstance(chunk["aux"], dict) and "ID" in chunk["aux"]:
                tracker.image_id = str(chunk["aux"]["ID"])
            elif "error" in chunk or "errorDetail" in chunk:
                tracker.flush()
                detail = chunk.get("errorDetail") or {}
                message = str(chunk.get("error") or detail.get("message") or "unknown error")
                raise _step_failure(tracker, message.strip())
        tracker.flush()
    except APIError as e:
        tracker.flush()
        raise _api_failure(e, tracker) from e
    except lost as e:  # the engine went away mid-build (stopped, crashed, socket gone)
        tracker.flush()
        raise _engine_lost(tracker, e) from e
    if not tracker.image_id:
        raise _step_failure(tracker, "the engine reported no image id")
    return tracker


def _tail(lines: list[str], n: int = LOG_TAIL) -> str:
    kept = [line for line in lines if line.strip()][-n:]
    return "\n".join("  | " + line for line in kept)


# what pip, curl, apt and Python's socket module print when a build step has no network
_NO_NETWORK = (
    "Temporary failure in name resolution",
    "Name or service not known",
    "Could not resolve host",
    "Network is unreachable",
    "Temporary failure resolving",
)


class BuildFailed(EnvironmentFailure):
    """A build that failed at a step (exit 3), with what a summary needs as fields:
    ``step`` ("3/12", None when no step had started), ``instruction`` (the step's
    Dockerfile line, with the image a FROM resolved to), ``reason`` (the engine's
    message) and ``step_exit_code`` (of a RUN step, else None; ``exit_code`` stays the
    process's, 3)."""

    def __init__(
        self,
        message: str,
        hint: str | None = None,
        *,
        step: str | None = None,
        instruction: str | None = None,
        reason: str = "",
        step_exit_code: int | None = None,
    ) -> None:
        super().__init__(message, hint)
        self.step = step
        self.instruction = instruction
        self.reason = reason
        self.step_exit_code = step_exit_code


def _step_failure(tracker: _StepTracker, message: str) -> BuildFailed:
    step = tracker.current
    instruction = step.instruction if step else None  # with the image a FROM resolved to
    hint = "fix the step, or rerun with --progress plain to see the whole log"
    if step and step.instruction.upper().startswith("FROM"):
        image, variable = tracker.from_image(step.instruction)
        if image != step.instruction.split()[1]:
            instruction = f"{step.instruction}, image {image}"
        if variable == "BASE_IMAGE":
            hint = (
                f"the base image {image} is neither local nor pullable here: build or load it, "
                "or pass --base-image with a local image"
            )
        elif variable:
            hint = (
                f"the image {image} ({variable}) is neither local nor pullable here: load it, "
                f"or pass --build-arg {variable}=REF naming a local or reachable image"
            )
        else:
            hint = (
                f"the image {image} is neither local nor pullable here: build or load it, "
                "or change the FROM line"
            )
    elif any(sign in line for line in tracker.log for sign in _NO_NETWORK):
        hint = (
            "a RUN step could not reach the network (names do not resolve or no route): "
            "the daemon's default network has no way out here (e.g. dockerd --bridge=none); "
            "rerun with --network host, or give the daemon a working bridge"
        )
    where = f"step {step.where} ({instruction})" if step else "the build"
    return BuildFailed(
        f"the build failed at {where}: {message}\nlast lines of its log:\n{_tail(tracker.log)}",
        hint=hint,
        step=step.where if step else None,
        instruction=instruction,
        reason=message,
        step_exit_code=_exit_code(message),
    )


# the classic builder's words for a RUN step that exited non-zero (the engine's text)
_NON_ZERO = re.compile(r"returned a non-zero code: (\d+)")


def _exit_code(message: str) -> int | None:
    m = _NON_ZERO.search(message)
    return int(m.group(1)) if m else None


def _urllib3_error() -> type[Exception]:
    """What docker-py's raw stream reader raises when the connection breaks."""
    from urllib3.exceptions import HTTPError

    return HTTPError


def _engine_lost(tracker: _StepTracker, e: BaseException) -> EnvironmentFailure:
    from envlock.image.engine import short

    text = short(e)
    if "connection broken" in text.lower() or "incompleteread" in text.lower():
        text = f"the connection to the engine broke off ({type(e).__name__})"
    step = tracker.current
    where = f"step {step.where} ({step.instruction})" if step else "the start of the build"
    return EnvironmentFailure(
        f"the Docker Engine stopped answering during the build, at {where}: {text}\n"
        f"last lines of its log:\n{_tail(tracker.log)}",
        hint="check that the engine is running (`docker info`) and build again; "
        "steps that finished may come from its cache",
    )


def _api_failure(e: Any, tracker: _StepTracker) -> EnvlockError:
    status = getattr(e, "status_code", None)
    explanation = str(getattr(e, "explanation", "") or e)
    if status == 400 or (status is not None and 400 <= int(status) < 500):
        return UsageError(
            f"the Docker Engine refused the build: {explanation}",
            hint="check --tag, --base-image and --network",
        )
    return _step_failure(tracker, explanation)
