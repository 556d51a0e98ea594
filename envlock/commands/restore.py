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
        "Exit 0 restored, 1 no GPU or the smoke test failed (nothing switched), 2 bad "
        "input (no Python of the lock's minor, a wheelhouse that is not the lock's, "
        "--offline with nothing to install from), 3 the install failed.",
    )
    p.add_argument("dir", metavar="DIR", help="bundle folder (pylock.toml, requirements.txt)")
    p.add_argument("--venv", metavar="PATH", help="the venv (default: DIR/.venv, as bootstrap.sh)")
    p.add_argument("--python", metavar="PATH", help="the interpreter to build the venv with")
    p.add_argument(
        "--wheelhouse", metavar="WH", help="install from this folder only (envlock wheelhouse)"
    )
    p.add_argument("--offline", action="store_true", help="no index: uv's cache or --wheelhouse")
    p.add_argument("--index-url", metavar="URL", help="the index (default: pip's configuration)")
    p.add_argument("--allow-cpu", action="store_true", help="no GPU is a warning, not a failure")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from envlock.doctor.restore import RestoreRequest, restore

    bundle = Path(args.dir)
    req = RestoreRequest(
        bundle=bundle,
        venv=Path(args.venv) if args.venv else bundle / ".venv",
        python=args.python,
        wheelhouse=Path(args.wheelhouse) if args.wheelhouse else None,
        offline=args.offline,
        allow_cpu=args.allow_cpu,
        index_url=args.index_url,
    )

    def progress(line: str) -> None:
        sys.stderr.write(f"envlock restore: {line}\n")

    result = restore(req, progress=None if args.json else progress)
    ch = result.changes
    if args.json:
        doc = {
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
    return 0
