"""envlock report sbom: a CycloneDX SBOM of an image, written into its bundle, optionally signed."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TypedDict

from envlock import output
from envlock.errors import UsageError


class _SummaryBody(TypedDict):
    sbom: str
    digest: str
    python_components: int
    os_components: int
    os_database: str  # "dpkg" (read), "absent" (the image has no dpkg database)
    distro: str


class SbomSummary(_SummaryBody, total=False):
    """What ``report sbom`` prints (``--json``) or lists."""

    signed: str  # the signed attestation's file, when one was written


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
    import envlock
    from envlock import fsutil
    from envlock.image import ref as imageref
    from envlock.lock.pylock import read_lock
    from envlock.report import envelope_bytes, sbom, statement
    from envlock.report import keys as keymod
    from envlock.report.outputs import refuse_clobber

    lock_dir = Path(args.lock)
    if (args.sign is None) != (args.output is None):
        raise UsageError(
            "--sign and -o go together",
            hint=f"envlock report sbom {args.image} --lock {args.lock} "
            "--sign KEY.pem -o sbom.intoto.json",
        )
    ref = imageref.match(args.image)
    pinned = ref.at(ref.digest) if ref is not None and ref.digest is not None else None
    if args.sign and pinned is None:
        raise UsageError(
            f"--sign needs the image by digest, not {args.image!r}",
            hint="give REPO@sha256:<digest> (the digest `envlock build --push` printed)",
        )
    if args.output:
        out = Path(args.output)
        refuse_clobber(
            out,
            [("the key", Path(args.sign)), ("the SBOM", lock_dir / sbom.FILE)],
            hint="write the signed SBOM to a new file, e.g. -o sbom.intoto.json",
        )
    locked = read_lock(lock_dir)
    key = keymod.load_private(Path(args.sign)) if args.sign else None
    packages = sbom.image_packages(args.image)
    inside = sbom.image_lock(packages, args.image, locked, str(lock_dir / "pylock.toml"))
    if packages.os_database == "absent":
        sys.stderr.write(
            f"note: {args.image} has no {sbom.DPKG_STATUS}: the SBOM lists no OS packages\n"
        )
    doc = sbom.make_sbom(
        inside,
        packages,
        image=str(pinned) if pinned is not None else args.image,
        envlock_version=envlock.__version__,
        created=statement.now_rfc3339(),
    )
    data = sbom.sbom_bytes(doc)
    fsutil.atomic_write(lock_dir / sbom.FILE, data)
    summary: SbomSummary = {
        "sbom": str(lock_dir / sbom.FILE),
        "digest": f"sha256:{sbom.sbom_digest(doc)}",
        "python_components": len(inside.packages),
        "os_components": len(packages.packages),
        "os_database": packages.os_database,
        "distro": packages.distro,
    }
    if key is not None and pinned is not None:
        env = sbom.sign_sbom(doc, key, pinned)
        fsutil.atomic_write(Path(args.output), envelope_bytes(env.to_dict()))
        summary["signed"] = args.output
    if args.json:
        output.emit_json(summary)
    else:
        rows = [[k, str(v)] for k, v in summary.items()]
        sys.stdout.write(output.table(["", "value"], rows))
    return 0
