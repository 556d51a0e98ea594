"""Signed env reports: in-toto test-result Statements in DSSE envelopes.

``sign_result`` turns a smoke result into a signed envelope; ``verify`` checks
one against a public key and, when given, a lock folder and an image id.
Only ``cryptography`` is used, imported lazily.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envlock.errors import DataError
from envlock.report import dsse, statement, strict, trusted
from envlock.report import keys as keymod
from envlock.report.verify import Verification, verify, verify_envelope

if TYPE_CHECKING:
    from envlock.image.ref import ImageRef
    from envlock.smoke.result import SmokeResult

__all__ = [
    "SignedReport",
    "Verification",
    "envelope_bytes",
    "sign_envelope",
    "sign_report",
    "sign_result",
    "verify",
    "verify_envelope",
]


def sign_result(
    result: Mapping[str, object] | SmokeResult,
    key: Path,
    *,
    lock_dir: Path | None,
    image_id: str | None,
    image_name: str | None = None,
    url: str | None = None,
    image_ref: str | ImageRef | None = None,
) -> dsse.EnvelopeDict:
    """``sign_envelope``'s envelope as JSON (the shape of the report file)."""
    return sign_envelope(
        result,
        key,
        lock_dir=lock_dir,
        image_id=image_id,
        image_name=image_name,
        url=url,
        image_ref=image_ref,
    ).to_dict()


def sign_envelope(
    result: Mapping[str, object] | SmokeResult,
    key: Path,
    *,
    lock_dir: Path | None,
    image_id: str | None,
    image_name: str | None = None,
    url: str | None = None,
    image_ref: str | ImageRef | None = None,
) -> dsse.Envelope:
    """``sign_report``'s envelope."""
    return sign_report(
        result,
        key,
        lock_dir=lock_dir,
        image_id=image_id,
        image_name=image_name,
        url=url,
        image_ref=image_ref,
    ).envelope


@dataclass(frozen=True)
class SignedReport:
    """A report just signed: the envelope and its statement as our own verify read it."""

    envelope: dsse.Envelope
    statement: trusted.Statement


def sign_report(
    result: Mapping[str, object] | SmokeResult,
    key: Path,
    *,
    lock_dir: Path | None,
    image_id: str | None,
    image_name: str | None = None,
    url: str | None = None,
    image_ref: str | ImageRef | None = None,
) -> SignedReport:
    """Sign a smoke result with the private key at ``key``; return the DSSE envelope
    (the object, checked as our own verify reads the bytes of its file) and its
    trusted statement.

    The subject is, in this order: ``image_ref`` (``REPO@sha256:<manifest
    digest>``: the repository and manifest digest, as cosign names an image;
    no Docker Engine needed), ``image_id`` (a local image's config digest),
    else the lock digest (pylock.toml of ``lock_dir``, or the one the result
    records). Raises UsageError/DataError for a bad key or result. A
    ``SmokeResult`` is signed as the document it was read from.
    """
    from envlock.smoke.result import SmokeResult

    if isinstance(result, SmokeResult):
        result = result.to_dict()
    try:
        strict.check_value(result, max_depth=strict.MAX_RESULT_DEPTH)
    except strict.JSONDefect as e:
        raise DataError(f"result: {e}", hint="sign the JSON the smoke harness printed") from e
    _refuse_controls(result)
    private_key = keymod.load_private(key)
    # results of run_in_image carry {"id", "ref"}: name the subject by the ref
    image = result.get("image")
    if (
        image_name is None
        and isinstance(image, dict)
        and image.get("id") == image_id
        and isinstance(image.get("ref"), str)
    ):
        image_name = image["ref"]
    doc = statement.build_statement(
        result,
        lock_dir=lock_dir,
        image_id=image_id,
        image_name=image_name,
        url=url,
        image_ref=image_ref,
    )
    payload = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    envelope = dsse.sign(dsse.INTOTO_PAYLOAD_TYPE, payload, private_key)
    # never write what our own verify rejects: run its checks on the bytes written
    try:
        parsed = dsse.parse_envelope(envelope_bytes(envelope.to_dict()))
    except dsse.EnvelopeError as e:
        raise DataError(f"result: the report would not verify: {e}", hint=_HINT) from e
    check = verify_envelope(parsed, private_key.public_key())
    if not check.ok or check.statement is None:
        raise DataError(
            f"result: the report would not verify: {'; '.join(check.reasons())}", hint=_HINT
        )
    return SignedReport(parsed, check.statement)


_HINT = "sign the JSON the smoke harness printed, unedited"


def _refuse_controls(result: Mapping[str, object]) -> None:
    """A check reason that would act on a reader's terminal (ESC, OSC, C1, bidi
    overrides) is never signed: every reader would have to trust it not to."""
    from envlock.output import first_control

    checks = result.get("checks")
    for i, check in enumerate(checks if isinstance(checks, list) else ()):
        for key in ("name", "reason"):
            value = check.get(key) if isinstance(check, dict) else None
            control = first_control(value) if isinstance(value, str) else None
            if control is not None:
                raise DataError(
                    f"result: checks[{i}].{key} holds the terminal control {control}",
                    hint=_HINT,
                )


def envelope_bytes(envelope: dsse.EnvelopeDict) -> bytes:
    """The envelope as the file envlock writes (indented JSON, trailing newline)."""
    return (json.dumps(envelope, indent=2) + "\n").encode("utf-8")
