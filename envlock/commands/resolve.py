"""``envlock resolve SPEC``: what goes with a TensorFlow requirement, and why.

The resolve flags are declared in ``envlock.commands.options`` (``envlock lock``
takes the same ones); ``constraints_from_args`` turns the parsed flags into
plain ``Constraints`` once, reading the host for ``--driver auto``, so the
resolve package never sees argparse.
"""

from __future__ import annotations

import argparse
from typing import Any

from envlock.commands.options import add_resolve_arguments, constraints_from_args
from envlock.output import finish

__all__ = ["add_resolve_arguments", "constraints_from_args", "register", "run"]

DESCRIPTION = (
    "Resolve a TensorFlow, torch or JAX requirement against envlock's matrices: the "
    "newest release (and CUDA build) satisfying every constraint, its Python, CUDA, "
    "cuDNN, minimum driver and nvidia/cuda base image, with the reasons; several SPECs: "
    "one answer for one environment. Offline and fast."
)


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser(
        "resolve",
        help="which TensorFlow/torch/JAX, Python, CUDA, cuDNN, driver and base image go together",
        description=DESCRIPTION,
    )
    add_resolve_arguments(parser)
    parser.add_argument(
        "more",
        metavar="SPEC",
        nargs="*",
        default=[],
        help="more frameworks of the same environment ('tensorflow==2.20 torch==2.9'): one "
        "answer on one CUDA major and Python for all",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from envlock.resolve.answer import answer

    constraints = constraints_from_args(args)
    return finish(answer(constraints, list(getattr(args, "more", []) or [])), args.json)
