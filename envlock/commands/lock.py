"""envlock lock: flags, the call into the lock package, printing.

``envlock lock SPEC -o DIR`` resolves SPEC, then ``envlock.bundle.folder.lock_folder``
writes pylock.toml, requirements.txt and the rendered bundle in one step;
``envlock lock --check DIR`` is ``envlock check DIR`` (envlock/commands/check.py):
exit 1 when any file lock writes into DIR would change.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

from envlock.commands.options import (
    add_check_arguments,
    add_force_argument,
    add_index_arguments,
    add_pin_arguments,
    add_render_arguments,
    add_resolve_arguments,
    constraints_from_args,
    render_options,
)
from envlock.errors import UsageError
from envlock.output import finish, progress


def register(sub: Any) -> None:
    p = sub.add_parser(
        "lock",
        help="pin the whole dependency closure with hashes and write the bundle",
        description="Resolve SPEC as 'envlock resolve' does, then lock the full dependency "
        "closure for the target (Linux x86_64 manylinux, the resolved CPython minor) with "
        "hashes: DIR/pylock.toml (PEP 751), DIR/requirements.txt and the rendered bundle. "
        "With --gpu, nvidia-* libraries are capped to versions that run on that GPU "
        "(matrices/libraries.toml; each cap is a why line with its source); without it, "
        "a locked version that does not run on some GPUs is a warning naming them. "
        "Exit 2 when the pins conflict, 3 when the index cannot be reached.",
    )
    add_resolve_arguments(p, spec_optional=True)  # SPEC is not needed for --check DIR
    add_pin_arguments(p)
    p.add_argument(
        "--pins-from",
        metavar="DIR",
        help="also pin what the lock in DIR was made with (its --with and -r lines, as its "
        "pylock.toml records them), before any --with given here: another release or "
        "Python with the same pins",
    )
    p.add_argument(
        "--resolver",
        choices=("uv", "pip"),
        default=None,
        help="resolver engine (default uv; pip is the fallback; --check: the recorded one)",
    )
    p.add_argument(
        "--index-url",
        metavar="URL",
        help="simple-API index (default: the pip/uv configuration of this machine)",
    )
    add_index_arguments(p)
    p.add_argument(
        "--only-binary",
        action="store_true",
        help="lock wheels only, as pip's and uv's --only-binary :all:: a package with no "
        "wheel for the target is exit 2, named (default: its source archive is locked by "
        "sha256 and built where the lock is installed, its build requirements pinned too)",
    )
    p.add_argument(
        "--offline",
        action="store_true",
        help="use only uv's cached index metadata (no network)",
    )
    p.add_argument("-o", "--output", metavar="DIR", help="bundle folder to write")
    p.add_argument(
        "-P",
        "--upgrade-package",
        dest="upgrade_package",
        action="append",
        default=[],
        metavar="NAME",
        help="with a lock already in DIR: let NAME (and what it forces) move to the newest "
        "version that fits; every other package keeps its locked version (repeatable, "
        "as uv's and pip-compile's --upgrade-package)",
    )
    p.add_argument(
        "--check",
        metavar="DIR",
        help="recompute every file lock writes into DIR (lock files and bundle) from its "
        "recorded input and render options; write nothing; exit 1 if any would change "
        "(`envlock check DIR`, which takes only the options the check uses)",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_render_arguments(p)
    add_force_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.check:  # the spelling of `uv lock --check`: `envlock check DIR`
        from envlock.commands.check import check

        refuse_lock_options(args, args.check)
        return check(Path(args.check), args)
    if not args.spec:
        raise UsageError("what to lock is missing", hint="envlock lock 'tensorflow==2.15' -o DIR")
    if not args.output:
        raise UsageError("no output folder", hint=f"envlock lock '{args.spec}' -o DIR")
    from envlock.bundle.locking import LockSpecRequest, lock_spec

    request = LockSpecRequest(
        constraints=constraints_from_args(args),
        output=Path(args.output),
        pins_from=args.pins_from,
        with_requirements=tuple(args.with_requirements),
        requirement_files=tuple(args.requirement_files),
        resolver=args.resolver or "uv",
        index_url=args.index_url,
        indexes=tuple(args.indexes),
        routes=tuple(args.routes),
        offline=args.offline,
        render=render_options(args, os=args.os),
        force=args.force,
        upgrade=tuple(args.upgrade_package),
    )
    return finish(lock_spec(request, progress), args.json)


def refuse_lock_options(args: argparse.Namespace, folder: str) -> None:
    """``envlock lock --check DIR``: exit 2 naming every option of lock's own that was
    given, since the check reads them all from DIR. Which options those are comes
    from the two parsers (lock's, which parsed ``args``, and this command's), so an
    option added to lock is refused here without a line of its own."""
    lock_parser = args._envlock_parser
    defaults = vars(lock_parser.parse_args([]))
    probe = argparse.ArgumentParser(add_help=False)
    add_check_arguments(probe)
    taken = {a.dest for a in probe._actions} | {"check", "_envlock_parser", "func", "command"}
    given = [
        action.option_strings[-1] if action.option_strings else str(action.metavar)
        for action in lock_parser._actions
        if action.dest not in taken
        and action.dest != "help"
        and getattr(args, action.dest, None) != defaults.get(action.dest)
    ]
    if given:
        what = ", ".join(given)
        raise UsageError(
            f"--check DIR compares {folder} with what its recorded input locks now, so it "
            f"takes none of the options that make a lock: {what} "
            f"{'is' if len(given) == 1 else 'are'} not used",
            hint=f"envlock check {shlex.quote(folder)}",
        )
