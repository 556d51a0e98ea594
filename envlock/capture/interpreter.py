"""``envlock capture --venv PATH``: lock what an interpreter has installed.

The interpreter is probed (envlock.venv.capture.capture_interpreter), its
framework release and pins locked as ``envlock lock`` locks them, for its own
Python; then DIR/captured.json names the interpreter and venv it came from
(``record_origin``; a freeze's capture removes an earlier one instead).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from envlock.capture.result import CapturedInterpreter, CaptureRequest
from envlock.errors import EnvironmentFailure, NoResolution, UsageError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from envlock.bundle.folder import LockedFolder
    from envlock.bundle.origin import OriginDict
    from envlock.model import Resolution
    from envlock.venv.capture import Captured


def from_interpreter(request: CaptureRequest) -> CapturedInterpreter:
    from envlock.bundle.folder import LockRequest, lock_folder
    from envlock.index import routing
    from envlock.resolve import Constraints, resolve
    from envlock.venv.capture import capture_interpreter

    assert request.venv is not None
    captured = capture_interpreter(request.venv)
    if request.python and request.python != captured.python_minor:
        raise UsageError(
            f"--python {request.python}: --venv {request.venv} is Python {captured.python}",
            hint="leave --python out: capture locks for the interpreter's own Python",
        )
    for flag, value in (
        ("--os-info", request.os_info),
        ("--with", request.with_),
        ("--strict", request.strict),
    ):
        if value:
            raise UsageError(f"{flag} goes with -r FREEZE", hint=f"leave {flag} out with --venv")
    indexes, routes = routing.pairs(routing.parse(request.indexes, request.routes))
    constraints = Constraints(
        spec=captured.spec,
        python=request.python or captured.python_minor,
        cuda=captured.cuda,
        cuda_source=request.cuda_source or captured.cuda_source,
        only_binary=request.only_binary,
    )
    resolution = resolve(constraints)
    lock = LockRequest(
        constraints=constraints,
        output=Path(request.output),
        with_requirements=captured.pins,
        resolver=request.resolver,
        index_url=request.index_url,
        indexes=indexes,
        routes=routes,
        offline=request.offline,
        force=request.force,
    )
    try:
        written = lock_folder(lock, resolution)
    except NoResolution as e:
        raise _explained(e, captured, resolution, request) from None
    notes = [
        *captured.notes,
        *locked_anyway(captured, written),
        *_build_notes(captured, resolution),
        *written.notes,
    ]
    origin = record_origin(captured, written.folder, notes)
    return CapturedInterpreter(
        captured,
        written,
        tuple(notes),
        _driver(),
        origin,
        differs_from((f"{captured.framework}=={captured.version}", *captured.pins), written),
    )


def _driver() -> str | None:
    from envlock.driver import detect

    try:
        info = detect()
    except UsageError:  # no driver visible: nothing to record
        return None
    return f"{info.driver} ({info.source})"


def _build_notes(captured: Captured, resolution: Resolution) -> list[str]:
    info = captured.build_info
    notes = []
    for key, want in (("cuda_version", resolution.cuda), ("cudnn_version", resolution.cudnn)):
        have = str(info.get(key) or "")
        if have and not (want == have or want.startswith(have + ".") or have.startswith(want)):
            notes.append(f"the venv's build_info says {key} {have}; the matrix says {want}")
    return notes


def record_origin(captured: Captured, folder: Path, notes: list[str]) -> OriginDict | None:
    """DIR/captured.json, written after the bundle (a failed capture never gets
    here, so an earlier one stays as it was). A freeze inspected no interpreter:
    an earlier captured.json would name another environment, so it is removed."""
    from envlock.bundle import origin

    if captured.interpreter is None:
        stale = folder / origin.FILE
        if stale.exists() or stale.is_symlink():
            try:
                stale.unlink()
            except OSError as e:
                raise EnvironmentFailure(
                    f"cannot remove {stale}: {e.strerror or e}; the bundle is written, but "
                    "that file names the interpreter of an earlier capture",
                    hint=f"remove it by hand: rm {shlex.quote(str(stale))}",
                ) from None
            notes.append(
                f"removed {stale}: it named the interpreter of an earlier capture, "
                "and a freeze names none"
            )
        return None
    found = origin.from_probe(captured.probe, captured.interpreter, captured.venv)
    origin.write(folder, found)
    return found.to_dict()


def locked_anyway(captured: Captured, written: LockedFolder) -> list[str]:
    """Left-out distributions that the lock holds all the same (another one needs
    them): the index's build, not the one installed."""
    locked = {p.name: p.version for p in written.lock.packages}
    return [
        f"{name} is locked at {locked[name]} from the index all the same (another "
        "distribution needs it): the index's build, not the one installed"
        for name in captured.left_out
        if name in locked
    ]


def _explained(
    error: NoResolution, captured: Captured, resolution: Resolution, request: CaptureRequest
) -> NoResolution:
    """The resolver's failure, with the captured pins the index cannot serve named."""
    if request.offline:
        return error
    from envlock.index.config import index_url
    from envlock.lockplatform import Target
    from envlock.venv.capture import unavailable

    target = Target.for_lock(resolution.python, resolution.os)
    missing = unavailable(captured.pins, target, index_url(request.index_url))
    if not missing:
        return error
    lines = "\n".join(f"  {u.describe()}" for u in missing)
    names = ", ".join(u.pin for u in missing)
    if captured.interpreter:  # write a freeze of it first (--all: pip, setuptools too)
        freeze = "freeze.txt"
        write = f"{shlex.quote(captured.interpreter)} -m pip freeze --all > {freeze}, "
    else:
        freeze, write = str(request.freeze), ""
    again = shlex.join(
        ["envlock", "capture", "-r", freeze, "--python", resolution.python, "-o", request.output]
    )
    return NoResolution(
        f"{len(missing)} captured package(s) cannot be locked from the index for "
        f"{target.describe()}:\n{lines}",
        hint=f"pin a nearest available version instead of {names} (or delete those lines): "
        f"{write}edit {shlex.quote(freeze)}, then run {again}",
    )


def differs_from(pins: Sequence[str], written: LockedFolder) -> tuple[str, ...]:
    """``name version: locked X`` for each ``name==version`` the lock holds otherwise."""
    locked = {p.name: p.version for p in written.lock.packages}
    out = []
    for pin in pins:
        name, version = pin.split("==", 1)
        if locked.get(name) != version:
            out.append(f"{name} {version}: locked {locked.get(name) or 'not at all'}")
    return tuple(out)
