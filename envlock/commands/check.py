"""envlock check DIR: flags, the call into ``envlock.bundle.check``, printing.

Is the bundle in DIR what ``envlock lock`` would write now from DIR's recorded
input? ``envlock.bundle.check.check_folder`` recomputes every file lock writes
(the lock from the recorded SPEC, pins, indexes and instant; the rendered files
from the recorded render options) and writes nothing: exit 0 when all match, 1
naming each change.

This is its own command because it takes none of the options that make a lock
(SPEC, -o, --with, --python, --upgrade-package ...): DIR records them all. It was
``envlock lock --check DIR`` first, the spelling of ``uv lock --check``; that
spelling still runs this check, and refuses in one message whichever of lock's
own options is given beside it (``envlock.commands.lock.refuse_lock_options``),
where it once had a hand-written guard per option and let the others pass unread.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from envlock.commands.options import add_check_arguments, render_options
from envlock.output import finish, notes, progress


def register(sub: Any) -> None:
    p = sub.add_parser(
        "check",
        help="is the bundle in DIR what `envlock lock` would write now? (writes nothing)",
        description="Recompute every file `envlock lock` writes into DIR (pylock.toml, "
        "requirements.txt and the rendered bundle) from DIR's recorded input and render "
        "options, and compare; write nothing. Exit 0 when every file matches, 1 naming "
        "each change (the lock's packages, then each rendered file), 3 when the index "
        "cannot be reached. `envlock lock --check DIR` is the same check.",
    )
    p.add_argument("directory", metavar="DIR", help="the bundle folder `envlock lock -o` wrote")
    add_check_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return check(Path(args.directory), args)


def check(folder: Path, args: argparse.Namespace) -> int:
    from envlock.bundle.check import CheckRequest, check_folder

    request = CheckRequest(
        folder=folder,
        resolver=args.resolver,
        index_url=args.index_url,
        offline=args.offline,
        render=render_options(args),
    )
    result = check_folder(request, progress)
    notes(result.recovered)
    return finish(result, args.json)
