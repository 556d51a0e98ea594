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
    from envlock.model import Resolution
    from envlock.venv.capture import Captured


def register(sub: Any) -> None:
    p = sub.add_parser(
        "capture",
        help="lock an existing working environment (a venv, an interpreter or a pip freeze)",
        description="Lock what is installed: TensorFlow at its installed release and every "
        "other distribution at its installed version (pip, setuptools and wheel too), for "
        "the interpreter's Python; DIR becomes a normal bundle (pylock.toml with hashes from "
        "the index, requirements.txt, Dockerfile, bootstrap.sh) and DIR/captured.json names "
        "the interpreter and venv it came from. Left out, each with a note: nvidia CUDA "
        "wheels (the CUDA source decides them) and direct installs (editable, a local "
        "folder or file, a VCS checkout, a URL: no index serves that build). Exit 2 when "
        "the index cannot serve a captured version (the nearest ones are named), 1 when "
        "the venv's interpreter is a dangling link, 3 when the interpreter does not run "
        "or the index cannot be reached.",
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
        help="with -r: the Python minor to lock for (default: as 'envlock resolve' picks)",
    )
    p.add_argument(
        "--cuda-source",
        choices=("system", "pip"),
        help="default: pip when nvidia CUDA wheels are installed, else as 'envlock resolve' picks",
    )
    p.add_argument("--resolver", choices=("uv", "pip"), default="uv", help="default uv")
    p.add_argument("--index-url", metavar="URL", help="simple-API index (default: pip/uv config)")
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
    from envlock.venv.capture import capture_freeze, capture_interpreter

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
        captured = capture_freeze(args.freeze)
    from envlock.bundle.folder import LockRequest, lock_folder
    from envlock.resolve import Constraints, resolve

    spec = f"{captured.framework}=={captured.version}"
    python = args.python or captured.python_minor
    cuda_source = args.cuda_source or captured.cuda_source
    constraints = Constraints(spec=spec, python=python, cuda_source=cuda_source)
    resolution = resolve(constraints)
    request = LockRequest(
        constraints=constraints,
        output=out,
        with_requirements=captured.pins,
        resolver=args.resolver,
        index_url=args.index_url,
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
