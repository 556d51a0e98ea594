"""Attach a signed report to its image in the registry, where cosign users look for it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envlock.errors import DataError, UsageError

if TYPE_CHECKING:
    from envlock.image.ref import ImageRef
    from envlock.report.dsse import Envelope


def parse_report(data: bytes, where: str = "REPORT") -> Envelope:
    """The report file's bytes as a DSSE envelope, or DataError (exit 2) naming ``where``."""
    from envlock.report import dsse

    try:
        return dsse.parse_envelope(data)
    except dsse.EnvelopeError as e:
        raise DataError(f"{where}: {e}", hint="attach a report 'envlock report sign' wrote") from e


def attach_report(
    envelope: Envelope,
    pinned_ref: str | ImageRef,
    *,
    data: bytes | None = None,
    insecure: bool = False,
    where: str = "REPORT",
) -> str:
    """Attach the signed report ``envelope`` to ``REPO@sha256:<hex>``.

    ``envelope`` is the parsed envelope (``parse_report`` of a file, or the one
    ``sign_envelope`` made), never parsed again here; ``data`` is the bytes that
    go to the registry (the file as it is; default: the envelope as envlock
    writes it). The statement must name that repository and manifest digest
    (checked here, the signature is not: verifiers check it); anything else is
    UsageError (exit 2). Returns the tag reference (``REPO:sha256-<hex>.att``);
    registry failures are exit 3.
    """
    from envlock.image import registry
    from envlock.report import dsse, envelope_bytes, statement

    ref = registry.pinned(pinned_ref)
    try:
        doc = dsse.strict_json(envelope.payload, "the payload")
    except dsse.EnvelopeError as e:
        raise DataError(f"{where}: {e}", hint="attach a report 'envlock report sign' wrote") from e
    if envelope.payload_type != dsse.INTOTO_PAYLOAD_TYPE or not isinstance(doc, dict):
        raise DataError(f"{where}: not an in-toto statement", hint="attach an envlock report")
    want = statement.manifest_subject(ref)
    subjects = [s for s in _items(doc.get("subject")) if isinstance(s, dict)]
    if statement.subject_kind(doc) != "image-manifest" or want not in subjects:
        named = "; ".join(f"{_get(s, 'name')} {_digest_text(_get(s, 'digest'))}" for s in subjects)
        raise UsageError(
            f"{where} is about {named or 'nothing'}, not {ref.pinned}",
            hint="sign the result against the pushed image: envlock report sign RESULT "
            f"--image {ref.pinned} ..., then attach that report",
        )
    predicate_type = doc.get("predicateType")
    return registry.attach_attestation(
        ref,
        data if data is not None else envelope_bytes(envelope.to_dict()),
        predicate_type if isinstance(predicate_type, str) else statement.PREDICATE_TYPE,
        insecure=insecure,
    )


def _get(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, dict) else None


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _digest_text(digest: Any) -> str:
    if not isinstance(digest, dict):
        return "?"
    return " ".join(f"{k}:{v}" for k, v in digest.items())
