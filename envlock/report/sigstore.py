"""A signed report as a Sigstore bundle v0.3, the unit cosign v3 and the Sigstore
clients attach to an image and read first.

The bundle is the protobuf ``dev.sigstore.bundle.v1.Bundle`` in its JSON form
(sigstore/protobuf-specs ``protos/sigstore_bundle.proto``): ``mediaType``
``application/vnd.dev.sigstore.bundle.v0.3+json``; ``verificationMaterial``
holds a ``publicKey`` identifier (``{"hint": ...}``, the key's keyid: a verifier
looks its trusted key up by it), no transparency-log entries and no timestamps
(envlock signs with a key of its own, offline); the content is the DSSE
envelope itself (``dsseEnvelope``: ``payload``, ``payloadType``,
``signatures``), the same bytes the report file holds. A verifier that trusts
the public key checks it with no Rekor: ``cosign verify-attestation --key PUB
--insecure-ignore-tlog=true``, or ``@sigstore/verify`` with thresholds of 0
(docs/report-format.md, "Checking with cosign and other clients").
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, TypedDict

from envlock.report import dsse, strict

if TYPE_CHECKING:
    from envlock.report.dsse import Envelope, EnvelopeDict

BUNDLE_MEDIA_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json"


class PublicKeyHint(TypedDict):
    hint: str


class TimestampData(TypedDict):
    rfc3161Timestamps: list[object]  # none: envlock keeps no timestamps


class VerificationMaterial(TypedDict):
    publicKey: PublicKeyHint
    tlogEntries: list[object]  # none: envlock keeps no transparency log entries
    timestampVerificationData: TimestampData


class SigstoreBundle(TypedDict):
    """A Sigstore bundle v0.3 holding a DSSE envelope, as ``to_bundle`` writes it."""

    mediaType: str
    verificationMaterial: VerificationMaterial
    dsseEnvelope: EnvelopeDict


class BundleError(ValueError):
    """The bytes are not a Sigstore bundle v0.3 holding a DSSE envelope."""


def to_bundle(envelope: Envelope, hint: str) -> SigstoreBundle:
    """The bundle of ``envelope``, whose verification material names the key ``hint``."""
    return {
        "mediaType": BUNDLE_MEDIA_TYPE,
        "verificationMaterial": {
            "publicKey": {"hint": hint},
            "tlogEntries": [],
            "timestampVerificationData": {"rfc3161Timestamps": []},
        },
        "dsseEnvelope": envelope.to_dict(),
    }


def bundle_bytes(envelope: Envelope, hint: str | None = None) -> bytes:
    """The bundle as it is stored (compact JSON); ``hint`` defaults to the first
    signature's keyid."""
    if hint is None:
        hint = next((s.keyid for s in envelope.signatures if s.keyid), "")
    return json.dumps(to_bundle(envelope, hint), separators=(",", ":")).encode()


def parse_bundle(data: bytes) -> tuple[Envelope, str]:
    """(the DSSE envelope, the key hint) of a bundle v0.3, read strictly; BundleError
    saying what is wrong otherwise."""
    try:
        doc = strict.loads(data, max_bytes=strict.MAX_ENVELOPE_BYTES + 64 * 1024)
    except strict.JSONDefect as e:
        raise BundleError(f"the bundle: {e}") from e
    if not isinstance(doc, dict):
        raise BundleError(f"the bundle is a JSON {type(doc).__name__}, not an object")
    media = doc.get("mediaType")
    if media != BUNDLE_MEDIA_TYPE:
        raise BundleError(f"the bundle's mediaType is {str(media)[:80]!r}, not {BUNDLE_MEDIA_TYPE}")
    material = doc.get("verificationMaterial")
    key = material.get("publicKey") if isinstance(material, dict) else None
    hint = key.get("hint") if isinstance(key, dict) else None
    if not isinstance(hint, str):
        raise BundleError("the bundle's verificationMaterial names no publicKey hint")
    content = doc.get("dsseEnvelope")
    if not isinstance(content, dict):
        raise BundleError("the bundle holds no dsseEnvelope")
    try:
        envelope = dsse.parse_envelope(json.dumps(content))
    except dsse.EnvelopeError as e:
        raise BundleError(f"the bundle's dsseEnvelope: {e}") from e
    return envelope, hint
