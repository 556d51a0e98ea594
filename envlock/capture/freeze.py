"""``envlock capture -r FREEZE``: lock what can be locked of a pip freeze, list the rest.

The index's PEP 691 page of every pinned project is read once
(envlock.venv.leftout.pages); the Python comes from ``--os-info``, ``--python``
or the pins (``choose_python``); the lines are sorted into pins to lock and
lines left out (``triage``; source-only pins that cannot be locked are found
before the lock, envlock.venv.sdist_check); then the lock runs in rounds that
leave out dependents of left-out lines (envlock.capture.rounds). The bundle
records what was left out (DIR/left-out.json).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from envlock.capture.result import CapturedFreeze, CaptureRequest, Refused
from envlock.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from envlock.bundle.left_out import LeftOut
    from envlock.lock.freeze import Installed
    from envlock.model import Lock


def with_pins(request: CaptureRequest, rows: list[Installed]) -> list[Installed]:
    """The freeze's rows with each --with NAME==VERSION in place of NAME's line."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    from envlock.lock.freeze import Installed

    given: dict[str, Installed] = {}
    for text in request.with_:
        try:
            req = Requirement(text)
        except InvalidRequirement as e:
            raise UsageError(
                f"--with {text!r}: not a requirement ({e})", hint="--with NAME==VERSION"
            ) from None
        specs = list(req.specifier)
        if req.url or len(specs) != 1 or specs[0].operator != "==":
            raise UsageError(
                f"--with {text!r}: not one pinned version", hint="--with NAME==VERSION"
            )
        name = canonicalize_name(req.name)
        given[name] = Installed(name, specs[0].version, None, None, f"{name}=={specs[0].version}")
    out = [given.pop(canonicalize_name(r.name), r) if r.name else r for r in rows]
    return out + list(given.values())


def from_freeze(request: CaptureRequest) -> CapturedFreeze | Refused:
    """Lock what can be locked of ``request.freeze``, list the rest."""
    from packaging.utils import canonicalize_name

    from envlock.bundle import left_out as lofile
    from envlock.bundle.folder import LockRequest
    from envlock.capture.interpreter import locked_anyway, record_origin
    from envlock.capture.rounds import contradicted, lock_rounds, rerun
    from envlock.index import routing
    from envlock.index.config import index_url
    from envlock.lock.freeze import framework_names, is_cuda_wheel
    from envlock.lockplatform import Target
    from envlock.resolve import Constraints, resolve
    from envlock.venv import leftout
    from envlock.venv.capture import captured_from, freeze_rows

    assert request.freeze is not None
    routed = routing.parse(request.indexes, request.routes)  # bad flags first: exit 2
    origin = f"-r {request.freeze}"
    rows = with_pins(request, freeze_rows(request.freeze))
    captured = captured_from(origin, rows)
    lines: dict[str, str] = {canonicalize_name(r.name): r.describe() for r in rows if r.name}
    index = index_url(request.index_url)
    names = [leftout.pin_of(p)[0] for p in captured.pins]
    if request.offline:
        raise UsageError(
            "-r with --offline: a capture of a freeze reads the index's pages to sort its lines",
            hint="leave --offline out",
        )
    where = leftout.Where(index, routed.routed(captured.pins))
    found = leftout.pages(names, where)
    if request.os_info:
        full = leftout.read_os_info(request.os_info)
        minor = ".".join(full.split(".")[:2])
        if request.python and request.python != minor:
            raise UsageError(
                f"--python {request.python}: --os-info {request.os_info} says Python {full}",
                hint="leave --python out: the platform's own Python is the one to lock for",
            )
        choice = leftout.PythonChoice(
            minor, f"Python {minor}: --os-info {request.os_info} says Python {full}"
        )
    elif request.python:
        choice = leftout.PythonChoice(request.python, f"Python {request.python}: --python")
    else:
        choice = leftout.choose_python(captured.pins, found)

    against = leftout.contradicting(captured.pins, found, choice.python)
    if against and (request.python or request.os_info):
        raise contradicted(
            request, choice.python, against, lines, leftout.choose_python(captured.pins, found)
        )
    constraints = Constraints(
        spec=captured.spec,
        python=choice.python,
        cuda=captured.cuda,
        cuda_source=request.cuda_source or captured.cuda_source,
        only_binary=request.only_binary,
    )
    resolution = resolve(constraints)
    target = Target.for_lock(resolution.python, resolution.os)
    venv_python = str(Path(request.output) / ".venv" / "bin" / "python")
    commands = leftout.Commands(rerun(request), venv_python, request.index_url)
    keep, left = leftout.triage(
        [(p, lines.get(leftout.pin_of(p)[0], p)) for p in captured.pins],
        found,
        target,
        commands,
        where=where,
        only_binary=request.only_binary,
    )
    if not request.only_binary:  # source-only pins that cannot be locked, found before the lock
        from envlock.venv import sdist_check

        left += sdist_check.preflight(keep, found, target, index, commands, lines)
    pinned = {leftout.pin_of(p)[0] for p in captured.pins}
    taken = pinned | framework_names(captured.framework)
    for r in rows:
        name = canonicalize_name(r.name) if r.name else ""
        if not (name in taken or (name and is_cuda_wheel(name))):
            left.append(leftout.not_pinned(r, commands))
    left.sort(key=lambda item: (list(lofile.REASONS).index(item.reason), item.line.lower()))
    total = len(rows)
    if request.strict and left:
        return Refused(request.freeze, total, tuple(left))

    def counted(locked: Lock) -> dict[str, bytes]:
        record = lofile.LeftOutFile(
            origin,
            resolution.python,
            choice.how,
            total,
            locked_lines(rows, locked, left),
            tuple(left),
        )
        return {lofile.FILE: record.to_bytes()}

    indexes, routes = routing.pairs(routed)
    lock = LockRequest(
        constraints=constraints,
        output=Path(request.output),
        with_requirements=(),
        resolver=request.resolver,
        index_url=request.index_url,
        indexes=indexes,
        routes=routes,
        force=request.force,
        extra_files=counted,
    )
    written = lock_rounds(lock, resolution, keep, left, lines, commands)
    locked_n = locked_lines(rows, written.lock, left)
    said = [n for n in captured.notes if not n.startswith("left out: ")]  # listed below
    notes = [*said, *locked_anyway(captured, written), *written.notes]
    record_origin(captured, written.folder, notes)
    differs = differs_of(rows, written.lock, left)
    summary = lofile.summary(locked_n, total, left, other=len(differs))
    return CapturedFreeze(
        captured,
        written,
        tuple(notes),
        choice,
        tuple(left),
        total,
        locked_n,
        tuple(differs),
        summary,
        1 if request.strict and left else 0,
    )


def differs_of(rows: Sequence[Installed], locked: Lock, left: Sequence[LeftOut]) -> list[str]:
    """The freeze lines the lock holds at another version (or not at all), not left out."""
    from packaging.utils import canonicalize_name

    have = {p.name: p.version for p in locked.packages}
    out_lines = {item.line for item in left}
    out = []
    for r in rows:
        if not r.name or r.version is None or r.describe() in out_lines:
            continue
        name = canonicalize_name(r.name)
        got = have.get(name)
        if got is None or not _same(got, r.version):
            out.append(f"{r.describe()}: locked {got or 'not at all'}")
    return out


def _same(a: str, b: str) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def locked_lines(rows: Sequence[Installed], locked: Lock, left: Sequence[LeftOut]) -> int:
    """The freeze lines the lock holds at the line's own version."""
    from packaging.utils import canonicalize_name
    from packaging.version import InvalidVersion, Version

    have = {p.name: p.version for p in locked.packages}
    out_lines = {item.line for item in left}
    n = 0
    for r in rows:
        if not r.name or r.version is None or r.describe() in out_lines:
            continue
        got = have.get(canonicalize_name(r.name))
        try:
            if got is not None and Version(got) == Version(r.version):
                n += 1
        except InvalidVersion:
            continue
    return n
