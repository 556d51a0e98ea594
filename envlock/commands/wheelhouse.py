"""envlock wheelhouse: download every locked wheel, hash-checked, for offline restores."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser(
        "wheelhouse",
        help="download every locked wheel (hash-checked) so restore needs no index",
        description="Download every wheel of DIR/pylock.toml into WH, checking each sha256 "
        "against the lock. Files already there with the right hash are kept. "
        "Then: envlock restore DIR --venv V --wheelhouse WH (no index needed; V defaults "
        "to the venv DIR was captured from, else DIR/.venv). "
        "Exit 0 done, 2 bad input, 3 a download failed or its hash is not the lock's.",
    )
    p.add_argument("dir", metavar="DIR", help="bundle folder (with pylock.toml)")
    p.add_argument("-o", "--output", required=True, metavar="WH", help="folder for the wheels")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from envlock.venv.wheelhouse import build_wheelhouse

    def progress(line: str) -> None:
        if not args.json:
            sys.stderr.write(f"  downloaded {line}\n")

    result = build_wheelhouse(Path(args.dir), Path(args.output), progress=progress)
    if args.json:
        doc = {
            "wheelhouse": str(result.folder),
            "downloaded": list(result.downloaded),
            "present": list(result.present),
            "bytes_downloaded": result.bytes_downloaded,
        }
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        # restore's default venv spelled out: the hint names the venv it will act on
        from envlock.venv.install import RestoreRequest, default_venv, restore_command

        bundle = Path(args.dir)
        venv, why = default_venv(bundle)
        restore = restore_command(RestoreRequest(bundle, venv, wheelhouse=result.folder))
        sys.stdout.write(
            f"{result.folder}: {result.total} wheels ({len(result.downloaded)} downloaded, "
            f"{result.bytes_downloaded} bytes; {len(result.present)} already there)\n"
            f"  restore without an index (into {venv}, {why}; give --venv for another venv): "
            f"{restore}\n"
        )
    return 0
