"""envlock notebook install|uninstall: flags, the call into
``envlock.venv.notebook_install``, printing."""

from __future__ import annotations

import argparse
from typing import Any

from envlock.output import finish


def register(sub: Any) -> None:
    p = sub.add_parser(
        "notebook",
        help="install the notebook extension (the envlock line magic) into a kernel's interpreter",
        description="`notebook install --venv PY` makes `%load_ext envlock` work in PY (a "
        "Jupyter kernel's sys.executable, a venv folder, any interpreter) without installing "
        "envlock or its dependencies there: a .pth file in PY's site-packages names a folder "
        "in envlock's data dir holding the standard-library-only extension, which runs this "
        "envlock outside the kernel. No distribution is added (pip freeze and capture do not "
        "see it). `notebook uninstall --venv PY` removes it. Exit 0 done, 2 bad input "
        "(no such interpreter, a Python older than 3.8, no writable site-packages), 3 the "
        "interpreter did not run.",
    )
    nsub = p.add_subparsers(dest="notebook_command", metavar="ACTION", parser_class=type(p))
    nsub.required = True
    for name, help_text in (
        ("install", "make the notebook extension loadable in the interpreter"),
        ("uninstall", "remove what notebook install wrote for the interpreter"),
    ):
        q = nsub.add_parser(
            name, help=help_text, description=help_text.replace("%%", "%").capitalize() + "."
        )
        q.add_argument(
            "--venv",
            metavar="PATH",
            required=True,
            help="the kernel's interpreter (its sys.executable) or venv folder",
        )
        q.add_argument("--json", action="store_true", help="print the result as JSON")
        q.set_defaults(func=install if name == "install" else uninstall)


def install(args: argparse.Namespace) -> int:
    from envlock.venv import notebook_install

    return finish(notebook_install.install(args.venv), args.json)


def uninstall(args: argparse.Namespace) -> int:
    from envlock.venv import notebook_install

    return finish(notebook_install.uninstall(args.venv), args.json)
