"""envlock lock: flags, the call into the lock package, printing.

``envlock lock SPEC -o DIR`` resolves SPEC, then ``envlock.bundle.folder.lock_folder``
writes pylock.toml, requirements.txt and the rendered bundle in one step;
``envlock lock --check DIR`` is ``envlock check DIR`` (envlock/commands/check.py):
exit 1 when any file lock writes into DIR would change.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envlock.commands.options import (
    add_check_arguments,
    add_force_argument,
    add_pin_arguments,
    add_render_arguments,
    add_resolve_arguments,
    constraints_from_args,
    render_options,
)
from envlock.errors import UsageError

if TYPE_CHECKING:
    from envlock.bundle.folder import LockedFolder
    from envlock.model import LockedPackage


def register(sub: Any) -> None:
    p = sub.add_parser(
        "lock",
        help="pin the whole dependency closure with hashes and write the bundle",
        description="Resolve SPEC as 'envlock resolve' does, then lock the full dependency "
        "closure for the target (Linux x86_64 manylinux, the resolved CPython minor) with "
        "hashes: DIR/pylock.toml (PEP 751), DIR/requirements.txt and the rendered bundle. "
        "With --gpu, nvidia-* libraries are capped to versions that run on that GPU "
        "(matrices/libraries.toml; each cap is a why line with its source); without it, "
        "a locked version that does not run on some GPUs is a warning naming them. "
        "Exit 2 when the pins conflict, 3 when the index cannot be reached.",
    )
    add_resolve_arguments(p, spec_optional=True)  # SPEC is not needed for --check DIR
    add_pin_arguments(p)
    p.add_argument(
        "--pins-from",
        metavar="DIR",
        help="also pin what the lock in DIR was made with (its --with and -r lines, as its "
        "pylock.toml records them), before any --with given here: another release or "
        "Python with the same pins",
    )
    p.add_argument(
        "--resolver",
        choices=("uv", "pip"),
        default=None,
        help="resolver engine (default uv; pip is the fallback; --check: the recorded one)",
    )
    p.add_argument(
        "--index-url",
        metavar="URL",
        help="simple-API index (default: the pip/uv configuration of this machine)",
    )
    from envlock.index import routing

    routing.add_arguments(p)
    p.add_argument(
        "--only-binary",
        action="store_true",
        help="lock wheels only, as pip's and uv's --only-binary :all:: a package with no "
        "wheel for the target is exit 2, named (default: its source archive is locked by "
        "sha256 and built where the lock is installed, its build requirements pinned too)",
    )
    p.add_argument(
        "--offline",
        action="store_true",
        help="use only uv's cached index metadata (no network)",
    )
    p.add_argument("-o", "--output", metavar="DIR", help="bundle folder to write")
    p.add_argument(
        "-P",
        "--upgrade-package",
        dest="upgrade_package",
        action="append",
        default=[],
        metavar="NAME",
        help="with a lock already in DIR: let NAME (and what it forces) move to the newest "
        "version that fits; every other package keeps its locked version (repeatable, "
        "as uv's and pip-compile's --upgrade-package)",
    )
    p.add_argument(
        "--check",
        metavar="DIR",
        help="recompute every file lock writes into DIR (lock files and bundle) from its "
        "recorded input and render options; write nothing; exit 1 if any would change "
        "(`envlock check DIR`, which takes only the options the check uses)",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_render_arguments(p)
    add_force_argument(p)
    p.set_defaults(func=run)


def _progress(message: str) -> None:
    from envlock.output import stderr_is_tty

    if stderr_is_tty():
        sys.stderr.write(message + "\n")
        sys.stderr.flush()


def run(args: argparse.Namespace) -> int:
    if args.check:  # the spelling of `uv lock --check`: `envlock check DIR`
        from envlock.commands.check import check

        refuse_lock_options(args, args.check)
        return check(Path(args.check), args)
    if not args.spec:
        raise UsageError("what to lock is missing", hint="envlock lock 'tensorflow==2.15' -o DIR")
    if not args.output:
        raise UsageError("no output folder", hint=f"envlock lock '{args.spec}' -o DIR")
    from envlock.bundle.folder import LockRequest, lock_folder
    from envlock.bundle.guard import check_output_folder

    check_output_folder(Path(args.output), "-o")  # before any resolving: a bad -o fails fast
    from envlock.index import routing
    from envlock.resolve import resolve

    indexes, routes = routing.pairs(routing.parse(args.indexes, args.routes))
    constraints = constraints_from_args(args)
    resolution = resolve(constraints)
    if constraints.gpus:  # a lock for a GPU its own verdicts say cannot run it: exit 1
        import shlex

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
    request = LockRequest(
        constraints=constraints,
        output=Path(args.output),
        with_requirements=(*_pins_from(args.pins_from), *args.with_requirements),
        requirement_files=tuple(args.requirement_files),
        resolver=args.resolver or "uv",
        index_url=args.index_url,
        indexes=indexes,
        routes=routes,
        offline=args.offline,
        render=render_options(args, os=args.os),
        force=args.force,
        upgrade=tuple(args.upgrade_package),
    )
    written = lock_folder(request, resolution, _progress)
    for note in written.notes:
        sys.stderr.write(f"envlock: note: {note}\n")
    for warning in written.lock.resolution.warnings:
        if warning not in resolution.warnings:  # the lock's own: library caps (#26)
            sys.stderr.write(f"envlock: warning: {warning}\n")
    for problem in written.lock.gpu.problems if written.lock.gpu else ():
        sys.stderr.write(f"envlock: warning: {problem}\n")
    _print_lock(args, written)
    return 0


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


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def _print_lock(args: argparse.Namespace, written: LockedFolder) -> None:
    from envlock.lock.pylock import driver_line
    from envlock.output import emit_json, table

    locked, out, files, digest = written.lock, written.folder, written.files, written.digest
    r = locked.resolution
    if args.json:
        emit_json(
            {
                "dir": str(out),
                "lock_digest": f"sha256:{digest}",
                "resolver": locked.resolver,
                "resolver_version": locked.resolver_version,
                "top_requirements": list(locked.top_requirements),
                "resolution": r.to_dict(),
                "input": locked.input.to_dict(),
                "gpu": locked.gpu.to_dict() if locked.gpu else None,
                "packages": [_package_json(p) for p in locked.packages],
                "files": list(files),
            }
        )
        return
    rows = [
        [p.name, p.version, _files_column(p), _mb(max(w.size for w in p.files))]
        for p in locked.packages
    ]
    sys.stdout.write(table(["package", "version", "wheels", "size"], rows))
    total = sum(max(w.size for w in p.files) for p in locked.packages)
    sys.stdout.write(
        f"\nlocked {len(locked.packages)} packages ({_mb(total)}) for {r.framework} {r.version}, "
        f"Python {r.python}, CUDA {r.cuda}, cuDNN {r.cudnn}, CUDA source {r.cuda_source}, "
        f"with {locked.resolver} {locked.resolver_version}\n"
        f"driver: {driver_line(locked).removeprefix('Needs an NVIDIA driver ')}\n"
        f"wrote {', '.join(files)} to {out}\n"
        f"install: pip install --require-hashes --no-deps -r {out / 'requirements.txt'}\n"
    )
    for reason in r.cap_reasons:
        sys.stdout.write(f"why: {reason}\n")


def _files_column(p: LockedPackage) -> str:
    """The table's wheels column: how many, or "sdist" for a package built from source."""
    return "sdist" if p.sdist is not None else str(len(p.wheels))


def _package_json(p: LockedPackage) -> dict[str, Any]:
    from envlock.door import redact

    out: dict[str, Any] = {
        "name": p.name,
        "version": p.version,
        "wheels": [
            {"filename": w.filename, "url": w.url, "size": w.size, "sha256": w.sha256}
            for w in p.wheels
        ],
        **({"index": redact(p.index)} if p.index else {}),
    }
    if p.sdist is not None:
        s = p.sdist
        out["sdist"] = {"filename": s.filename, "url": s.url, "size": s.size, "sha256": s.sha256}
    return out


def refuse_lock_options(args: argparse.Namespace, folder: str) -> None:
    """``envlock lock --check DIR``: exit 2 naming every option of lock's own that was
    given, since the check reads them all from DIR. Which options those are comes
    from the two parsers (lock's, which parsed ``args``, and this command's), so an
    option added to lock is refused here without a line of its own."""
    lock_parser = args._envlock_parser
    defaults = vars(lock_parser.parse_args([]))
    probe = argparse.ArgumentParser(add_help=False)
    add_check_arguments(probe)
    taken = {a.dest for a in probe._actions} | {"check", "_envlock_parser", "func", "command"}
    given = [
        action.option_strings[-1] if action.option_strings else str(action.metavar)
        for action in lock_parser._actions
        if action.dest not in taken
        and action.dest != "help"
        and getattr(args, action.dest, None) != defaults.get(action.dest)
    ]
    if given:
        what = ", ".join(given)
        raise UsageError(
            f"--check DIR compares {folder} with what its recorded input locks now, so it "
            f"takes none of the options that make a lock: {what} "
            f"{'is' if len(given) == 1 else 'are'} not used",
            hint=f"envlock check {folder}",
        )
