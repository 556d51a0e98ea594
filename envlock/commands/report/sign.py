"""envlock report sign: wrap a smoke result made elsewhere in a signed in-toto statement."""

from __future__ import annotations

import argparse
from typing import Any

from envlock.output import finish


def register(rsub: Any) -> None:
    s = rsub.add_parser(
        "sign",
        help="sign a smoke result JSON",
        description="Wrap a smoke result in an in-toto test-result Statement and sign it "
        "(DSSE). The subject is the image (--image) or, for a host run, the lock digest.",
    )
    s.add_argument("result", metavar="RESULT.json", help="smoke result JSON ('-' for stdin)")
    s.add_argument("--key", required=True, metavar="KEY", help="private key (NAME.pem)")
    s.add_argument(
        "--lock",
        metavar="DIR",
        help="bundle folder: digests of pylock.toml, "
        "requirements.txt and the Dockerfile go into the report",
    )
    s.add_argument(
        "--image",
        metavar="REF",
        help="the image the smoke test ran in (the subject): REPO@sha256:<manifest digest> "
        "names the repository and digest (no Docker Engine needed), a local name or id "
        "its image id",
    )
    s.add_argument("--url", help="where the run can be seen (a CI job URL), recorded in the report")
    s.add_argument(
        "-o", "--output", required=True, metavar="REPORT", help="write the envelope here"
    )
    s.add_argument("--json", action="store_true", help="print a summary as JSON")
    s.set_defaults(func=run_sign)


def run_sign(args: argparse.Namespace) -> int:
    from envlock.report.sign_run import SignRequest, sign_result_file

    request = SignRequest(
        result=args.result,
        key=args.key,
        output=args.output,
        lock=args.lock,
        image=args.image,
        url=args.url,
    )
    return finish(sign_result_file(request), args.json)
