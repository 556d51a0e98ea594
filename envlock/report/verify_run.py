"""``envlock verify`` (``envlock report verify``) as one call:
``verify_report(VerifyRequest)``.

A report file is checked with ``envlock.report.verify.check_envelope``; with
``from_registry`` every report and SBOM attached to the image is
(``check_attached``). The result carries the document ``--json`` prints
(``to_dict``), the tables (``text``) and the failure raised after printing them
(exit 1, or 3 when the registry broke off)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envlock import output
from envlock.errors import CheckFailed, EnvlockError

if TYPE_CHECKING:
    from envlock.report.statement import Subject
    from envlock.report.trusted import Statement
    from envlock.report.verify import Requirements


@dataclass(frozen=True)
class VerifyRequest:
    """``envlock verify``'s flags as typed values."""

    report: str | None
    key: str
    lock: str | None = None
    image: str | None = None
    require_pass: bool = False
    require_gpu: bool = False
    from_registry: bool = False
    insecure_registry: bool = False


@dataclass(frozen=True)
class VerifyOutcome:
    """What verify prints: ``to_dict()`` for --json (a report file: report, verified
    and the verification's fields; --from-registry: image, attached, referrers,
    verified, found, attestations), ``text()`` the tables; ``failure`` is raised
    after printing."""

    doc: dict[str, Any]
    body: str
    failure: EnvlockError | None = None

    def to_dict(self) -> dict[str, Any]:
        return self.doc

    def text(self) -> str:
        return self.body


def _subject_text(subject: Sequence[Subject]) -> str:
    parts = []
    for item in subject:
        digest = item.get("digest") or {}
        algo, value = next(iter(digest.items()), ("?", "?"))
        parts.append(f"{item.get('name', '?')} {algo}:{value}")
    return "; ".join(parts)


def _requirements(args: VerifyRequest) -> Requirements:
    from envlock.report.verify import Requirements

    return Requirements(require_pass=args.require_pass, require_gpu=args.require_gpu)


def verify_report(args: VerifyRequest) -> VerifyOutcome:
    from envlock.bundle.manifest import recover_bundle
    from envlock.errors import UsageError
    from envlock.report import keys

    if args.from_registry:
        if args.report:
            raise UsageError(
                f"give a REPORT file or --from-registry, not both ({args.report!r})",
                hint="envlock verify --from-registry --image REPO@sha256:... --key PUB",
            )
        if not args.image:
            raise UsageError(
                "--from-registry needs --image REPO@sha256:<digest>",
                hint="name the image by its manifest digest, as pushed",
            )
    elif not args.report:
        raise UsageError(
            "no REPORT given",
            hint="envlock verify REPORT --key PUB, or --from-registry --image REPO@sha256:...",
        )
    elif args.insecure_registry:
        raise UsageError("--insecure-registry is for --from-registry", hint="drop it")

    lock_dir = Path(args.lock) if args.lock else None
    if lock_dir is not None:
        # an interrupted `envlock lock`/`render` into DIR is finished or undone
        # first, so the files compared are one whole bundle
        note = recover_bundle(lock_dir)
        if note:
            sys.stderr.write(f"envlock: note: {note}\n")
    public_key = keys.load_public(Path(args.key))
    if args.from_registry:
        return _run_registry(args, public_key, lock_dir)

    from envlock.report.inputs import read_envelope
    from envlock.report.verify import check_envelope

    assert args.report is not None  # checked above
    env = read_envelope(args.report)
    v, failure = check_envelope(
        env,
        args.report,
        public_key,
        requirements=_requirements(args),
        lock_dir=lock_dir,
        image=args.image or None,
    )
    verified = failure is None
    return VerifyOutcome(
        {"report": args.report, "verified": verified, **v.to_dict()},
        _table(args, v, args.report, failure),
        CheckFailed(failure, hint=_signature_hint(v)) if failure else None,
    )


def _signature_hint(v: Any) -> str | None:
    """What to do when the signature does not verify: a report whose bytes changed
    after this key signed them is not a key problem (#42: the hint blamed the key)."""
    if v.signature_ok:
        return None
    if v.altered:
        return (
            "the report's bytes are not the ones this key signed: take the report again "
            "from where it was published, or sign the smoke result again"
        )
    return "check that PUB is the key the report was signed with"


def _run_registry(args: VerifyRequest, public_key: Any, lock_dir: Path | None) -> VerifyOutcome:
    """Print every test result and SBOM attached to --image, checked; exit 0 when a test
    result verifies and the SBOM it names (if it names one) is attached and verifies."""
    from envlock.image import registry
    from envlock.report.sbom import FILE as SBOM_FILE
    from envlock.report.verify import attestations_of, check_attached, referrers_of

    assert args.image is not None  # --from-registry needs --image (checked above)
    ref = registry.pinned(args.image)
    where = str(attestations_of(ref))
    atts = list(
        check_attached(
            ref,
            public_key,
            requirements=_requirements(args),
            lock_dir=lock_dir,
            insecure=args.insecure_registry,
        )
    )
    sboms = {a.sbom.digest: a for a in atts if a.sbom is not None and a.sbom.ok}
    texts: list[str] = []
    entries: list[dict[str, Any]] = []
    any_ok = False
    sbom_named: list[str] = []
    for att in atts:
        doc = att.to_dict()
        if att.sbom is not None:
            if att.sbom.ok:
                texts.append(
                    f"{att.name}: SBOM (CycloneDX, {att.sbom.components} components), "
                    f"signature valid, sha256:{att.sbom.digest}\n"
                )
            else:
                texts.append(f"{att.name}: SBOM NOT VERIFIED: {'; '.join(att.sbom.problems)}\n")
        elif att.verification is None:
            said = "not a DSSE envelope or Sigstore bundle: " if att.not_envelope else ""
            texts.append(f"{att.name}: {said}{att.problem}\n")
        else:
            failure = att.failure
            trusted = att.verification.statement
            named = trusted.configuration.get(SBOM_FILE) if trusted and not failure else None
            if named:
                sbom_named.append(named)
                found = sboms.get(named)
                doc["sbom"] = {"named": f"sha256:{named}", "verified": found is not None}
                if found is None:
                    failure = (
                        f"{att.name}: the SBOM it names (sha256:{named}) is not among the "
                        "verified attachments of this image"
                    )
                    doc["verified"] = False
            texts.append(
                _table(args, att.verification, att.name, failure)
                + (f"{failure}\n" if failure else "")
            )
            if named and failure is None:
                texts.append(f"SBOM sha256:{named}, named by this report: attached and verified\n")
            any_ok = any_ok or failure is None
        entries.append(doc)
    summary = _found_line(atts)
    doc = {
        "image": args.image,
        "attached": where,
        "referrers": str(referrers_of(ref)),
        "verified": any_ok,
        "found": summary,
        "attestations": entries,
    }
    text = "\n".join(texts) + f"found: {_found_text(summary)}\n"
    return VerifyOutcome(doc, text, _registry_failure(args, atts, any_ok, sbom_named, where))


def _registry_failure(
    args: VerifyRequest, atts: list[Any], any_ok: bool, sbom_named: list[str], where: str
) -> EnvlockError | None:
    """The failure --from-registry raises after printing, if any."""
    assert args.image is not None  # --from-registry needs --image
    if not atts:
        return CheckFailed(
            f"no report is attached to {args.image} (no referrers, no {where} in the registry)",
            hint="attach one: envlock report attach REPORT --image " + args.image,
        )
    unread = [a for a in atts if a.outage]
    if not any_ok and unread:
        from envlock.errors import EnvironmentFailure

        return EnvironmentFailure(
            f"no report attached to {args.image} verified, and {len(unread)} attachment(s) "
            "could not be read because the registry broke off or sent bytes that do not "
            "match their digest: an outage, not a verdict on the reports",
            hint="run the same verify again; if it persists, check the registry",
        )
    if not any_ok:
        reports = sum(1 for a in atts if a.verification is not None)
        what = f"{reports} report(s)" if reports else f"{len(atts)} layer(s)"
        return CheckFailed(
            f"none of the {what} attached to {args.image} verifies "
            "with this key and these requirements"
            + (" (with the SBOM it names)" if sbom_named else "")
        )
    return None


def _found_line(atts: list[Any]) -> dict[str, dict[str, int]]:
    """{"test-result"|"sbom": {layout: how many}} of what the registry holds."""
    out: dict[str, dict[str, int]] = {"test-result": {}, "sbom": {}}
    for a in atts:
        kind = a.kind if a.verification is not None or a.sbom is not None else "unread"
        out.setdefault(kind, {})
        out[kind][a.layout] = out[kind].get(a.layout, 0) + 1
    return out


def _found_text(found: dict[str, dict[str, int]]) -> str:
    names = {"test-result": "test result(s)", "sbom": "SBOM(s)", "unread": "unread layer(s)"}
    parts = []
    for kind, layouts in found.items():
        if not layouts and kind == "unread":
            continue
        where = ", ".join(f"{n} {lay}" for lay, n in layouts.items()) or "none"
        parts.append(f"{names[kind]}: {where}")
    return "; ".join(parts)


_STATUS = {
    "matches": "matches the report",
    "drift": "DRIFT",
    "missing": "MISSING (the report records it)",
    "not covered": "NOT COVERED by the report",
}


def _table(args: VerifyRequest, v: Any, name: str, failure: str | None = None) -> str:
    """The verification as a table; the verdict line only when it stands (a report
    that fails --require-pass/--require-gpu gets its one message, the failure)."""
    rows: list[list[str]] = [["report", name]]
    if v.signature_ok:
        n = v.valid_signatures
        rows.append(
            [
                "signature",
                f"valid ({v.key_type}, keyid {v.keyid[:16]}..."
                + (f"; {n} distinct signatures by this key)" if n > 1 else ")"),
            ]
        )
    else:
        rows.append(["signature", f"NOT valid for {args.key}"])
    trusted = v.statement
    if trusted is not None:
        rows.append(["subject", _subject_text(v.subject)])
        rows.append(["result", _result_text(trusted)])
        rows.append(["made", trusted.created or "(not recorded)"])
        used = "used" if trusted.gpu_used else "NOT used"
        rows.append(["gpu", f"{used} ({trusted.gpu_why})"])
        if not args.image:
            rows.append(["image", "not checked (no --image given)"])
        if not args.lock:
            rows.append(["lock", "not checked (no --lock given)"])
        if v.statement is not None and not v.subject_checked and not v.drift:
            rows.append(["subject", "not checked (nothing given to compare it with)"])
        for entry in v.checked:
            if entry.kind == "image" and entry.name.startswith("config of "):
                rows.append(
                    [
                        "image",
                        f"{entry.name} vs the image the smoke test ran ({entry.report}): "
                        f"{_STATUS[entry.status]}",
                    ]
                )
                continue
            if entry.kind == "image":
                rows.append(["image", f"{args.image}: {_STATUS[entry.status]}"])
                continue
            assert args.lock is not None  # what is checked against a lock needs --lock
            if entry.kind == "subject":
                what = f"subject (lock digest of {Path(args.lock) / entry.name})"
            else:
                what = str(Path(args.lock) / entry.name)
            rows.append(["checked", f"{what}: {_STATUS[entry.status]}"])
    out = output.table(["check", "outcome"], rows)
    if v.problems:
        out += "\nproblems:\n" + "".join(f"  - {p}\n" for p in v.problems)
    if v.drift:
        out += "\ndrift:\n" + output.table(
            ["field", "in the report", "actual"], [list(d) for d in v.drift]
        )
    if failure is not None:
        pass  # the failure is the one message (stderr, exit 1)
    elif v.ok and v.result == "FAILED":
        out += "\nthe signature is valid, but this report says the smoke test FAILED\n"
    elif v.ok:
        out += f"\nVERIFIED: signed by the given key, smoke result {v.result}\n"
    return out


def _result_text(trusted: Statement) -> str:
    failed, warned, passed = trusted.failed, trusted.warned, trusted.passed
    text = f"{trusted.result} ({len(passed)} passed, {len(warned)} warned, {len(failed)} failed)"
    if failed:
        text += f"; failed: {', '.join(failed)}"
    if warned:
        text += f"; warned: {', '.join(warned)}"
    return text
