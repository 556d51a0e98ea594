"""Attach a signed report to its image in the registry, where cosign users look for it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envlock.errors import DataError, UsageError

if TYPE_CHECKING:
    from envlock.image.ref import ImageRef
    from envlock.image.referrers import Attached
    from envlock.output import Printed
    from envlock.report.dsse import Envelope


FORMATS = ("referrers", "legacy")


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
    format: str = "referrers",
) -> str:
    """``attach_evidence``, answering only where it went: ``REPO@sha256:<bundle manifest>``
    (referrers) or ``REPO:sha256-<hex>.att`` (legacy)."""
    return attach_evidence(
        envelope, pinned_ref, data=data, insecure=insecure, where=where, format=format
    ).manifest


def attach_evidence(
    envelope: Envelope,
    pinned_ref: str | ImageRef,
    *,
    data: bytes | None = None,
    insecure: bool = False,
    where: str = "REPORT",
    format: str = "referrers",
) -> Attached:
    """Attach the signed report (or SBOM attestation) ``envelope`` to ``REPO@sha256:<hex>``.

    ``envelope`` is the parsed envelope (``parse_report`` of a file, or the one
    ``sign_envelope`` made), never parsed again here. The statement must name
    that repository and manifest digest (checked here, the signature is not:
    verifiers check it); anything else is UsageError (exit 2). Registry
    failures are exit 3.

    ``format="referrers"`` (the default) attaches it as a Sigstore bundle v0.3
    in an OCI artifact manifest whose subject is the image (cosign v3's layout;
    ``referrers.attach_bundle``): ``manifest`` is ``REPO@sha256:<bundle manifest>``.
    ``format="legacy"`` adds ``data`` (the file as it is; default: the envelope
    as envlock writes it) as a layer of cosign's older ``sha256-<hex>.att``
    manifest: ``manifest`` is that tag reference (``REPO:sha256-<hex>.att``).
    """
    from envlock.image import attestations, referrers, registry
    from envlock.report import dsse, envelope_bytes, sbom, sigstore, statement, trusted

    if format not in FORMATS:
        raise UsageError(f"unknown format {format!r}", hint=f"use one of {', '.join(FORMATS)}")
    ref = registry.pinned(pinned_ref)
    try:
        doc = dsse.strict_json(envelope.payload, "the payload")
    except dsse.EnvelopeError as e:
        raise DataError(f"{where}: {e}", hint="attach a report 'envlock report sign' wrote") from e
    if envelope.payload_type != dsse.INTOTO_PAYLOAD_TYPE or not isinstance(doc, dict):
        raise DataError(f"{where}: not an in-toto statement", hint="attach an envlock report")
    want = statement.manifest_subject(ref)
    subjects = [s for s in _items(doc.get("subject")) if isinstance(s, dict)]
    predicate_type = doc.get("predicateType")
    is_sbom = predicate_type == sbom.PREDICATE_TYPE
    if (not is_sbom and statement.subject_kind(doc) != "image-manifest") or want not in subjects:
        named = "; ".join(f"{_get(s, 'name')} {_digest_text(_get(s, 'digest'))}" for s in subjects)
        raise UsageError(
            f"{where} is about {named or 'nothing'}, not {ref.pinned}",
            hint="sign the result against the pushed image: envlock report sign RESULT "
            f"--image {ref.pinned} ..., then attach that report",
        )
    ptype = predicate_type if isinstance(predicate_type, str) else statement.PREDICATE_TYPE
    if format == "legacy":
        tag = attestations.attach_attestation(
            ref,
            data if data is not None else envelope_bytes(envelope.to_dict()),
            ptype,
            insecure=insecure,
        )
        return referrers.Attached(tag, "legacy")
    created = None if is_sbom else trusted.created_at(doc)
    return referrers.attach_bundle(
        ref,
        sigstore.bundle_bytes(envelope),
        ptype,
        created=created or statement.now_rfc3339(),
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


def attach_file(report: str, image_ref: str, *, insecure: bool, format: str) -> Printed:
    """``envlock report attach`` as one call; --json: report, image, attached, layout, index."""
    from envlock.image import registry
    from envlock.output import Printed
    from envlock.report.inputs import read_report

    data = read_report(report)
    image = registry.pinned(image_ref)  # a bad --image is named before a bad report
    envelope = parse_report(data, report)
    done = attach_evidence(
        envelope,
        image,
        data=data,
        insecure=insecure,
        where=report,
        format=format,
    )
    doc = {"report": report, "image": image_ref, "attached": done.manifest}
    doc["layout"] = done.layout
    if done.index:
        doc["index"] = done.index
    how = f" (referrers index {done.index})" if done.index else f" ({done.layout})"
    return Printed(doc, f"attached {report} to {image_ref} as {done.manifest}{how}\n")
