"""``envlock smoke`` as one call: ``run_smoke(SmokeRequest)``.

Checks the flags (exit 2 before anything runs), opens the harness's log, runs the
harness on this host (``envlock.smoke.runner``, in the interpreter ``--venv``
names) or in an image (``envlock.smoke.container``), adds the verdict per
execution path, writes ``-o`` (signed with ``--sign``, ``envlock.report``). The
result's ``to_dict()`` is the smoke result document, ``text()`` its tables."""

from __future__ import annotations

import contextlib
import json
import shlex
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envlock.errors import UsageError

if TYPE_CHECKING:
    from envlock.smoke.result import SmokeRun


@dataclass(frozen=True)
class SmokeRequest:
    """``envlock smoke``'s flags as typed values."""

    image: str | None = None
    host: bool = False
    framework: str | None = None
    venv: str | None = None
    expect: str | None = None
    gpus: str = "all"
    allow_cpu: bool = False
    size: int | None = None
    training: bool = True
    peaks: str | None = None
    timeout: float = 3600
    verbose: bool = False
    output: str | None = None
    sign: str | None = None
    lock: str | None = None


@dataclass(frozen=True)
class SmokeOutcome:
    """The smoke result document (``to_dict``: ``smoke --json``, the file ``-o`` writes
    unsigned) and its exit status (0 PASSED/WARNED, 1 FAILED)."""

    result: SmokeRun

    @property
    def exit_code(self) -> int:
        from envlock.smoke.runner import exit_code_for

        return exit_code_for(self.result)

    def to_dict(self) -> SmokeRun:
        return self.result

    def text(self) -> str:
        from envlock.smoke.text import describe

        return describe(self.result)


def host_python(given: str) -> str:
    """The interpreter --venv names, chosen as doctor chooses it (envlock.venv.interpreter):
    an interpreter file, or a venv folder's bin/python; a dangling venv interpreter
    is named as such."""
    from envlock.venv.interpreter import choose

    path = Path(given)
    if not path.is_dir() and not path.is_file():
        raise UsageError(
            f"--venv {given}: no venv folder or Python interpreter there",
            hint="give the venv folder or an interpreter, e.g. --venv .venv or "
            "--venv /usr/bin/python3",
        )
    return choose(given, None, {}).python


def run_smoke(request: SmokeRequest) -> SmokeOutcome:
    from envlock.smoke import runner

    if request.size is not None and request.size <= 0:
        raise UsageError(
            f"--size {request.size}: must be a positive matrix size", hint="--size 4096"
        )
    if request.sign and not request.output:
        raise UsageError("--sign needs -o FILE for the signed report", hint="-o report.intoto.json")
    if request.output:
        _refuse_clobber(request)
    extra = [] if request.training else ["--no-training"]
    _check(request)
    with _harness_log(request) as log:
        result = _run(request, runner, extra, log)
    from envlock.smoke.text import paths_for

    paths = paths_for(result)
    if paths:
        result["paths"] = paths
    image_id = result.get("image", {}).get("id")
    image_ref = result.get("image", {}).get("pinned")

    if request.output:
        from envlock.fsutil import atomic_write
        from envlock.output import wrote

        out: Mapping[str, object] = result
        if request.sign:
            lock_dir = request.lock or request.expect  # the bundle the report names, if any
            out = _sign(
                result,
                Path(request.sign),
                Path(lock_dir) if lock_dir else None,
                image_id,
                image_ref,
            )
        atomic_write(Path(request.output), json.dumps(out, indent=2) + "\n")
        wrote(request.output, "the signed report" if request.sign else "the result")
    return SmokeOutcome(result)


@contextlib.contextmanager
def _harness_log(request: SmokeRequest) -> Iterator[Any]:
    """Where the harness's log goes: stderr with --verbose, else a log file named first."""
    if request.verbose:
        yield None
        return
    import os
    import time

    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    folder = Path(base) / "envlock" / "logs"
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = folder / f"smoke-{stamp}-{os.getpid()}.log"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle = open(path, "w", encoding="utf-8", errors="replace")  # noqa: SIM115
    except OSError as e:  # no writable state folder: the log goes to stderr as before
        sys.stderr.write(f"envlock: cannot write the harness log to {path} ({e.strerror})\n")
        yield None
        return
    where = "on this host" if request.host else f"in {request.image}"
    sys.stderr.write(
        f"envlock: running the smoke harness {where}; its log: {path} (--verbose shows it here)\n"
    )
    with handle:
        yield handle


def _check(request: SmokeRequest) -> None:
    """The command line's mistakes (exit 2), before any log is opened or anything runs."""
    from envlock.readers import read_json

    if request.host:
        if request.image:
            raise UsageError(
                f"give an image or --host, not both ({request.image!r})",
                hint="envlock smoke IMAGE, or envlock smoke --host",
            )
        if request.peaks:  # strict JSON (envlock.readers): a bad file is exit 2, not a FAILED run
            read_json(request.peaks, "--peaks", hint="pass a JSON list of GPU peaks")
        if request.venv:
            host_python(request.venv)
        return
    if not request.image:
        raise UsageError("no image given", hint="envlock smoke IMAGE, or envlock smoke --host")
    if request.venv:
        raise UsageError(
            "--venv is for --host runs (an image carries its own interpreter)",
            hint=f"envlock smoke --host --venv {shlex.quote(request.venv)}",
        )
    if request.expect or request.peaks:
        raise UsageError(
            "--expect and --peaks are for --host runs",
            hint="an image carries its own /opt/envlock/expect.json",
        )


def _run(request: SmokeRequest, runner: Any, extra: list[str], log: Any) -> SmokeRun:
    if request.host:
        result: SmokeRun = runner.run_on_host(
            request.framework,
            Path(request.expect) if request.expect else None,
            request.allow_cpu,
            size=request.size,
            peaks_file=Path(request.peaks) if request.peaks else None,
            python=host_python(request.venv) if request.venv else None,
            extra=extra,
            timeout=request.timeout,
            log=log,
        )
        return result
    from envlock.smoke.container import run_in_image

    assert request.image is not None  # _check: an image, or --host
    result = run_in_image(
        request.image,
        gpus=request.gpus,
        allow_cpu=request.allow_cpu,
        framework=request.framework,
        size=request.size,
        extra=extra,
        timeout=request.timeout,
        log=log,
    )
    return result


def _refuse_clobber(request: SmokeRequest) -> None:
    """-o never overwrites the signing key, nor a file this run reads."""
    from envlock.report.outputs import refuse_clobber

    inputs: list[tuple[str, Path]] = []
    if request.sign:
        from envlock.report.inputs import sign_inputs

        lock_dir = request.lock or request.expect
        inputs += sign_inputs(Path(request.sign), None, Path(lock_dir) if lock_dir else None)
    elif request.expect:
        inputs += [("the expectation", Path(request.expect) / "expect.json")]
    if request.peaks:
        inputs.append(("the peaks file --peaks", Path(request.peaks)))
    assert request.output is not None  # called for -o FILE
    refuse_clobber(
        Path(request.output), inputs, hint="write the result to a new file, e.g. -o result.json"
    )


def _sign(
    result: SmokeRun,
    key: Path,
    lock_dir: Path | None,
    image_id: str | None,
    image_ref: str | None = None,
) -> Any:
    try:
        from envlock.report import sign_result
    except ImportError as e:
        raise UsageError(
            f"signing is not available in this installation ({e})",
            hint="install envlock with its dependencies (cryptography)",
        ) from e
    if lock_dir is not None and not (lock_dir / "pylock.toml").is_file():
        lock_dir = None
    return sign_result(result, key, lock_dir=lock_dir, image_id=image_id, image_ref=image_ref)
