"""Command line: parse arguments, call one pipeline function, print, exit.

This is the only place that turns an ``EnvlockError`` into an exit code. Each
sub-command lives in ``envlock/commands/<name>.py`` and provides
``register(subparsers)``, which adds its parser and sets ``func`` to a
function taking the parsed arguments and returning an exit code. Command
modules import heavy libraries only inside their functions. The parsers
themselves (argparse) are built in ``envlock.parser``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from envlock.errors import EXIT_ENVIRONMENT, EnvlockError


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The argparse parser (``envlock.parser``); given ``argv`` naming a
    sub-command, only that one is loaded."""
    from envlock import parser

    return parser.build_parser(argv)


def print_error(err: EnvlockError) -> None:
    from envlock.output import escaped

    sys.stderr.write(f"envlock: error: {escaped(err.message)}\n")
    if err.hint:
        sys.stderr.write(f"  hint: {escaped(err.hint)}\n")


def _os_failure(e: OSError) -> EnvlockError:
    from envlock.errors import EnvironmentFailure

    what = e.strerror or type(e).__name__
    paths = " -> ".join(str(p) for p in (e.filename, e.filename2) if p is not None)
    return EnvironmentFailure(
        f"{what}: {paths}" if paths else f"{what} ({e})",
        hint="check the disk space and the permissions of that path, then run again",
    )


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    from envlock import output

    try:
        fmt = output.format_from_env()
    except EnvlockError as err:
        print_error(err)
        return err.exit_code
    from envlock import deadline

    deadline.start()  # the network's budget for this command (ENVLOCK_HTTP_DEADLINE)
    stdout = sys.stdout
    sys.stdout = writer = output.stdout_writer(stdout, fmt)
    try:
        args = build_parser(argv).parse_args(argv)
        if getattr(args, "json", False):  # --json wins over ENVLOCK_FORMAT=html
            sys.stdout = writer = output.EscapingWriter(stdout)
        code = args.func(args)
    except EnvlockError as err:
        print_error(err)
        return err.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("envlock: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    except OSError as e:
        # a broken environment (a full disk, a folder that vanished, permissions
        # changed under the run) that no stage turned into its own message: exit 3
        # naming the operation and the path, never a traceback (issue #38)
        print_error(_os_failure(e))
        return EXIT_ENVIRONMENT
    finally:
        deadline.stop()
        sys.stdout = stdout
        if isinstance(writer, output.HtmlWriter):
            writer.close()
    return int(code or 0)
