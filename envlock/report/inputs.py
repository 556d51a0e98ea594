"""Report files as the commands read them: the bytes, or a DSSE envelope.

``envlock verify``, ``report show`` and ``report attach`` read a report file
(or standard input, ``-``) through ``read_report``; ``read_envelope`` parses it
with the strict reader (a DSSE envelope, or a Sigstore bundle holding one), and
a file that is neither is an input error (exit 2) naming the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from envlock.errors import DataError

if TYPE_CHECKING:
    from envlock.report.dsse import Envelope


def read_report(path: str) -> bytes:
    from envlock.fsutil import read_input

    return read_input(
        path, "report", hint="give the file 'envlock report sign -o' wrote", stdin=True
    )


def read_envelope(path: str) -> Envelope:
    """The report file as a DSSE envelope, through the strict reader; a file
    that is not one is an input error (exit 2) naming the file. A Sigstore
    bundle v0.3 (a ``.sigstore.json`` that oras or cosign fetched from the
    registry) is read as the DSSE envelope it holds."""
    from envlock.report import dsse, sigstore

    data = read_report(path)
    try:
        return dsse.parse_envelope(data)
    except dsse.EnvelopeError as e:
        if b'"dsseEnvelope"' in data and sigstore.BUNDLE_MEDIA_TYPE.encode() in data:
            try:
                return sigstore.parse_bundle(data)[0]
            except sigstore.BundleError as b:
                raise DataError(f"{path}: {b}", hint="is this a bundle envlock attached?") from b
        raise DataError(f"{path}: {e}", hint="is this a report 'envlock report sign' wrote?") from e


def sign_inputs(key: Path, result: str | None, lock_dir: Path | None) -> list[tuple[str, Path]]:
    """What a signing run (``report sign``, ``smoke --sign``) reads, which its -o
    must never overwrite: (what, path) pairs for ``refuse_clobber``."""
    from envlock.report.keys import key_paths
    from envlock.report.statement import BUNDLE_FILES

    inputs = [("the private key --key", key)]
    pub = key_paths(key)[1] if key.name.endswith(".pem") else None
    if pub is not None and pub != key and pub.exists():
        inputs.append(("the public key", pub))
    if result and result != "-":
        inputs.append(("the result", Path(result)))
    if lock_dir is not None:
        inputs += [("the lock file", lock_dir / name) for name in BUNDLE_FILES]
    return inputs
