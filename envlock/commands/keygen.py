"""envlock keygen: make a signing key pair for env reports."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from envlock import output


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], *, alias: bool = True
) -> None:
    """``envlock report keygen``; ``alias``: the same command at the top level
    (``envlock keygen``), kept as an alias of it."""
    from envlock.report.keys import DEFAULT_KEY_TYPE, KEY_TYPES, PASSPHRASE_ENV

    p = sub.add_parser(
        "keygen",
        help="make a key pair for signing env reports"
        + (" (alias of `envlock report keygen`)" if alias else ""),
        description=("An alias of `envlock report keygen`, the same command. " if alias else "")
        + "Write NAME.pem (private, mode 0600) and NAME.pub.pem (public). "
        f"The private key is encrypted when {PASSPHRASE_ENV} is set. Keep it outside "
        "any bundle folder: it must never enter a build context or an image.",
    )
    p.add_argument(
        "--type",
        dest="key_type",
        choices=KEY_TYPES,
        default=DEFAULT_KEY_TYPE,
        help=f"key algorithm (default {DEFAULT_KEY_TYPE}, which cosign verifies)",
    )
    p.add_argument(
        "-o", "--output", required=True, metavar="NAME", help="write NAME.pem and NAME.pub.pem"
    )
    p.add_argument("--force", action="store_true", help="replace an existing key pair")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from envlock.report.keys import write_keypair

    pair = write_keypair(Path(args.output), args.key_type, force=args.force)
    if args.json:
        output.emit_json(pair.to_dict())
        return 0
    rows = [
        [
            "private key",
            str(pair.private_path),
            "mode 0600, " + ("encrypted" if pair.encrypted else "not encrypted"),
        ],
        ["public key", str(pair.public_path), "give this to whoever verifies"],
        ["type", pair.key_type, ""],
        ["keyid", pair.keyid, "sha256 of the public key (DER SubjectPublicKeyInfo)"],
    ]
    sys.stdout.write(output.table(["", "value", "note"], rows))
    return 0
