"""envlock restore: recreate the locked venv exactly, then switch it in."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser(
        "restore",
        help="recreate the locked venv exactly (hash-checked) and switch it in",
        description="Build a new venv from DIR's lock with hash checking, run the bundle's "
        "smoke test in it, and only then switch the venv path (a link to versioned "
        "folders PATH.envlock-N) to it. The old venv stays in use until the switch; a "
        "killed restore leaves it in place. Prints the distributions that changed. "
        "Before building anything it checks for an NVIDIA GPU (unless --allow-cpu) and "
        "that --wheelhouse holds every locked wheel with the lock's sha256. "
        "With --in-place, instead: sync the lock into --venv's interpreter (a venv, a "
        "system Python, a Jupyter kernel's sys.executable) as uv pip sync does, hash-"
        "checked, after saving what it replaces in your own state folder "
        "(~/.local/state/envlock/undo/; --undo puts it back, offline). "
        "With --kernel NAME the new venv is registered as a Jupyter kernel. "
        "Exit 0 restored, 1 no GPU or the smoke test failed (nothing switched), 2 bad "
        "input (no Python of the lock's minor, a wheelhouse that is not the lock's, "
        "--offline with nothing to install from, --kernel without ipykernel in the lock), "
        "3 the install failed.",
    )
    p.add_argument("dir", metavar="DIR", help="bundle folder (pylock.toml, requirements.txt)")
    p.add_argument(
        "--venv",
        metavar="PATH",
        help="the venv folder or any interpreter (default: the venv DIR was captured from, "
        "on that machine; else DIR/.venv, as bootstrap.sh)",
    )
    p.add_argument(
        "--base-python",
        dest="base_python",
        metavar="PATH",
        help="the interpreter to build the new venv with (as uv venv --python)",
    )
    p.add_argument("--python", dest="base_python", help=argparse.SUPPRESS)  # the old name
    p.add_argument(
        "--in-place",
        action="store_true",
        help="sync the lock into --venv's interpreter instead of building a new venv",
    )
    p.add_argument(
        "--exact",
        action="store_true",
        help="with --in-place: also remove what the lock does not name (saved for --undo)",
    )
    p.add_argument(
        "--undo",
        action="store_true",
        help="put back what the newest --in-place restore of --venv replaced (offline)",
    )
    p.add_argument("--undo-id", metavar="ID", help="with --undo: that saved state instead")
    p.add_argument(
        "--kernel",
        metavar="NAME",
        help="register the restored venv as the Jupyter kernel NAME (ipykernel in the lock)",
    )
    p.add_argument(
        "--kernel-prefix",
        metavar="PREFIX",
        help="with --kernel: ipykernel install --prefix PREFIX instead of --user",
    )
    p.add_argument(
        "--wheelhouse", metavar="WH", help="install from this folder only (envlock wheelhouse)"
    )
    p.add_argument("--offline", action="store_true", help="no index: uv's cache or --wheelhouse")
    p.add_argument("--index-url", metavar="URL", help="the index (default: pip's configuration)")
    p.add_argument("--allow-cpu", action="store_true", help="no GPU is a warning, not a failure")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def _conflicts(args: argparse.Namespace) -> None:
    from envlock.errors import UsageError

    pairs = [
        (args.undo and args.in_place, "--undo", "--in-place"),
        (args.kernel and (args.in_place or args.undo), "--kernel", "--in-place/--undo"),
        (args.exact and not args.in_place, "--exact", "a new venv (it holds only the lock)"),
        (args.undo_id and not args.undo, "--undo-id", "anything but --undo"),
        (args.kernel_prefix and not args.kernel, "--kernel-prefix", "no --kernel"),
        (args.base_python and (args.in_place or args.undo), "--base-python", "--in-place/--undo"),
    ]
    for bad, one, other in pairs:
        if bad:
            raise UsageError(
                f"{one} does not go with {other}",
                hint=f"envlock restore {args.dir} --help",
            )


def run(args: argparse.Namespace) -> int:
    from envlock.venv.install import RestoreRequest, default_venv
    from envlock.venv.restore import restore

    _conflicts(args)
    bundle = Path(args.dir)
    if args.venv:
        venv = Path(args.venv)
    else:
        venv, why = default_venv(
            bundle, in_place=args.in_place or args.undo, kernel=bool(args.kernel)
        )
        if not args.json:
            sys.stderr.write(f"envlock restore: no --venv given: {venv}, {why}\n")
    req = RestoreRequest(
        bundle=bundle,
        venv=venv,
        base_python=args.base_python,
        wheelhouse=Path(args.wheelhouse) if args.wheelhouse else None,
        offline=args.offline,
        allow_cpu=args.allow_cpu,
        index_url=args.index_url,
        in_place=args.in_place,
        exact=args.exact,
        undo=args.undo,
        undo_id=args.undo_id,
        kernel=args.kernel,
        kernel_prefix=Path(args.kernel_prefix) if args.kernel_prefix else None,
    )
    if args.undo:
        return _undo(args, req)
    left = _left_out(bundle)  # read and checked before anything is built
    if args.in_place:
        return _in_place(args, req, left)

    def progress(line: str) -> None:
        sys.stderr.write(f"envlock restore: {line}\n")

    result = restore(req, progress=None if args.json else progress)
    ch = result.changes
    if args.json:
        doc = {
            "mode": "new-venv",
            "venv": str(result.venv),
            "folder": str(result.folder),
            "previous": str(result.previous) if result.previous else None,
            "python": result.python,
            "smoke": result.smoke_status,
            "converted": result.converted,
            "compared": result.compared,
            "cleaned": list(result.cleaned),
            "added": [list(x) for x in ch.added],
            "removed": [list(x) for x in ch.removed],
            "changed": [list(x) for x in ch.changed],
            "kernel": result.kernel,
            "left_out": [item.to_dict() for item in left],
        }
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return 0
    out = sys.stdout
    for line in result.cleaned:
        out.write(f"{line}\n")
    out.write(
        f"{result.venv} -> {result.folder.name}: restored from {bundle} "
        f"(Python {result.minor}: {result.python}; smoke {result.smoke_status})\n"
    )
    if result.converted:
        out.write(
            f"  {result.venv} was a plain folder; it is now a link, the old venv kept as "
            f"{result.previous}\n"
        )
    lines = ch.lines()
    if result.compared == "no-old-venv":
        out.write(f"new venv: {len(ch.added)} distributions\n")
    elif result.compared == "old-venv-broken":
        out.write(
            f"the old venv's python did not run, so nothing to compare; "
            f"the new venv has {len(ch.added)} distributions\n"
        )
    elif lines:
        out.write(
            f"changed: {len(ch.added)} added, {len(ch.removed)} removed, "
            f"{len(ch.changed)} other version\n"
        )
        out.write("".join(f"{line}\n" for line in lines))
    else:
        out.write("no distribution changed\n")
    if result.previous is not None:
        out.write(
            f"  the previous venv stays in {result.previous.name} until the next restore "
            f"(roll back: ln -sfn {result.previous.name} {result.venv})\n"
        )
    if result.kernel is not None:
        k = result.kernel
        out.write(
            f"registered the Jupyter kernel {k['name']} ({k['display_name']}) in {k['path']}\n"
            f"  switch the notebook to the kernel {k['name']} and restart it "
            "(Kernel > Change kernel)\n"
        )
    _write_left_out(out, bundle, left, str(result.venv / "bin" / "python"))
    return 0


def _left_out(bundle: Path) -> tuple[Any, ...]:
    """The lines the capture left out of DIR's lock (DIR/left-out.json, checked as
    input: bad ones are exit 2 before anything is built)."""
    from envlock.bundle import left_out

    found = left_out.read(bundle)
    return found.left_out if found is not None else ()


def _write_left_out(out: Any, bundle: Path, left: tuple[Any, ...], python: str) -> None:
    """What restore did not bring back, because the lock does not hold it, and why;
    capture's pip commands aimed at the interpreter restored (``python``)."""
    if not left:
        return
    from envlock.bundle.left_out import FILE, retarget

    out.write(
        f"not brought back ({len(left)}): the capture left them out of the lock "
        f"({bundle / FILE}); each with why, and what would take it in:\n"
    )
    for item in left:
        out.write(f"  {item.describe()}\n")
        out.write(f"    take it in: {retarget(item.command, python) or 'no command yet'}\n")


def _restart(python: str) -> str:
    return (
        f"restart the Jupyter kernel and every Python process using {python}: they still "
        "hold the modules they imported before"
    )


def _in_place(args: argparse.Namespace, req: Any, left: tuple[Any, ...]) -> int:
    from envlock.venv.inplace import undo_command
    from envlock.venv.restore import restore_in_place

    def progress(line: str) -> None:
        sys.stderr.write(f"envlock restore: {line}\n")

    r = restore_in_place(req, progress=None if args.json else progress)
    p = r.plan
    if args.json:
        doc = {
            "mode": "in-place",
            "python": r.python,
            "venv": str(req.venv),
            "exact": req.exact,
            "changed": r.changed,
            "installed": [list(x) for x in p.install],
            "replaced": [list(x) for x in p.replace],
            "removed": [list(x) for x in p.remove],
            "kept_extras": [list(x) for x in p.kept],
            "undo_id": r.undo_id,
            "undo_path": str(r.undo_path) if r.undo_path else None,
            "undo": undo_command(req, str(req.venv), r.undo_id) if r.undo_id else None,
            "restart": _restart(r.python) if r.changed else None,
            "left_out": [item.to_dict() for item in left],
        }
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return 0
    out = sys.stdout
    if not r.changed:
        out.write(
            f"{r.python}: nothing to install, all {r.locked} locked distributions of "
            f"{req.bundle} are at their versions\n"
        )
    else:
        out.write(
            f"{r.python}: synced with {req.bundle} in place: {len(p.install)} installed, "
            f"{len(p.replace)} replaced, {len(p.remove)} removed\n"
        )
        out.write("".join(f"  + {n} {v}\n" for n, v in p.install))
        out.write("".join(f"  ~ {n} {a} -> {b}\n" for n, a, b in p.replace))
        out.write("".join(f"  - {n} {v}\n" for n, v in p.remove))
    if p.kept:
        shown = ", ".join(f"{n} {v}" for n, v in p.kept)
        out.write(f"not in the lock, left as they are: {shown}\n")
        if not req.exact:
            exact = restore_command_of(req, exact=True)
            out.write(f"  remove them too (saved for --undo): {exact}\n")
    if r.changed:
        out.write(f"  undo (offline): {undo_command(req, str(req.venv), r.undo_id)}\n")
        out.write(f"  {_restart(r.python)}\n")
    _write_left_out(out, req.bundle, left, r.python)
    return 0


def restore_command_of(req: Any, **changes: Any) -> str:
    from dataclasses import replace

    from envlock.venv.install import restore_command

    return restore_command(replace(req, **changes))


def _undo(args: argparse.Namespace, req: Any) -> int:
    from envlock.venv.restore import restore_undo

    r = restore_undo(req)
    if args.json:
        doc = {
            "mode": "undo",
            "python": r.python,
            "venv": str(req.venv),
            "undo_id": r.undo_id,
            "undo_path": str(r.path),
            "restored": [list(x) for x in r.restored],
            "removed": [list(x) for x in r.removed],
            "warnings": list(r.warnings),
            "restart": _restart(r.python),
        }
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return 0
    out = sys.stdout
    out.write(
        f"{r.python}: undid the in-place restore {r.undo_id}: {len(r.restored)} put back, "
        f"{len(r.removed)} removed\n"
    )
    out.write("".join(f"  + {n} {v}\n" for n, v in r.restored))
    out.write("".join(f"  - {n} {v}\n" for n, v in r.removed))
    for w in r.warnings:
        out.write(f"warning: {w}\n")
    out.write(f"  {_restart(r.python)}\n")
    return 0
