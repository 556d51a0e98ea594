"""envlock wheelhouse: download every locked file, hash-checked, for offline restores."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser(
        "wheelhouse",
        help="download every locked file (hash-checked) so restore needs no index",
        description="Download every wheel of DIR/pylock.toml into WH, checking each sha256 "
        "against the lock, and for a package locked by its source archive that archive "
        "and the wheels of its build requirements (build-constraints.txt; found on the "
        "index the lock was made from by their recorded sha256), so restore builds it "
        "with no index. Files already there with the right hash are kept. "
        "Then: envlock restore DIR --venv V --wheelhouse WH (no index needed; V defaults "
        "to the venv DIR was captured from, else DIR/.venv). "
        "Exit 0 done, 2 bad input, 3 a download failed or its hash is not the lock's.",
    )
    p.add_argument("dir", metavar="DIR", help="bundle folder (with pylock.toml)")
    p.add_argument("-o", "--output", required=True, metavar="WH", help="folder for the files")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from envlock.venv.wheelhouse import wheelhouse_for

    done = wheelhouse_for(Path(args.dir), Path(args.output), quiet=args.json)
    # wheelhouse's JSON has always been ASCII (json.dumps' default), unlike output.dumps
    sys.stdout.write(json.dumps(done.to_dict(), indent=2) + "\n" if args.json else done.text())
    return 0
