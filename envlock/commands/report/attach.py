"""envlock report attach: attach a signed report to its image in the registry."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from envlock import output


def register(rsub: Any) -> None:
    a = rsub.add_parser(
        "attach",
        help="attach a signed report to its image in the registry (cosign's layout)",
        description="Push REPORT as an attestation of REPO@sha256:<digest>: a layer of the OCI "
        "manifest tagged sha256-<digest>.att in the same repository, where cosign looks "
        "(attestations already there are kept). The report's subject must be that image. "
        "Exit 3 when the registry cannot be reached or refuses.",
    )
    a.add_argument("report", metavar="REPORT", help="the DSSE envelope (.intoto.json)")
    a.add_argument(
        "--image", required=True, metavar="REPO@sha256:DIGEST", help="the image, by digest"
    )
    a.add_argument(
        "--insecure-registry",
        action="store_true",
        help="plain HTTP to a registry that is not on this machine "
        "(a loopback registry always gets plain HTTP)",
    )
    a.add_argument("--json", action="store_true", help="print the result as JSON")
    a.set_defaults(func=run_attach)


def run_attach(args: argparse.Namespace) -> int:
    from envlock.image import registry
    from envlock.report.attach import attach_report, parse_report
    from envlock.report.inputs import read_report

    data = read_report(args.report)
    image = registry.pinned(args.image)  # a bad --image is named before a bad report
    envelope = parse_report(data, args.report)
    tag = attach_report(
        envelope, image, data=data, insecure=args.insecure_registry, where=args.report
    )
    if args.json:
        output.emit_json({"report": args.report, "image": args.image, "attached": tag})
    else:
        sys.stdout.write(f"attached {args.report} to {args.image} as {tag}\n")
    return 0
