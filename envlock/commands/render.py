"""envlock render DIR: render the bundle again from an existing lock (no resolving)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from envlock import output
from envlock.errors import DataError, UsageError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from envlock.render import add_render_arguments

    p = sub.add_parser(
        "render",
        help="re-render a bundle's Dockerfile, bootstrap.sh, ... from its lock",
        description="Render DIR's Dockerfile, .dockerignore, bootstrap.sh, README.md, smoke "
        "harness, expect.json and runtime files from DIR/pylock.toml, without resolving "
        "again. An existing runtime.json is kept. All files are written in one step: a "
        "failure leaves the bundle as it was.",
    )
    p.add_argument("dir", metavar="DIR", help="the bundle folder (holds pylock.toml)")
    add_render_arguments(p)
    p.add_argument(
        "--os",
        metavar="ubuntuXX.YY",
        help="the same nvidia/cuda image on another Ubuntu release (e.g. ubuntu24.04)",
    )
    p.add_argument("--json", action="store_true", help="print what was written as JSON")
    p.set_defaults(func=run)


def _lock_bytes(directory: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for name in ("pylock.toml", "requirements.txt"):
        path = directory / name
        try:
            files[name] = path.read_bytes()
        except FileNotFoundError:
            raise UsageError(
                f"{path}: no such file; {directory} is not an envlock bundle",
                hint="make one with `envlock lock SPEC -o DIR`",
            ) from None
        except OSError as e:
            raise UsageError(f"{path}: cannot read it ({e.strerror or e})") from None
    return files


def run(args: argparse.Namespace) -> int:
    from envlock import render
    from envlock.fsutil import write_files

    directory = Path(args.dir)
    if not directory.is_dir():
        raise UsageError(
            f"{directory}: no such folder", hint="give the folder `envlock lock -o` wrote"
        )
    lock_files = _lock_bytes(directory)
    try:
        from envlock.lock import read_lock
    except ImportError as e:  # pragma: no cover - the lock module ships with envlock
        raise DataError(f"cannot read locks in this envlock ({e})") from e
    lock = read_lock(directory)
    options = render.options_from_args(args)  # keeps an existing runtime.json
    ctx = render.bundle_context(lock, options, lock_files)
    files = render.render_bundle(lock, options, lock_files)
    before = {}
    for rel in files:
        path = directory / rel
        before[rel] = path.read_bytes() if path.is_file() else None
    write_files(
        directory,
        files,
        modes={rel: 0o755 if rel in render.EXECUTABLE else None for rel in files},
    )
    rows: list[dict[str, Any]] = []
    for rel, data in files.items():
        raw = data.encode("utf-8") if isinstance(data, str) else data
        old = before[rel]
        state = "new" if old is None else ("unchanged" if old == raw else "updated")
        rows.append({"path": rel, "bytes": len(raw), "state": state})
    for warning in ctx.warnings:
        sys.stderr.write(f"envlock: warning: {warning}\n")
    if args.json:
        output.emit_json(
            {
                "dir": str(directory),
                "base_image": ctx.base_image,
                "python_from": ctx.python_from,
                "lock_digest": ctx.lock_digest,
                "files": rows,
                "warnings": list(ctx.warnings),
            }
        )
        return 0
    sys.stdout.write(
        f"rendered {directory} for {ctx.framework_title} {ctx.version} "
        f"(Python {ctx.python} from {ctx.python_from}, base {ctx.base_image})\n"
    )
    sys.stdout.write(
        output.table(
            ["file", "bytes", "state"], [[r["path"], str(r["bytes"]), r["state"]] for r in rows]
        )
    )
    return 0
