"""envlock capture: lock an existing working environment (a venv, an interpreter or
a pip freeze). The options become one ``CaptureRequest``; ``envlock.capture.capture``
does the work and its result is printed (``--json``: its ``to_dict``)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from envlock.capture import CaptureRequest, Refused, capture
from envlock.commands.options import add_index_arguments
from envlock.output import emit_json, finish


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
    add_index_arguments(p)
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


def run(args: argparse.Namespace) -> int:
    result = capture(
        CaptureRequest(
            output=args.output,
            venv=args.venv,
            freeze=args.freeze,
            python=args.python,
            os_info=args.os_info,
            with_=tuple(args.with_),
            strict=args.strict,
            cuda_source=args.cuda_source,
            resolver=args.resolver,
            index_url=args.index_url,
            indexes=tuple(args.indexes),
            routes=tuple(args.routes),
            only_binary=args.only_binary,
            offline=args.offline,
            force=args.force,
        )
    )
    if isinstance(result, Refused):  # --strict: nothing written
        sys.stderr.write(result.message)
        return result.exit_code
    if args.json:
        emit_json(result.to_dict())
        return result.exit_code
    for note in result.notes:
        sys.stderr.write(f"envlock: note: {note}\n")
    for problem in result.warnings:
        sys.stderr.write(f"envlock: warning: {problem}\n")
    finish(result.written, False)  # the lock's own table and summary
    sys.stdout.write(result.text())
    return result.exit_code
