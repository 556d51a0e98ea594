"""``envlock report sbom IMAGE --lock DIR`` as one call: ``write_sbom(SbomRequest)``:
a CycloneDX SBOM of an image, written into its bundle, optionally signed."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from envlock import output
from envlock.errors import UsageError
from envlock.output import Printed


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


@dataclass(frozen=True)
class SbomRequest:
    """``envlock report sbom``'s flags as typed values."""

    image: str
    lock: str
    sign: str | None = None
    output: str | None = None


def write_sbom(args: SbomRequest) -> Printed:
    """DIR/sbom.cdx.json for IMAGE (and with ``sign``, the signed statement ``output``);
    the summary (``SbomSummary``) is --json."""
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
            [("the key", Path(args.sign or "")), ("the SBOM", lock_dir / sbom.FILE)],
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
        assert args.output is not None  # --sign and -o go together (checked above)
        env = sbom.sign_sbom(doc, key, pinned)
        fsutil.atomic_write(Path(args.output), envelope_bytes(env.to_dict()))
        summary["signed"] = args.output
    rows = [[k, str(v)] for k, v in summary.items()]
    return Printed(summary, output.table(["", "value"], rows))
