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


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="envlock",
        description="Reproducible GPU TensorFlow environments: resolve, lock, render, "
        "build, smoke-test and sign.",
    )
    parser.add_argument("--version", action="version", version=f"envlock {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in _command_modules():
        module = importlib.import_module(f"envlock.commands.{name}")
        module.register(sub)
    return parser


def print_error(err: EnvlockError) -> None:
    sys.stderr.write(f"envlock: error: {err.message}\n")
    if err.hint:
        sys.stderr.write(f"  hint: {err.hint}\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
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
