"""Command line: parse arguments, call one pipeline function, print, exit.

This is the only place that turns an ``EnvlockError`` into an exit code. Each
sub-command lives in ``envlock/commands/<name>.py`` and provides
``register(subparsers)``, which adds its parser and sets ``func`` to a
function taking the parsed arguments and returning an exit code. Command
modules import heavy libraries only inside their functions.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from envlock import __version__
from envlock.errors import EXIT_USAGE, EnvlockError


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad usage as one line plus a hint, exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"envlock: error: {message}\n  hint: see '{self.prog} --help'\n")
        raise SystemExit(EXIT_USAGE)


def _command_modules() -> list[str]:
    import envlock.commands as pkg

    names = [m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_")]
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


def print_error(err: EnvlockError) -> None:
    sys.stderr.write(f"envlock: error: {err.message}\n")
    if err.hint:
        sys.stderr.write(f"  hint: {err.hint}\n")


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    try:
        code = args.func(args)
    except EnvlockError as err:
        print_error(err)
        return err.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("envlock: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    return int(code or 0)
