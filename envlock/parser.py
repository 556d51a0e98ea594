"""The argparse side of the command line: the parser of every sub-command.

``envlock.cli`` imports this only when a command line is not one of the
plain ones a command reads itself (``quick_args``, see ``envlock.cli``):
argparse, with gettext and locale, and building its parsers cost more than a
whole ``envlock resolve`` of its own.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from envlock import __version__
from envlock.errors import EXIT_USAGE

TYPE_CHECKING = False  # typing is not imported at run time (start-up: see envlock.record)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any


def _columns() -> int:
    """The terminal width as ``shutil.get_terminal_size()`` gives it ($COLUMNS,
    else the terminal of stdout, else 80), without importing shutil (which
    drags in bz2, lzma and fnmatch: a few ms of every start-up)."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class _Formatter(argparse.HelpFormatter):
    """argparse's help formatter, its width found without importing shutil.

    argparse builds a formatter for every ``add_argument()`` (to check the
    metavar), and the default one asks ``shutil`` for the terminal width: an
    import that costs more than envlock's own start-up work. Same width."""

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
        **kwargs: Any,
    ) -> None:
        if width is None:
            width = _columns() - 2
        super().__init__(prog, indent_increment, max_help_position, width, **kwargs)


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad usage as one line plus a hint, exit 2."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"envlock: error: {message}\n  hint: see '{self.prog} --help'\n")
        raise SystemExit(EXIT_USAGE)


def _command_modules() -> list[str]:
    """Names of the sub-command modules (``envlock/commands/<name>.py``),
    listed from the folder (pkgutil costs more to import than this takes)."""
    import envlock.commands as pkg

    names: set[str] = set()
    for folder in pkg.__path__:
        try:
            entries = os.listdir(folder)
        except OSError:
            continue
        for entry in entries:
            stem, dot, ext = entry.partition(".")
            if dot and ext in ("py", "pyc") and stem.isidentifier() and not stem.startswith("_"):
                names.add(stem)
    return sorted(names)


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
