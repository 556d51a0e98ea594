"""``envlock matrix refresh|check|show``: the TensorFlow matrix and its checks."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from envlock.output import finish


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "matrix",
        help="show, check or refresh the version matrices",
        description="The version matrices that envlock resolves against.",
    )
    sub = parser.add_subparsers(dest="matrix_command", metavar="ACTION")
    sub.required = True

    p = sub.add_parser(
        "refresh",
        help="regenerate tensorflow.toml from the package index",
        description="Read every TensorFlow 2.x release's facts from its Linux x86_64 "
        "wheel on the package index (by HTTP range requests) and write tensorflow.toml.",
    )
    p.add_argument("--index-url", help="simple API of the package index (default: pip's)")
    p.add_argument(
        "--project",
        choices=("tensorflow", "torch", "jax"),
        default="tensorflow",
        help="which matrix: tensorflow.toml (default), or torch.toml / jax.toml (one row per "
        "release and CUDA build, read from the torch and jax-cudaNN-plugin wheels)",
    )
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        help="file to write (default: the tensorflow.toml envlock ships)",
    )
    p.add_argument("--jobs", type=int, default=None, help="releases read at once (default: 16)")
    p.add_argument(
        "--notes-only",
        action="store_true",
        help="offline: only re-apply matrices/tf-notes.toml to the existing file",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="write nothing: compare the index with the matrix (-o FILE, default the shipped "
        "one) and exit 1 naming each release or release candidate it lacks and each row "
        "that differs",
    )
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    p.set_defaults(func=run_refresh)

    c = sub.add_parser(
        "check",
        help="validate the matrices and cross-check them with the tested configurations",
        description="Validate every matrix file and compare tensorflow.toml with "
        "TensorFlow's tested-configurations table. A disagreement without a recorded "
        "note fails (exit 1).",
    )
    c.add_argument("--matrix", type=Path, help="check this tensorflow.toml instead")
    c.add_argument("--json", action="store_true", help="print the report as JSON")
    c.set_defaults(func=run_check)

    s = sub.add_parser(
        "show",
        help="print the TensorFlow releases",
        description="Print the rows of tensorflow.toml.",
    )
    s.add_argument("--matrix", type=Path, help="show this tensorflow.toml instead")
    s.add_argument("--json", action="store_true", help="print a JSON list of rows")
    s.set_defaults(func=run_show)


def run_refresh(args: argparse.Namespace) -> int:
    from envlock.matrix.actions import RefreshRequest, refresh_matrix

    request = RefreshRequest(
        index_url=args.index_url,
        project=args.project,
        output=args.output,
        jobs=args.jobs,
        notes_only=args.notes_only,
        check=args.check,
        json=args.json,
    )
    return finish(refresh_matrix(request), args.json)


def run_check(args: argparse.Namespace) -> int:
    from envlock.matrix.actions import check_matrices

    return finish(check_matrices(args.matrix), args.json)


def run_show(args: argparse.Namespace) -> int:
    from envlock.matrix.actions import show_matrix

    return finish(show_matrix(args.matrix), args.json)
