"""envlock report: sign a smoke result made elsewhere; show, attach a report; a page of many.

The group's parser only; each action lives in its own module of this package
(``sign``, ``attach``, ``show``, ``page``), which provides ``register(rsub)``.
"""

from __future__ import annotations

from typing import Any

from envlock.report.inputs import sign_inputs

__all__ = ["register", "sign_inputs"]


def register(sub: Any) -> None:
    p = sub.add_parser("report", help="sign or show env reports (in-toto test results)")
    rsub = p.add_subparsers(dest="report_command", metavar="ACTION")
    rsub.required = True

    from envlock.commands.report import attach, page, show, sign

    sign.register(rsub)
    attach.register(rsub)
    show.register(rsub)
    page.register(rsub)
