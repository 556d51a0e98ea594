"""envlock capture: lock a working environment that was never locked.

``envlock capture --venv PATH -o DIR`` probes the interpreter PATH names (a
venv folder or any interpreter file; envlock.venv.capture), then locks
``tensorflow==<installed>`` with every other installed distribution pinned at
its installed version, for that interpreter's Python minor: the same path as
``envlock lock``, so DIR is a normal bundle with hashes from the index. Then
it writes DIR/captured.json (envlock.bundle.origin): the interpreter and venv
it inspected. ``-r FREEZE.txt`` does the same from a ``pip freeze`` and writes
no captured.json (it inspected no interpreter; an earlier one is removed).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envlock.errors import EnvironmentFailure, NoResolution, UsageError

if TYPE_CHECKING:
    from envlock.bundle.folder import LockedFolder
    from envlock.bundle.origin import OriginDict
    from envlock.lock.freeze import Installed
    from envlock.model import Lock, Resolution
    from envlock.venv.capture import Captured


def register(sub: Any) -> None:
    p = sub.add_parser(
        "capture",
        help="lock an existing working environment (a venv, an interpreter or a pip freeze)",
        description="Lock what is installed: TensorFlow at its installed release (where "
        "there is none: torch at its release and CUDA build, +cuXYZ; else JAX with its CUDA "
        "plugin's extra, jax[cudaNN]) and every other distribution at its installed version "
        "(pip, setuptools and wheel too), for "
        "the interpreter's Python; DIR becomes a normal bundle (pylock.toml with hashes from "
        "the index, requirements.txt, Dockerfile, bootstrap.sh) and DIR/captured.json names "
        "the interpreter and venv it came from. Left out, each with a note: nvidia CUDA "
        "wheels (the CUDA source decides them) and direct installs (editable, a local "
        "folder or file, a VCS checkout, a URL: no index serves that build). With -r a "
        "partial capture is a result: the lock holds every line that can be locked, and "
        "each other line is listed once, in DIR/left-out.json too, with its reason (OS "
        "package, another index, yanked or removed, direct install, no distribution for "
        "this Python/platform) and the command that would take it in; exit 0 with a "
        "'locked N of M' line, 1 with --strict. Exit 2 when the index cannot serve a "
        "captured version (--venv; the nearest ones are named), a freeze line names a "
        "project the index does not have, a name is listed twice, or --python contradicts "
        "the pins; 1 when the venv's interpreter is a dangling link, 3 when the "
        "interpreter does not run or the index cannot be reached.",
    )
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--venv",
        metavar="PATH",
        help="what to capture: a venv folder, or any interpreter file (a venv's bin/python, "
        "a system python3, one with a --user site, a Jupyter kernel's sys.executable)",
    )
    where.add_argument(
        "-r",
        "--requirement",
        dest="freeze",
        metavar="FREEZE",
        help="a pip freeze to capture (name @ URL and -e lines are left out, with a note)",
    )
    p.add_argument("-o", "--output", metavar="DIR", required=True, help="bundle folder to write")
    p.add_argument(
        "--python",
        metavar="X.Y",
        help="with -r: the Python minor to lock for (default: --os-info's, else the newest "
        "Python every pin has a wheel or a fitting Requires-Python for)",
    )
    p.add_argument(
        "--os-info",
        metavar="FILE",
        help="with -r: the platform's published os-info file; its 'Python 3.X.Y' line is the "
        "Python to lock for (without it and --python, the newest Python the pins all fit)",
    )
    p.add_argument(
        "--with",
        dest="with_",
        action="append",
        default=[],
        metavar="NAME==VERSION",
        help="with -r: pin NAME at VERSION instead of the freeze's line (repeatable)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="with -r: exit 1, writing nothing, when any line would be left out",
    )
    p.add_argument(
        "--cuda-source",
        choices=("system", "pip"),
        help="default: pip when nvidia CUDA wheels are installed, else as 'envlock resolve' picks",
    )
    p.add_argument("--resolver", choices=("uv", "pip"), default="uv", help="default uv")
    p.add_argument("--index-url", metavar="URL", help="simple-API index (default: pip/uv config)")
    from envlock.index import routing

    routing.add_arguments(p)
    p.add_argument(
        "--only-binary",
        action="store_true",
        help="lock wheels only; with -r a line with only a source archive is left out, "
        "with its reason (default: its sdist is locked by sha256 and built on install)",
    )
    p.add_argument("--offline", action="store_true", help="use only uv's cached index metadata")
    p.add_argument(
        "--force", action="store_true", help="overwrite files in DIR envlock did not write"
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


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


def run(args: argparse.Namespace) -> int:
    from envlock.bundle.guard import check_output_folder
    from envlock.venv.capture import capture_interpreter

    out = Path(args.output)
    check_output_folder(out, "-o")
    if args.venv:
        captured = capture_interpreter(args.venv)
        if args.python and args.python != captured.python_minor:
            raise UsageError(
                f"--python {args.python}: --venv {args.venv} is Python {captured.python}",
                hint="leave --python out: capture locks for the interpreter's own Python",
            )
    else:
        return run_freeze(args, out)
    for flag, value in (
        ("--os-info", args.os_info),
        ("--with", args.with_),
        ("--strict", args.strict),
    ):
        if value:
            raise UsageError(f"{flag} goes with -r FREEZE", hint=f"leave {flag} out with --venv")
    from envlock.bundle.folder import LockRequest, lock_folder
    from envlock.index import routing
    from envlock.resolve import Constraints, resolve

    indexes, routes = routing.pairs(routing.parse(args.indexes, args.routes))
    python = args.python or captured.python_minor
    cuda_source = args.cuda_source or captured.cuda_source
    constraints = Constraints(
        spec=captured.spec,
        python=python,
        cuda=captured.cuda,
        cuda_source=cuda_source,
        only_binary=args.only_binary,
    )
    resolution = resolve(constraints)
    request = LockRequest(
        constraints=constraints,
        output=out,
        with_requirements=captured.pins,
        resolver=args.resolver,
        index_url=args.index_url,
        indexes=indexes,
        routes=routes,
        offline=args.offline,
        force=args.force,
    )
    try:
        written = lock_folder(request, resolution)
    except NoResolution as e:
        raise _explained(e, captured, resolution, args) from None
    notes = [
        *captured.notes,
        *_locked_anyway(captured, written),
        *_build_notes(captured, resolution),
        *written.notes,
    ]
    origin = _record_origin(captured, written.folder, notes)
    driver = _driver()
    _print(args, captured, written, notes, driver, origin)
    return 0


def _record_origin(captured: Captured, folder: Path, notes: list[str]) -> OriginDict | None:
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


def _locked_anyway(captured: Captured, written: LockedFolder) -> list[str]:
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
    error: NoResolution, captured: Captured, resolution: Resolution, args: argparse.Namespace
) -> NoResolution:
    """The resolver's failure, with the captured pins the index cannot serve named."""
    if args.offline:
        return error
    from envlock.index.config import index_url
    from envlock.lockplatform import Target
    from envlock.venv.capture import unavailable

    target = Target.for_lock(resolution.python, resolution.os)
    missing = unavailable(captured.pins, target, index_url(args.index_url))
    if not missing:
        return error
    lines = "\n".join(f"  {u.describe()}" for u in missing)
    names = ", ".join(u.pin for u in missing)
    if captured.interpreter:  # write a freeze of it first (--all: pip, setuptools too)
        freeze = "freeze.txt"
        write = f"{shlex.quote(captured.interpreter)} -m pip freeze --all > {freeze}, "
    else:
        freeze, write = args.freeze, ""
    again = shlex.join(
        ["envlock", "capture", "-r", freeze, "--python", resolution.python, "-o", args.output]
    )
    return NoResolution(
        f"{len(missing)} captured package(s) cannot be locked from the index for "
        f"{target.describe()}:\n{lines}",
        hint=f"pin a nearest available version instead of {names} (or delete those lines): "
        f"{write}edit {shlex.quote(freeze)}, then run {again}",
    )


def _print(
    args: argparse.Namespace,
    captured: Captured,
    written: LockedFolder,
    notes: list[str],
    driver: str | None,
    origin: OriginDict | None,
) -> None:
    from envlock.commands.lock import _print_lock

    locked = {p.name: p.version for p in written.lock.packages}
    differs = []
    for pin in (f"{captured.framework}=={captured.version}", *captured.pins):
        name, version = pin.split("==", 1)
        if locked.get(name) != version:
            differs.append(f"{name} {version}: locked {locked.get(name) or 'not at all'}")
    if args.json:
        from envlock.output import emit_json

        emit_json(
            {
                "captured": {**captured.to_dict(), "driver": driver},
                "origin": origin,
                "dir": str(written.folder),
                "lock_digest": f"sha256:{written.digest}",
                "gpu": written.lock.gpu.to_dict() if written.lock.gpu else None,
                "packages": [{"name": n, "version": v} for n, v in sorted(locked.items())],
                "differs": differs,
                "notes": notes,
                "files": list(written.files),
            }
        )
        return
    for note in notes:
        sys.stderr.write(f"envlock: note: {note}\n")
    for problem in written.lock.gpu.problems if written.lock.gpu else ():
        sys.stderr.write(f"envlock: warning: {problem}\n")
    _print_lock(argparse.Namespace(json=False), written)
    where = f"Python {captured.python}" if captured.python else "a pip freeze"
    if captured.left_out:
        where += f"; {len(captured.left_out)} left out, see the notes"
    sys.stdout.write(
        f"captured {captured.framework} {captured.version} and {len(captured.pins)} other "
        f"distributions from {captured.source} ({where})"
        + (f"; driver {driver}" if driver else "")
        + "\n"
    )
    if origin is not None:
        if origin["venv"]:
            where = f"the venv {origin['venv']}); doctor and restore of this bundle act on it"
        else:  # restore makes no new venv in place of a system interpreter
            where = (
                "outside a venv); doctor of this bundle inspects it, restore --in-place syncs it"
            )
        sys.stdout.write(
            f"wrote {written.folder / 'captured.json'}: captured from {origin['interpreter']} "
            f"({where} on this machine\n"
        )
    if differs:
        sys.stdout.write("locked at other versions than installed:\n")
        for line in differs:
            sys.stdout.write(f"  {line}\n")
    else:
        sys.stdout.write("every captured distribution is locked at its installed version\n")


def _with_pins(args: argparse.Namespace, rows: list[Installed]) -> list[Installed]:
    """The freeze's rows with each --with NAME==VERSION in place of NAME's line."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    from envlock.lock.freeze import Installed

    given: dict[str, Installed] = {}
    for text in args.with_:
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


def run_freeze(args: argparse.Namespace, out: Path) -> int:
    """``envlock capture -r FREEZE``: lock what can be locked, list the rest."""
    from packaging.utils import canonicalize_name

    from envlock.bundle import left_out as lofile
    from envlock.bundle.folder import LockRequest
    from envlock.commands.capture_freeze import (
        _contradicted,
        _differs,
        _lock_rounds,
        _locked_lines,
        _print_partial,
        _rerun,
    )
    from envlock.index import routing
    from envlock.index.config import index_url
    from envlock.lock.freeze import framework_names, is_cuda_wheel
    from envlock.lockplatform import Target
    from envlock.resolve import Constraints, resolve
    from envlock.venv import leftout
    from envlock.venv.capture import captured_from, freeze_rows

    routed = routing.parse(args.indexes, args.routes)  # bad flags first: exit 2, nothing read
    origin = f"-r {args.freeze}"
    rows = _with_pins(args, freeze_rows(args.freeze))
    captured = captured_from(origin, rows)
    lines: dict[str, str] = {canonicalize_name(r.name): r.describe() for r in rows if r.name}
    index = index_url(args.index_url)
    names = [leftout.pin_of(p)[0] for p in captured.pins]
    if args.offline:
        raise UsageError(
            "-r with --offline: a capture of a freeze reads the index's pages to sort its lines",
            hint="leave --offline out",
        )
    where = leftout.Where(index, routed.routed(captured.pins))
    found = leftout.pages(names, where)
    if args.os_info:
        full = leftout.read_os_info(args.os_info)
        minor = ".".join(full.split(".")[:2])
        if args.python and args.python != minor:
            raise UsageError(
                f"--python {args.python}: --os-info {args.os_info} says Python {full}",
                hint="leave --python out: the platform's own Python is the one to lock for",
            )
        choice = leftout.PythonChoice(
            minor, f"Python {minor}: --os-info {args.os_info} says Python {full}"
        )
    elif args.python:
        choice = leftout.PythonChoice(args.python, f"Python {args.python}: --python")
    else:
        choice = leftout.choose_python(captured.pins, found)

    against = leftout.contradicting(captured.pins, found, choice.python)
    if against and (args.python or args.os_info):
        raise _contradicted(
            args, choice.python, against, lines, leftout.choose_python(captured.pins, found)
        )
    cuda_source = args.cuda_source or captured.cuda_source
    constraints = Constraints(
        spec=captured.spec,
        python=choice.python,
        cuda=captured.cuda,
        cuda_source=cuda_source,
        only_binary=args.only_binary,
    )
    resolution = resolve(constraints)
    target = Target.for_lock(resolution.python, resolution.os)
    venv_python = str(out / ".venv" / "bin" / "python")
    commands = leftout.Commands(_rerun(args), venv_python, args.index_url)
    keep, left = leftout.triage(
        [(p, lines.get(leftout.pin_of(p)[0], p)) for p in captured.pins],
        found,
        target,
        commands,
        where=where,
        only_binary=args.only_binary,
    )
    if not args.only_binary:  # source-only pins that cannot be locked, found before the lock
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
    if args.strict and left:
        listing = "\n".join(f"  {item.describe()}" for item in left)
        sys.stderr.write(
            f"envlock: {len(left)} of {total} line(s) of {args.freeze} would be left out "
            f"(--strict; nothing written):\n{listing}\n"
        )
        return 1

    def counted(locked: Lock) -> dict[str, bytes]:
        record = lofile.LeftOutFile(
            origin,
            resolution.python,
            choice.how,
            total,
            _locked_lines(rows, locked, left),
            tuple(left),
        )
        return {lofile.FILE: record.to_bytes()}

    request = LockRequest(
        constraints=constraints,
        output=out,
        with_requirements=(),
        resolver=args.resolver,
        index_url=args.index_url,
        indexes=routing.pairs(routed)[0],
        routes=routing.pairs(routed)[1],
        force=args.force,
        extra_files=counted,
    )
    written = _lock_rounds(request, resolution, keep, left, lines, commands)
    locked_n = _locked_lines(rows, written.lock, left)
    said = [n for n in captured.notes if not n.startswith("left out: ")]  # listed below
    notes = [*said, *_locked_anyway(captured, written), *written.notes]
    _record_origin(captured, written.folder, notes)
    differs = _differs(rows, written.lock, left)
    _print_partial(args, captured, written, notes, choice, left, total, locked_n, differs)
    return 1 if args.strict and left else 0
