"""DSSE (Dead Simple Signing Envelope): PAE, strict parsing, sign, verify.

The envelope is ``{"payload": b64, "payloadType": str, "signatures":
[{"keyid": str, "sig": b64}, ...]}``. The signature covers the
Pre-Authentication Encoding, never the raw payload:

    "DSSEv1" SP len(type) SP type SP len(body) SP body

with lengths in bytes, written in decimal. Both standard and URL-safe base64
are accepted (padding optional), as the DSSE protocol asks; unknown extra
fields are ignored. Duplicate JSON keys, an empty signature list and the same
signature twice are rejected: each is a way to make two readers see two
different envelopes. The ``keyid`` is a hint and is never trusted.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Any, TypedDict

from envlock.report import keys as keymod
from envlock.report import strict

INTOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json"

_STD = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_URL = re.compile(r"[A-Za-z0-9_-]*={0,2}")


class EnvelopeError(ValueError):
    """The envelope is malformed or its signature does not verify."""


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 Pre-Authentication Encoding of ``payload_type`` and ``payload``."""
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %b %d %b" % (len(t), t, len(payload), payload)


def b64encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def b64decode(text: str, what: str) -> bytes:
    """Decode standard or URL-safe base64, padding optional; anything else fails."""
    if not isinstance(text, str):
        raise EnvelopeError(f"{what} is not a string")
    if _STD.fullmatch(text):
        alt = text
    elif _URL.fullmatch(text):
        alt = text.replace("-", "+").replace("_", "/")
    else:
        raise EnvelopeError(
            f"{what} is not base64 (neither the standard nor the URL-safe alphabet)"
        )
    body = alt.rstrip("=")
    if len(body) % 4 == 1:
        raise EnvelopeError(f"{what} is not base64 (truncated: impossible length {len(body)})")
    if alt != body and len(alt) % 4 != 0:
        raise EnvelopeError(f"{what} is not base64 (wrong padding)")
    try:
        return base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
    except (binascii.Error, ValueError) as e:
        raise EnvelopeError(f"{what} is not base64 ({e})") from e


def strict_json(data: bytes | str, what: str, *, max_bytes: int = strict.MAX_PAYLOAD_BYTES) -> Any:
    """Parse JSON with the one strict reader (``envlock.report.strict``)."""
    try:
        return strict.loads(data, max_bytes=max_bytes)
    except strict.JSONDefect as e:
        raise EnvelopeError(f"{what}: {e}") from e


@dataclass(frozen=True)
class Signature:
    keyid: str | None
    sig: bytes


class EnvelopeDict(TypedDict):
    """A DSSE envelope as JSON (payload and signatures base64)."""

    payloadType: str
    payload: str
    signatures: list[dict[str, str]]  # each "sig", and "keyid" where there is one


@dataclass(frozen=True)
class Envelope:
    payload_type: str
    payload: bytes
    signatures: tuple[Signature, ...]

    def to_dict(self) -> EnvelopeDict:
        sigs: list[dict[str, str]] = []
        for s in self.signatures:
            entry = {"keyid": s.keyid} if s.keyid is not None else {}
            entry["sig"] = b64encode(s.sig)
            sigs.append(entry)
        return {
            "payloadType": self.payload_type,
            "payload": b64encode(self.payload),
            "signatures": sigs,
        }


def parse_envelope(data: bytes | str) -> Envelope:
    """Parse a DSSE envelope strictly; raise EnvelopeError saying what is wrong."""
    doc = strict_json(data, "the envelope", max_bytes=strict.MAX_ENVELOPE_BYTES)
    if not isinstance(doc, dict):
        raise EnvelopeError(f"the envelope is a JSON {type(doc).__name__}, not an object")
    for field in ("payload", "payloadType", "signatures"):
        if field not in doc:
            raise EnvelopeError(f"the envelope has no {field!r} field")
    payload_type = doc["payloadType"]
    if not isinstance(payload_type, str):
        raise EnvelopeError("the envelope's payloadType is not a string")
    payload = b64decode(doc["payload"], "the envelope's payload")
    raw_sigs = doc["signatures"]
    if not isinstance(raw_sigs, list):
        raise EnvelopeError("the envelope's signatures is not a list")
    if not raw_sigs:
        raise EnvelopeError("the envelope has no signatures")
    sigs: list[Signature] = []
    seen: set[bytes] = set()
    for i, entry in enumerate(raw_sigs):
        where = f"signatures[{i}]"
        if not isinstance(entry, dict):
            raise EnvelopeError(f"{where} is not an object")
        if "sig" not in entry:
            raise EnvelopeError(f"{where} has no 'sig' field")
        keyid = entry.get("keyid")
        if keyid is not None and not isinstance(keyid, str):
            raise EnvelopeError(f"{where}.keyid is not a string")
        sig = b64decode(entry["sig"], f"{where}.sig")
        if not sig:
            raise EnvelopeError(f"{where}.sig is empty")
        if sig in seen:
            raise EnvelopeError(f"{where} repeats an earlier signature")
        seen.add(sig)
        sigs.append(Signature(keyid=keyid or None, sig=sig))
    return Envelope(payload_type=payload_type, payload=payload, signatures=tuple(sigs))


def sign(payload_type: str, payload: bytes, private_key: Any) -> Envelope:
    """Sign ``payload`` under ``payload_type`` with a loaded private key."""
    sig = keymod.sign(private_key, pae(payload_type, payload))
    keyid = keymod.keyid(private_key.public_key())
    return Envelope(payload_type, payload, (Signature(keyid=keyid, sig=sig),))


def valid_signatures(envelope: Envelope, public_key: Any) -> list[Signature]:
    """The signatures ``public_key`` made over the envelope's PAE, one per
    signature: copies that differ only by ECDSA's (r, s) -> (r, n - s)
    malleation count once. Keyids are hints and are not looked at."""
    message = pae(envelope.payload_type, envelope.payload)
    seen: set[Any] = set()
    out: list[Signature] = []
    for s in envelope.signatures:
        if keymod.verify(public_key, s.sig, message):
            canonical = keymod.canonical_signature(public_key, s.sig)
            if canonical not in seen:
                seen.add(canonical)
                out.append(s)
    return out


def verify(envelope: Envelope, public_key: Any) -> Signature:
    """Return the first signature that ``public_key`` made over the envelope's PAE.

    Every signature is tried against the trusted key whatever its keyid says;
    a keyid is only a hint, so naming the trusted key proves nothing.
    """
    valid = valid_signatures(envelope, public_key)
    if valid:
        return valid[0]
    n = len(envelope.signatures)
    raise EnvelopeError(
        f"no signature is valid for this key over the DSSE PAE ({n} signature"
        f"{'s' if n != 1 else ''} tried; keyids are not trusted)"
    )
