"""envlock restore: recreate the locked venv exactly, then switch it in."""

from __future__ import annotations

import argparse
import json
import sys
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
        "that --wheelhouse holds every locked file with the lock's sha256 (wheels, source "
        "archives, and a wheel of each build requirement of those). "
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


def run(args: argparse.Namespace) -> int:
    from envlock.venv.restore_run import RestoreRun, run_restore

    result = run_restore(
        RestoreRun(
            dir=args.dir,
            venv=args.venv,
            base_python=args.base_python,
            in_place=args.in_place,
            exact=args.exact,
            undo=args.undo,
            undo_id=args.undo_id,
            kernel=args.kernel,
            kernel_prefix=args.kernel_prefix,
            wheelhouse=args.wheelhouse,
            offline=args.offline,
            index_url=args.index_url,
            allow_cpu=args.allow_cpu,
            quiet=args.json,
        )
    )
    # restore's JSON has always been ASCII (json.dumps' default), unlike output.dumps
    sys.stdout.write(json.dumps(result.to_dict(), indent=2) + "\n" if args.json else result.text())
    return 0
