"""envlock report sbom: a CycloneDX SBOM of an image, written into its bundle, optionally signed."""

from __future__ import annotations

import argparse
from typing import Any

from envlock.output import finish


def register(rsub: Any) -> None:
    s = rsub.add_parser(
        "sbom",
        help="write a CycloneDX SBOM of an image into its bundle (and sign it)",
        description="Write DIR/sbom.cdx.json: a CycloneDX 1.6 SBOM of IMAGE, the locked "
        "closure of the image's own pylock.toml (names, versions, wheel hashes; it must "
        "list what DIR/pylock.toml lists) and the OS packages the image's dpkg database "
        "lists (both read from a container that is never started). "
        "A report signed afterwards with --lock DIR names it by digest. With --sign KEY "
        "-o FILE also write the SBOM as a signed in-toto statement (predicate type "
        "https://cyclonedx.org/bom) about IMAGE, to attach with 'envlock report attach'.",
    )
    s.add_argument(
        "image",
        metavar="IMAGE",
        help="the image: REPO@sha256:<manifest digest> (needed with --sign), or a local name or id",
    )
    s.add_argument(
        "--lock", required=True, metavar="DIR", help="the bundle folder the image was built from"
    )
    s.add_argument("--sign", metavar="KEY", help="private key (NAME.pem): also write -o FILE")
    s.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="with --sign: write the signed SBOM statement here (e.g. sbom.intoto.json)",
    )
    s.add_argument("--json", action="store_true", help="print a summary as JSON")
    s.set_defaults(func=run_sbom)


def run_sbom(args: argparse.Namespace) -> int:
    from envlock.report.sbom_run import SbomRequest, write_sbom

    request = SbomRequest(image=args.image, lock=args.lock, sign=args.sign, output=args.output)
    return finish(write_sbom(request), args.json)
