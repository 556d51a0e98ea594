"""Attach a signed report to its image in the registry, where cosign users look for it."""

from __future__ import annotations

from typing import Any

from envlock.errors import DataError, UsageError


def attach_report(
    report: bytes, pinned_ref: str, *, insecure: bool = False, where: str = "REPORT"
) -> str:
    """Attach the signed report ``report`` (envelope bytes) to ``REPO@sha256:<hex>``.

    The report must be a DSSE envelope whose statement names that repository
    and manifest digest (checked here, the signature is not: verifiers check
    it); anything else is UsageError (exit 2). Returns the tag reference
    (``REPO:sha256-<hex>.att``); registry failures are exit 3.
    """
    from envlock.image import registry
    from envlock.report import dsse, statement

    ref = registry.pinned(pinned_ref)
    try:
        env = dsse.parse_envelope(report)
        doc = dsse.strict_json(env.payload, "the payload")
    except dsse.EnvelopeError as e:
        raise DataError(f"{where}: {e}", hint="attach a report 'envlock report sign' wrote") from e
    if env.payload_type != dsse.INTOTO_PAYLOAD_TYPE or not isinstance(doc, dict):
        raise DataError(f"{where}: not an in-toto statement", hint="attach an envlock report")
    want = statement.manifest_subject(pinned_ref)
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
        pinned_ref,
        report,
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
