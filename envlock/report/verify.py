"""Verify a signed env report: signature, format, and drift against a lock/image.

``verify`` never raises for a bad report: a malformed envelope, bad base64, a
signature by another key, a wrong payloadType or statement all come back as
``problems`` on a ``Verification`` with ``ok`` False. It raises only for bad
inputs of the verifier itself (an unreadable key or lock folder: UsageError).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envlock.report import dsse, result_check, statement, trusted
from envlock.report import keys as keymod

if TYPE_CHECKING:
    from envlock.image.ref import ImageRef
    from envlock.report.sbom import SbomCheck
    from envlock.report.statement import Subject

ABSENT = "(absent)"


@dataclass(frozen=True)
class Compared:
    """One thing compared with the trusted statement: an image, a bundle file, the lock
    subject. ``report`` and ``actual`` are the digests shown on each side."""

    kind: str  # image | file | subject
    name: str
    status: str  # matches | drift | missing | not covered
    report: str
    actual: str

    def to_dict(self) -> dict[str, str]:
        return {
            "kind": self.kind,
            "name": self.name,
            "status": self.status,
            "report": self.report,
            "actual": self.actual,
        }


@dataclass
class Verification:
    ok: bool
    signature_ok: bool
    result: str | None  # PASSED | WARNED | FAILED once the statement is trusted
    subject: list[Subject]
    drift: list[tuple[str, str, str]]  # (field, in the report, actual)
    problems: list[str]
    keyid: str = ""  # keyid of the trusted key
    key_type: str = ""
    statement: trusted.Statement | None = None  # once trusted
    checked: list[Compared] = field(default_factory=list)  # what was compared, one each
    uncovered: list[str] = field(default_factory=list)  # asked for, not in the report
    valid_signatures: int = 0  # distinct valid signatures by the key (malleated copies once)
    # no signature verifies, but one names this key's keyid: the signed bytes were
    # changed after signing (the keyid is a hint: it only chooses the words of the failure)
    altered: bool = False

    @property
    def subject_checked(self) -> bool:
        """Whether the subject was compared with something (an image, a lock) and
        matched; False for a report verified without --image/--lock, and always for
        an environment subject (a host run without a lock), which nothing names."""
        return any(e.kind in ("image", "subject") and e.status == "matches" for e in self.checked)

    def reasons(self) -> list[str]:
        """Why it did not verify, one phrase each."""
        return (
            self.problems
            + [f"{f} drifted" for f, _, _ in self.drift]
            + [f"the report does not cover {name}" for name in self.uncovered]
        )

    def to_dict(self) -> dict[str, Any]:
        trusted = self.statement
        return {
            "subject_kind": trusted.subject_kind if trusted else None,
            "created": trusted.created if trusted else None,
            "gpu_used": trusted.gpu_used if trusted else None,
            "ok": self.ok,
            "signature_ok": self.signature_ok,
            "valid_signatures": self.valid_signatures,
            "result": self.result,
            "subject": self.subject,
            "checked": [e.to_dict() for e in self.checked],
            "drift": [
                {"field": f, "report": expected, "actual": actual}
                for f, expected, actual in self.drift
            ],
            "uncovered": self.uncovered,
            "problems": self.problems,
            "keyid": self.keyid,
            "key_type": self.key_type,
            "passedTests": list(trusted.passed) if trusted and self.result else [],
            "warnedTests": list(trusted.warned) if trusted and self.result else [],
            "failedTests": list(trusted.failed) if trusted and self.result else [],
        }


def _entry(kind: str, name: str, status: str, report: str, actual: str) -> Compared:
    return Compared(kind, name, status, report, actual)


def _compare_manifest(out: Verification, trusted: trusted.Statement, ref: ImageRef) -> None:
    """REPO@sha256:<digest> against the subject: the repository and the digest, each."""
    want = statement.manifest_subject(ref)
    image_ref = str(ref)
    repo, digest = want["name"], want["digest"]["sha256"]
    pairs = [
        (item.get("name"), item["digest"].get("sha256"))
        for item in trusted.subject
        if isinstance(item, dict) and isinstance(item.get("digest"), dict)
    ]
    names = ", ".join(str(n) for n, _ in pairs) or ABSENT
    digests = ", ".join(f"sha256:{d}" for _, d in pairs) or ABSENT
    if trusted.subject_kind != "image-manifest":
        out.checked.append(_entry("image", image_ref, "drift", digests, f"sha256:{digest}"))
        out.problems.append(
            f"the report names a {trusted.subject_kind} ({names} {digests}), "
            f"not a manifest digest in a repository, so it cannot be checked against {image_ref}"
        )
        return
    if (repo, digest) in pairs:
        have = f"{repo}@sha256:{digest}"
        out.checked.append(_entry("image", image_ref, "matches", have, image_ref))
        return
    out.checked.append(_entry("image", image_ref, "drift", f"{names}@{digests}", image_ref))
    if repo not in [n for n, _ in pairs]:
        out.drift.append(("subject.name", names, repo))
    if digest not in [d for _, d in pairs]:
        out.drift.append(("subject.digest.sha256", digests, f"sha256:{digest}"))
    if not out.drift:  # both are there, but in two different entries
        out.drift.append(("subject", f"{names} {digests}", f"{repo}@sha256:{digest}"))


def _compare(
    out: Verification,
    trusted: trusted.Statement,
    lock_dir: Path | None,
    image_id: str | None,
    image_ref: ImageRef | None = None,
) -> None:
    """Compare the trusted statement with the image and every bundle file asked for."""
    subjects = trusted.subject_digests
    shown = ", ".join(f"sha256:{d}" for d in subjects) or ABSENT
    if image_ref is not None:
        _compare_manifest(out, trusted, image_ref)
    if image_id is not None:
        want = result_check.parse_digest(image_id, "image id")
        if want in subjects:
            out.checked.append(_entry("image", image_id, "matches", f"sha256:{want}", image_id))
        else:
            out.checked.append(_entry("image", image_id, "drift", shown, f"sha256:{want}"))
            out.drift.append(("subject.digest.sha256", shown, f"sha256:{want}"))
    if lock_dir is None:
        return
    actual = statement.lock_configuration(lock_dir)
    reported = trusted.configuration
    extra = sorted(set(reported) - set(statement.BUNDLE_FILES))
    for name in [*statement.BUNDLE_FILES, *extra]:
        have, want_file = actual.get(name), reported.get(name)
        if name not in reported:
            if have is not None:
                out.uncovered.append(name)
                out.checked.append(_entry("file", name, "not covered", ABSENT, f"sha256:{have}"))
            continue
        report_text = f"sha256:{want_file}" if want_file else ABSENT
        if have == want_file:
            out.checked.append(_entry("file", name, "matches", report_text, f"sha256:{have}"))
            continue
        status = "missing" if have is None else "drift"
        actual_text = f"sha256:{have}" if have else ABSENT
        out.checked.append(_entry("file", name, status, report_text, actual_text))
        out.drift.append((f"configuration[{name}].sha256", report_text, actual_text))
    if trusted.subject_kind == "lock":
        lock_digest = f"sha256:{actual['pylock.toml']}"
        if actual["pylock.toml"] in subjects:
            out.checked.append(_entry("subject", "pylock.toml", "matches", shown, lock_digest))
        else:
            out.checked.append(_entry("subject", "pylock.toml", "drift", shown, lock_digest))
            out.drift.append(("subject.digest.sha256", shown, lock_digest))


def verify(
    envelope: bytes,
    pub: Path,
    *,
    lock_dir: Path | None = None,
    image_id: str | None = None,
    image_ref: str | ImageRef | None = None,
) -> Verification:
    """Check a DSSE envelope against a trusted public key, and optionally a lock/image.

    ``image_id`` is a local image's config digest; ``image_ref``
    (``REPO@sha256:<manifest digest>``) is compared with a report whose
    subject is a repository and manifest digest, with no Docker Engine.

    A malformed envelope comes back as a problem (``ok`` False); the command
    line reads the envelope first and calls ``verify_envelope``, so there a
    file that is not a DSSE envelope is an input error (exit 2).
    """
    public_key = keymod.load_public(pub)
    try:
        env = dsse.parse_envelope(envelope)
    except dsse.EnvelopeError as e:
        out = _empty(public_key)
        out.problems.append(str(e))
        return out
    return verify_envelope(
        env, public_key, lock_dir=lock_dir, image_id=image_id, image_ref=image_ref
    )


def _empty(public_key: Any) -> Verification:
    return Verification(
        ok=False,
        signature_ok=False,
        result=None,
        subject=[],
        drift=[],
        problems=[],
        keyid=keymod.keyid(public_key),
        key_type=keymod.key_type_of(public_key),
    )


def verify_envelope(
    env: dsse.Envelope,
    public_key: Any,
    *,
    lock_dir: Path | None = None,
    image_id: str | None = None,
    image_ref: str | ImageRef | None = None,
) -> Verification:
    """Signature, payload type, statement, then (only then) the lock and image."""
    if lock_dir is not None:
        statement.lock_configuration(lock_dir)  # a bad --lock is the caller's input error
    if image_id is not None:
        result_check.parse_digest(image_id, "image id")
    ref = None
    if image_ref is not None:
        from envlock.image import ref as imageref

        ref = imageref.parse(image_ref, "--image")  # once: the comparison is handed the object
        statement.manifest_subject(ref)
    out = _empty(public_key)
    valid = dsse.valid_signatures(env, public_key)
    out.valid_signatures = len(valid)
    if not valid:
        n = len(env.signatures)
        out.altered = any(s.keyid == out.keyid for s in env.signatures)
        tried = (
            f"no signature is valid for this key over the DSSE PAE ({n} signature"
            f"{'s' if n != 1 else ''} tried; keyids are not trusted)"
        )
        if out.altered:
            tried += (
                f": one names this key (keyid {out.keyid[:16]}...), so the payload or the "
                "signature was changed after signing (or another key put this keyid on it)"
            )
        out.problems.append(tried)
        return out
    out.signature_ok = True
    if env.payload_type != dsse.INTOTO_PAYLOAD_TYPE:
        out.problems.append(
            f"payloadType is {env.payload_type!r}, expected {dsse.INTOTO_PAYLOAD_TYPE!r}"
        )
        return out
    try:
        doc = dsse.strict_json(env.payload, "the signed payload")
    except dsse.EnvelopeError as e:
        out.problems.append(str(e))
        return out
    problems = statement.statement_problems(doc)
    if problems:
        out.problems.extend(problems)
        return out
    out.statement = trusted.Statement.from_dict(doc, checked=True)
    out.subject = list(out.statement.subject)
    out.result = out.statement.result
    _compare(out, out.statement, lock_dir, image_id, ref)
    out.ok = not out.problems and not out.drift and not out.uncovered
    return out


# ---------------------------------------------------------------- what `envlock verify` runs


@dataclass(frozen=True)
class Requirements:
    """What a valid report must also show (``--require-pass``, ``--require-gpu``)."""

    require_pass: bool = False
    require_gpu: bool = False


def gate(v: Verification, requirements: Requirements) -> str | None:
    """Why a valid report still fails --require-pass / --require-gpu, or None."""
    if requirements.require_pass and v.result not in ("PASSED", "WARNED"):
        return f"the signature is valid but the smoke result is {v.result} (--require-pass)"
    if requirements.require_gpu and v.statement is not None and not v.statement.gpu_used:
        why = v.statement.gpu_why
        return f"the signature is valid but the GPU was not used: {why} (--require-gpu)"
    return None


def peek_kind(env: dsse.Envelope) -> str | None:
    """The subject_kind the (not yet verified) payload claims: which comparison to run."""
    try:
        doc = dsse.strict_json(env.payload, "the signed payload")
    except dsse.EnvelopeError:
        return None
    return statement.subject_kind(doc) if isinstance(doc, dict) else None


def check_envelope(
    env: dsse.Envelope,
    name: str,
    public_key: Any,
    *,
    requirements: Requirements = Requirements(),
    lock_dir: Path | None = None,
    image: str | ImageRef | None = None,
    remote: bool = False,
    insecure: bool = False,
) -> tuple[Verification, str | None]:
    """Verify one envelope as ``envlock verify`` does; (the Verification, why it fails or None).

    ``image`` (``--image``) is compared as a manifest digest when it names one and
    the report is about a manifest, else looked up as a local image. ``remote``:
    ``image`` is a reference in a registry (--from-registry), compared with the
    subject as it stands and never looked up in the local Docker Engine: a
    report that names something else (a lock, a local image) is NOT VERIFIED
    saying what it names.
    """
    from envlock.image import ref as imageref
    from envlock.report.image import local_image_id

    image_id = image_ref = None
    if image is not None:
        ref = imageref.match(image) if isinstance(image, str) else image
        if (
            ref is not None
            and ref.digest is not None
            and (remote or peek_kind(env) == "image-manifest")
        ):
            image_ref = ref.at(ref.digest)  # the digest is in the reference: no Docker Engine
        else:
            image_id = local_image_id(str(image))
    v = verify_envelope(env, public_key, lock_dir=lock_dir, image_id=image_id, image_ref=image_ref)
    if v.ok and image_ref is not None:
        check_config(v, image_ref, insecure=insecure)
    if not v.ok:
        return v, f"{name}: NOT VERIFIED: {'; '.join(v.reasons())}"
    why = gate(v, requirements)
    return v, f"{name}: {why}" if why else None


def ran_image_id(trusted_statement: trusted.Statement) -> str | None:
    """The image id (config digest) the signed smoke result says it ran in, or None."""
    image = trusted_statement.smoke.get("image")
    value = image.get("id") if isinstance(image, dict) else None
    if isinstance(value, str) and value.startswith("sha256:") and len(value) == 71:
        return value
    return None


def check_config(v: Verification, image_ref: ImageRef, *, insecure: bool = False) -> None:
    """For a report on ``REPO@sha256:<manifest>`` whose smoke result records the
    image id it ran: the registry's manifest must have that image as its config
    (the engine's image id is the config digest), so what was pushed is what was
    tested. Reads the manifest from the registry (EnvironmentFailure, exit 3,
    when it cannot be reached)."""
    from envlock.image import registry

    trusted_statement = v.statement
    if trusted_statement is None or trusted_statement.subject_kind != "image-manifest":
        return
    ran = ran_image_id(trusted_statement)
    if ran is None:
        return
    config = registry.manifest_config_digest(image_ref, insecure=insecure)
    what = f"config of {image_ref}"
    if config is None:
        v.checked.append(_entry("image", what, "missing", ran, ABSENT))
        v.problems.append(f"the registry holds no manifest {image_ref}")
    elif config == ran:
        v.checked.append(_entry("image", what, "matches", ran, config))
    else:
        v.checked.append(_entry("image", what, "drift", ran, config))
        v.drift.append((f"predicate.envlock.smoke.image.id (the {what})", ran, config))
    v.ok = not v.problems and not v.drift and not v.uncovered


@dataclass(frozen=True)
class AttachedReport:
    """One piece of evidence attached to an image, as checked: a test result or an SBOM,
    in either layout. ``verification`` is None when the layer was not read, is not a
    DSSE envelope (or bundle), or is an SBOM (``sbom`` then says how it checked)."""

    name: str  # "REPO@sha256:<manifest> layer sha256:<blob> (referrers tag) [1/2]"
    of: int  # how many the registry lists in this layout
    verification: Verification | None = None
    failure: str | None = None  # why a read envelope does not verify (or fails a gate)
    problem: str | None = None
    not_envelope: bool = False  # read, but not a DSSE envelope (or Sigstore bundle)
    layout: str = "legacy"  # legacy | referrers API | referrers tag
    sbom: SbomCheck | None = None  # an SBOM statement, checked
    outage: bool = False  # not read: the registry broke off or sent other bytes

    @property
    def kind(self) -> str:
        return "sbom" if self.sbom is not None else "test-result"

    @property
    def verified(self) -> bool:
        if self.sbom is not None:
            return self.sbom.ok
        return self.verification is not None and self.failure is None

    def to_dict(self) -> dict[str, Any]:
        head = {"report": self.name, "layout": self.layout, "kind": self.kind}
        if self.sbom is not None:
            return {
                **head,
                "verified": self.sbom.ok,
                "sbom_digest": f"sha256:{self.sbom.digest}" if self.sbom.digest else None,
                "components": self.sbom.components,
                "problems": list(self.sbom.problems),
            }
        if self.verification is None:
            return {**head, "verified": False, "problems": [self.problem]}
        return {**head, "verified": self.verified, **self.verification.to_dict()}


def attestations_of(ref: ImageRef) -> ImageRef:
    """Where the legacy attestations of REPO@sha256:<hex> are: ``REPO:sha256-<hex>.att``."""
    from envlock.image import attestations
    from envlock.image.ref import ImageRef

    assert ref.digest is not None
    return ImageRef(ref.repository, attestations.attestation_tag(ref.digest))


def referrers_of(ref: ImageRef) -> ImageRef:
    """The referrers tag schema's index of REPO@sha256:<hex>: ``REPO:sha256-<hex>``."""
    from envlock.image import referrers
    from envlock.image.ref import ImageRef

    assert ref.digest is not None
    return ImageRef(ref.repository, referrers.referrers_tag(ref.digest))


def check_attached(
    image: ImageRef,
    public_key: Any,
    *,
    requirements: Requirements = Requirements(),
    lock_dir: Path | None = None,
    insecure: bool = False,
) -> Iterator[AttachedReport]:
    """Every test result and SBOM attached to ``image`` (REPO@sha256, ``registry.pinned``),
    checked: first the Sigstore bundles listed as OCI referrers (the referrers API, or
    the referrers tag schema's index), then the DSSE layers of cosign's legacy
    ``sha256-<hex>.att`` manifest.

    One layer in memory at a time; a layer that is not this image's evidence is
    reported and the next one checked (a planted layer never aborts the rest).
    Registry failures are EnvironmentFailure (exit 3).
    """
    from envlock.image import attestations, referrers
    from envlock.report import sigstore

    for att in referrers.iter_bundles(image, insecure=insecure):
        name = (
            f"{image.repository}@{att.manifest} layer {att.digest or '(none)'} "
            f"({att.layout}) [{att.index}/{att.of}]"
        )
        if att.data is None:
            yield AttachedReport(
                name, att.of, problem=att.problem, layout=att.layout, outage=att.outage
            )
            continue
        try:
            env, _hint = sigstore.parse_bundle(att.data)
        except sigstore.BundleError as e:
            yield AttachedReport(name, att.of, problem=str(e), not_envelope=True, layout=att.layout)
            continue
        yield _check_one(
            env, name, att.of, att.layout, image, public_key, requirements, lock_dir, insecure
        )
    where = attestations_of(image)
    for att in attestations.iter_attestations(image, insecure=insecure):
        name = f"{where} layer {att.digest} [{att.index}/{att.of}]"
        if att.data is None:
            yield AttachedReport(name, att.of, problem=att.problem, outage=att.outage)
            continue
        try:
            env = dsse.parse_envelope(att.data)
        except dsse.EnvelopeError as e:
            yield AttachedReport(name, att.of, problem=str(e), not_envelope=True)
            continue
        yield _check_one(
            env, name, att.of, "legacy", image, public_key, requirements, lock_dir, insecure
        )


def _check_one(
    env: dsse.Envelope,
    name: str,
    of: int,
    layout: str,
    image: ImageRef,
    public_key: Any,
    requirements: Requirements,
    lock_dir: Path | None,
    insecure: bool = False,
) -> AttachedReport:
    from envlock.report import sbom

    if sbom.is_sbom(env):
        return AttachedReport(name, of, layout=layout, sbom=sbom.check_sbom(env, public_key, image))
    v, failure = check_envelope(
        env,
        name,
        public_key,
        requirements=requirements,
        lock_dir=lock_dir,
        image=image,
        remote=True,
        insecure=insecure,
    )
    return AttachedReport(name, of, verification=v, failure=failure, layout=layout)
