"""Command line: parse arguments, call one pipeline function, print, exit.

This is the only place that turns an ``EnvlockError`` into an exit code. Each
sub-command lives in ``envlock/commands/<name>.py`` and provides
``register(subparsers)``, which adds its parser and sets ``func`` to a
function taking the parsed arguments and returning an exit code. Command
modules import heavy libraries only inside their functions.

argparse itself lives in ``envlock.parser``. A command named in
``QUICK_COMMANDS`` also provides ``quick_args(argv)``, which reads its plain
command lines through ``quick_parse`` without argparse (``envlock resolve``
must start within 2.5x of a bare Python; argparse costs ~8 ms of that) and
returns None for any other line, which argparse then reads.
"""

from __future__ import annotations

import sys

from envlock.errors import EnvlockError

TYPE_CHECKING = False  # typing is not imported at run time (start-up: see envlock.record)
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from types import SimpleNamespace

# Commands whose module reads its plain command lines itself: ``quick_args(argv)``
# returns the namespace argparse would give, or None (then argparse decides).
QUICK_COMMANDS = ("resolve",)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The argparse parser (``envlock.parser``); given ``argv`` naming a
    sub-command, only that one is loaded."""
    from envlock import parser

    return parser.build_parser(argv)


def quick_parse(
    argv: Sequence[str],
    positional: str,
    valued: dict[str, tuple[str, tuple[str, ...] | None, bool]],
    switches: dict[str, str],
) -> dict[str, object] | None:
    """Read a command line of the plain forms without argparse: one positional
    argument (stored as ``positional``), ``--flag VALUE`` / ``--flag=VALUE`` for
    ``valued`` (flag -> (dest, choices or None, append)), and bare ``switches``
    (flag -> dest). The values are those argparse gives for the same line; any
    other line (help, abbreviations, unknown flags, values starting with "-",
    a missing or bad value, a second positional) gives None, and argparse then
    reads it, with its own messages (tests/test_cli_quick.py compares the two).
    """
    out: dict[str, object] = {}
    for dest, _choices, append in valued.values():
        out[dest] = [] if append else None
    for dest in switches.values():
        out[dest] = False
    seen_positional = False
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in switches:
            out[switches[arg]] = True
            i += 1
            continue
        name, eq, value = arg.partition("=")
        if name in valued:
            if not eq:
                if i + 1 >= len(argv):
                    return None
                value = argv[i + 1]
                i += 2
            else:
                i += 1
            if value.startswith("-") or (eq and not value):
                return None
            dest, choices, append = valued[name]
            if choices is not None and value not in choices:
                return None
            if append:
                out[dest].append(value)  # type: ignore[attr-defined]
            else:
                out[dest] = value
            continue
        if arg.startswith("-") or seen_positional:
            return None
        out[positional] = arg
        seen_positional = True
        i += 1
    return out if seen_positional else None


def _quick_args(argv: Sequence[str]) -> SimpleNamespace | None:
    if not argv or argv[0] not in QUICK_COMMANDS:
        return None
    name = f"envlock.commands.{argv[0]}"
    __import__(name)  # not importlib.import_module: the importlib package imports warnings
    module = sys.modules[name]
    args: SimpleNamespace | None = module.quick_args(argv[1:])
    return args


def print_error(err: EnvlockError) -> None:
    sys.stderr.write(f"envlock: error: {err.message}\n")
    if err.hint:
        sys.stderr.write(f"  hint: {err.hint}\n")


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    quick = _quick_args(argv)
    args: argparse.Namespace | SimpleNamespace = (
        quick if quick is not None else build_parser(argv).parse_args(argv)
    )
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
