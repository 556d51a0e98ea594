"""``envlock lock SPEC -o DIR`` as one call: ``lock_spec(LockSpecRequest)``.

Resolves the constraints, refuses a lock for a GPU its own verdicts say cannot run
it (exit 1), reads ``--pins-from``, then ``envlock.bundle.folder.lock_folder``
writes the lock files and the rendered bundle; notes and the lock's own warnings
go to stderr. The result is the ``LockedFolder`` (``to_dict``: ``lock --json``)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

from envlock.bundle.folder import LockedFolder, LockRequest, Progress, lock_folder
from envlock.bundle.guard import check_output_folder
from envlock.errors import UsageError
from envlock.model import Constraints
from envlock.output import notes
from envlock.render import RenderOptions


@dataclass(frozen=True)
class LockSpecRequest:
    """What ``envlock lock SPEC -o DIR`` was given (``indexes``/``routes``: the raw
    --index/--route values, ``envlock.index.routing.parse``'s input)."""

    constraints: Constraints
    output: Path
    pins_from: str | None = None
    with_requirements: tuple[str, ...] = ()
    requirement_files: tuple[str, ...] = ()
    resolver: str = "uv"
    index_url: str | None = None
    indexes: tuple[str, ...] = ()
    routes: tuple[str, ...] = ()
    offline: bool = False
    render: RenderOptions = field(default_factory=RenderOptions)
    force: bool = False
    upgrade: tuple[str, ...] = ()


def lock_spec(request: LockSpecRequest, progress: Progress | None = None) -> LockedFolder:
    from envlock.index import routing
    from envlock.resolve import resolve

    check_output_folder(request.output, "-o")  # before any resolving: a bad -o fails fast
    indexes, routes = routing.pairs(routing.parse(list(request.indexes), list(request.routes)))
    constraints = request.constraints
    resolution = resolve(constraints)
    if constraints.gpus:  # a lock for a GPU its own verdicts say cannot run it: exit 1
        from envlock.resolve import load_matrix
        from envlock.resolve.chooser import gpu_args, runs_nowhere
        from envlock.resolve.paths import for_resolution

        matrix = load_matrix()
        said = shlex.join(["envlock", "resolve", constraints.spec, *gpu_args(constraints)])
        failure = runs_nowhere(
            resolution,
            constraints,
            for_resolution(resolution, constraints, matrix),
            matrix,
            resolve,
            where=f"the paths: {said}",
        )
        if failure is not None:
            raise failure
    lock_request = LockRequest(
        constraints=constraints,
        output=request.output,
        with_requirements=(*_pins_from(request.pins_from), *request.with_requirements),
        requirement_files=request.requirement_files,
        resolver=request.resolver,
        index_url=request.index_url,
        indexes=indexes,
        routes=routes,
        offline=request.offline,
        render=request.render,
        force=request.force,
        upgrade=request.upgrade,
    )
    written = lock_folder(lock_request, resolution, progress)
    notes(written.notes)
    # the lock's own warnings (library caps, #26), then the GPU problems
    notes([w for w in written.lock.resolution.warnings if w not in resolution.warnings], "warning")
    notes(written.lock.gpu.problems if written.lock.gpu else (), "warning")
    return written


def _pins_from(folder: str | None) -> tuple[str, ...]:
    """The --with and -r lines the lock in ``folder`` was made with (--pins-from)."""
    if folder is None:
        return ()
    from envlock.lock import read_lock

    if not (Path(folder) / "pylock.toml").is_file():
        raise UsageError(
            f"--pins-from {folder}: no pylock.toml there",
            hint="give the folder envlock lock -o or envlock capture -o wrote",
        )
    return tuple(read_lock(Path(folder)).input.with_requirements)
