"""envlock report attach: attach a signed report to its image in the registry."""

from __future__ import annotations

import argparse
from typing import Any

from envlock.output import finish


def register(rsub: Any) -> None:
    a = rsub.add_parser(
        "attach",
        help="attach a signed report or SBOM to its image in the registry (cosign's layouts)",
        description="Push REPORT (a signed test result, or a signed SBOM from 'envlock report "
        "sbom --sign') as evidence about REPO@sha256:<digest>, whose subject it must be. "
        "--format referrers (the default): a Sigstore bundle v0.3 in an OCI artifact manifest "
        "whose subject is the image (cosign v3's layout), found through the registry's "
        "referrers API, or through the referrers tag sha256-<digest> (an OCI image index, "
        "updated in place) where the registry has no such API. --format legacy: a layer of "
        "the manifest tagged sha256-<digest>.att (cosign's older layout; attestations already "
        "there are kept). Exit 3 when the registry cannot be reached or refuses.",
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
    a.add_argument(
        "--format",
        choices=("referrers", "legacy"),
        default="referrers",
        help="referrers: a Sigstore bundle as an OCI 1.1 referrer (default); "
        "legacy: cosign's sha256-<digest>.att tag",
    )
    a.add_argument("--json", action="store_true", help="print the result as JSON")
    a.set_defaults(func=run_attach)


def run_attach(args: argparse.Namespace) -> int:
    from envlock.report.attach import attach_file

    done = attach_file(args.report, args.image, insecure=args.insecure_registry, format=args.format)
    return finish(done, args.json)
