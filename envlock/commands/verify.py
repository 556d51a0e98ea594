"""envlock verify: check a signed env report against a public key, a lock, an image."""

from __future__ import annotations

import argparse

from envlock.output import finish


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], *, alias: bool = True
) -> None:
    """``envlock report verify``; ``alias``: the same command at the top level
    (``envlock verify``), kept as an alias of it."""
    p = sub.add_parser(
        "verify",
        help="verify a signed env report"
        + (" (alias of `envlock report verify`)" if alias else ""),
        description=("An alias of `envlock report verify`, the same command. " if alias else "")
        + "Exit 0 when the report's signature is valid for KEY over the DSSE PAE, "
        "it is an in-toto test-result statement, and the lock and image, when given, match. "
        "Otherwise exit 1 saying what failed. A valid report of a FAILED smoke test verifies "
        "(exit 0) but is shown as FAILED; add --require-pass to exit 1 unless it PASSED or WARNED, "
        "and --require-gpu to exit 1 unless the GPU was really used. With --image "
        "REPO@sha256:<digest> no Docker Engine is needed; when the report's signed smoke result "
        "records the image id it ran, the registry's manifest is read and its config digest must "
        "be that image id. --from-registry checks the reports and SBOMs attached to that image "
        "in its registry instead of a file: Sigstore bundles listed by the referrers API or the "
        "sha256-<hex> referrers tag, then cosign's older sha256-<hex>.att tag; a report that "
        "names an SBOM verifies only with that SBOM.",
    )
    p.add_argument(
        "report",
        metavar="REPORT",
        nargs="?",
        help="the DSSE envelope (.intoto.json), or a Sigstore bundle holding one "
        "(.sigstore.json, as oras or cosign fetch it); not with --from-registry",
    )
    p.add_argument("--key", required=True, metavar="PUB", help="trusted public key (NAME.pub.pem)")
    p.add_argument(
        "--lock",
        metavar="DIR",
        help="bundle folder whose pylock.toml, requirements.txt "
        "and Dockerfile must match the report",
    )
    p.add_argument(
        "--image",
        metavar="REF",
        help="the image that must be the subject: REPO@sha256:<manifest digest> (checked "
        "without Docker), or a local image name or id (looked up in the Docker Engine)",
    )
    p.add_argument(
        "--require-pass",
        action="store_true",
        help="also exit 1 unless the smoke result is PASSED or WARNED (for CI)",
    )
    p.add_argument(
        "--require-gpu",
        action="store_true",
        help="also exit 1 unless the signed smoke result shows an op really ran on the GPU "
        "(a CPU-only --allow-cpu run is WARNED and passes --require-pass, not this)",
    )
    p.add_argument(
        "--from-registry",
        action="store_true",
        help="verify the reports and SBOMs attached to --image REPO@sha256:... in its "
        "registry (both layouts); exit 0 when one report verifies (with the SBOM it names)",
    )
    p.add_argument(
        "--insecure-registry",
        action="store_true",
        help="with --from-registry: plain HTTP to a registry that is not on this machine "
        "(a loopback registry always gets plain HTTP)",
    )
    p.add_argument("--json", action="store_true", help="print the verification as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from envlock.report.verify_run import VerifyRequest, verify_report

    request = VerifyRequest(
        report=args.report,
        key=args.key,
        lock=args.lock,
        image=args.image,
        require_pass=args.require_pass,
        require_gpu=args.require_gpu,
        from_registry=args.from_registry,
        insecure_registry=args.insecure_registry,
    )
    return finish(verify_report(request), args.json)
