"""envlock ci: matrix image builds (matrix, lock, init, build).

The group's parser only; each sub-command lives in its own module of this
package (``matrix``, ``lock``, ``init``, ``build``), which provides
``register(ci_subparsers)`` like a top-level command module.
"""

from __future__ import annotations

from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser(
        "ci",
        help="expand a version range into cells, then lock, build, smoke, push and sign each",
        description="CI matrix image builds: `ci matrix SPEC` lists the cells, `ci lock SPEC -o "
        "DIR` writes one bundle per cell, `ci build DIR` builds, smoke-tests, pushes (what "
        "passed) and signs them, `ci init` writes a GitHub Actions workflow that does the same.",
    )
    ci_sub = p.add_subparsers(dest="ci_command", metavar="COMMAND", parser_class=type(p))
    ci_sub.required = True
    from envlock.commands.ci import build, init, lock, matrix

    matrix.register(ci_sub)
    lock.register(ci_sub)
    init.register(ci_sub)
    build.register(ci_sub)
