"""envlock render DIR: render the bundle again from an existing lock (no resolving)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from envlock import output
from envlock.commands.options import add_force_argument, add_render_arguments, render_options


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "render",
        help="re-render a bundle's Dockerfile, bootstrap.sh, ... from its lock",
        description="Render DIR's Dockerfile, .dockerignore, bootstrap.sh, README.md, smoke "
        "harness, expect.json and runtime files from DIR/pylock.toml, without resolving "
        "again. Options not given are those DIR/render.json records (edit or delete it to "
        "drop one); an existing runtime.json is kept. All files are written in one step "
        "(DIR/envlock-manifest.json lists them): a failure leaves the bundle as it was, an "
        "interrupted write is finished or undone by the next command on DIR.",
    )
    p.add_argument("dir", metavar="DIR", help="the bundle folder (holds pylock.toml)")
    add_render_arguments(p)
    p.add_argument(
        "--os",
        metavar="ubuntuXX.YY",
        help="the same nvidia/cuda image on another Ubuntu release (e.g. ubuntu24.04)",
    )
    add_force_argument(p)
    p.add_argument("--json", action="store_true", help="print what was written as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from envlock.bundle.folder import render_folder

    directory = Path(args.dir)
    rendered = render_folder(directory, render_options(args, os=args.os), force=args.force)
    ctx = rendered.context
    for note in rendered.notes:
        sys.stderr.write(f"envlock: note: {note}\n")
    for warning in ctx.warnings:
        sys.stderr.write(f"envlock: warning: {warning}\n")
    if args.json:
        output.emit_json(
            {
                "dir": str(directory),
                "base_image": ctx.base_image,
                "python_from": ctx.python_from,
                "lock_digest": ctx.lock_digest,
                "files": list(rendered.files),
                "warnings": list(ctx.warnings),
            }
        )
        return 0
    sys.stdout.write(
        f"rendered {directory} for {ctx.framework_title} {ctx.version} "
        f"(Python {ctx.python} from {ctx.python_from}, base {ctx.base_image})\n"
    )
    rows = [[r["path"], str(r["bytes"]), r["state"]] for r in rendered.files]
    sys.stdout.write(output.table(["file", "bytes", "state"], rows))
    return 0
