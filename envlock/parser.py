"""The argparse side of the command line: the parser of every sub-command."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any

from envlock import __version__
from envlock.errors import EXIT_USAGE


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad usage as one line plus a hint, exit 2, and takes
    options only by their whole names: no abbreviations (``allow_abbrev``), so
    ``--in-pl`` is an error, not ``--in-place``. The ``%envlock`` magic, CI and
    envlock's own hints read the options a user typed by their names; an
    abbreviation they did not recognize sent a sync to another environment
    (issue #38). Every sub-command parser is of this class (argparse's
    ``add_subparsers`` makes its parsers of the parent's class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        # every parser names itself in the namespace; a sub-command's parser runs
        # after its parent's, so the one left is the innermost chosen
        self.set_defaults(_envlock_parser=self)

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"envlock: error: {message}\n  hint: see '{self.prog} --help'\n")
        raise SystemExit(EXIT_USAGE)

    def parse_args(self, args=None, namespace=None):  # type: ignore[no-untyped-def]
        """As argparse's, but an argument no parser took is reported by the
        sub-command it followed, so the hint names that sub-command's help."""
        ns, extras = self.parse_known_args(args, namespace)
        if extras:
            innermost = getattr(ns, "_envlock_parser", self)
            innermost.error(f"unrecognized arguments: {' '.join(extras)}")
        return ns


def _command_modules() -> list[str]:
    """Names of the sub-command modules and packages (``envlock/commands/<name>.py``,
    ``envlock/commands/<name>/``), less the shared parts the package names."""
    import pkgutil

    import envlock.commands as pkg

    return sorted(
        info.name
        for info in pkgutil.iter_modules(pkg.__path__)
        if not info.name.startswith("_") and info.name not in pkg.NOT_COMMANDS
    )


def _command_in(argv: Sequence[str], names: Sequence[str]) -> str | None:
    """The sub-command named on the command line, if it is a known one (so only
    its module needs importing); None for --help, --version or anything else."""
    for arg in argv:
        if arg.startswith("-"):
            return None
        return arg if arg in names else None
    return None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; given ``argv`` naming a sub-command, only that one is loaded
    (start-up time), else all of them (top-level help, unknown commands)."""
    parser = _Parser(
        prog="envlock",
        description="Reproducible GPU TensorFlow environments: resolve, lock, render, "
        "build, smoke-test and sign.",
    )
    parser.add_argument("--version", action="version", version=f"envlock {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    names = _command_modules()
    only = _command_in(argv, names) if argv is not None else None
    for name in [only] if only else names:
        module = importlib.import_module(f"envlock.commands.{name}")
        module.register(sub)
    return parser
