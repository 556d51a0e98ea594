"""envlock report: every report action in one tree: keygen, sign, verify, attach, sbom, show,
page.

The group's parser only; each action lives in its own module of this package
(``sign``, ``attach``, ``sbom``, ``show``, ``page``) or, for ``keygen`` and ``verify``,
in ``envlock.commands.keygen``/``verify``, which also register the top-level
``envlock keygen``/``envlock verify`` as aliases of the same commands.
"""

from __future__ import annotations

from typing import Any

from envlock.report.inputs import sign_inputs

__all__ = ["register", "sign_inputs"]


def register(sub: Any) -> None:
    p = sub.add_parser(
        "report",
        help="keygen, sign, verify, attach, show and page env reports (in-toto test results)",
        description="Every action on env reports. `envlock keygen` and `envlock verify` are "
        "aliases of `envlock report keygen` and `envlock report verify`.",
    )
    rsub = p.add_subparsers(dest="report_command", metavar="ACTION")
    rsub.required = True

    from envlock.commands import keygen, verify
    from envlock.commands.report import attach, page, sbom, show, sign

    keygen.register(rsub, alias=False)
    sign.register(rsub)
    verify.register(rsub, alias=False)
    attach.register(rsub)
    sbom.register(rsub)
    show.register(rsub)
    page.register(rsub)
