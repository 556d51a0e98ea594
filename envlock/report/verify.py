"""Verify a signed env report: signature, format, and drift against a lock/image.

``verify`` never raises for a bad report: a malformed envelope, bad base64, a
signature by another key, a wrong payloadType or statement all come back as
``problems`` on a ``Verification`` with ``ok`` False. It raises only for bad
inputs of the verifier itself (an unreadable key or lock folder: UsageError).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envlock.report import dsse, statement
from envlock.report import keys as keymod

ABSENT = "(absent)"


@dataclass
class Verification:
    ok: bool
    signature_ok: bool
    result: str | None  # PASSED | WARNED | FAILED once the statement is trusted
    subject: list[dict[str, Any]]
    drift: list[tuple[str, str, str]]  # (field, in the report, actual)
    problems: list[str]
    keyid: str = ""  # keyid of the trusted key
    key_type: str = ""
    statement: dict[str, Any] | None = None
    checked: dict[str, bool] = field(default_factory=dict)  # "lock"/"image" -> matches

    def to_dict(self) -> dict[str, Any]:
        predicate = (self.statement or {}).get("predicate") or {}
        return {
            "ok": self.ok,
            "signature_ok": self.signature_ok,
            "result": self.result,
            "subject": self.subject,
            "drift": [
                {"field": f, "report": expected, "actual": actual}
                for f, expected, actual in self.drift
            ],
            "problems": self.problems,
            "keyid": self.keyid,
            "key_type": self.key_type,
            "checked": self.checked,
            "passedTests": predicate.get("passedTests", []) if self.result else [],
            "warnedTests": predicate.get("warnedTests", []) if self.result else [],
            "failedTests": predicate.get("failedTests", []) if self.result else [],
        }


def _consistency(doc: dict[str, Any]) -> list[str]:
    """A PASSED/WARNED result must not list failed checks (nor a failed smoke)."""
    predicate = doc["predicate"]
    result = predicate.get("result")
    failed = predicate.get("failedTests") or []
    warned = predicate.get("warnedTests") or []
    problems: list[str] = []
    if result != "FAILED" and failed:
        problems.append(f"predicate result is {result} but failedTests lists {failed}")
    if result == "PASSED" and warned:
        problems.append(f"predicate result is PASSED but warnedTests lists {warned}")
    ext = predicate.get(statement.EXTENSION)
    smoke = ext.get("smoke") if isinstance(ext, dict) else None
    if isinstance(smoke, dict) and smoke.get("status") not in (None, result):
        problems.append(
            f"predicate result is {result} but the signed smoke result says {smoke.get('status')}"
        )
    return problems


def _drift(
    doc: dict[str, Any], lock_dir: Path | None, image_id: str | None
) -> tuple[list[tuple[str, str, str]], dict[str, bool]]:
    drift: list[tuple[str, str, str]] = []
    checked: dict[str, bool] = {}
    subjects = statement.subject_digests(doc)
    shown = ", ".join(f"sha256:{d}" for d in subjects) or ABSENT
    if lock_dir is not None:
        before = len(drift)
        actual = statement.lock_configuration(lock_dir)
        reported = statement.configuration_digests(doc)
        for name in [*statement.CONFIG_FILES, *sorted(set(reported) - set(statement.CONFIG_FILES))]:
            have, want = actual.get(name), reported.get(name)
            if name not in reported:
                continue  # the report makes no claim about this file
            if have != want:
                drift.append(
                    (
                        f"configuration[{name}].sha256",
                        f"sha256:{want}" if want else ABSENT,
                        f"sha256:{have}" if have else ABSENT,
                    )
                )
        ext = doc["predicate"].get(statement.EXTENSION)
        if (
            isinstance(ext, dict)
            and ext.get("subject_kind") == "lock"
            and actual["pylock.toml"] not in subjects
        ):
            drift.append(("subject.digest.sha256", shown, f"sha256:{actual['pylock.toml']}"))
        checked["lock"] = len(drift) == before
    if image_id is not None:
        want = statement.parse_digest(image_id, "image id")
        checked["image"] = want in subjects
        if not checked["image"]:
            drift.append(("subject.digest.sha256", shown, f"sha256:{want}"))
    return drift, checked


def verify(
    envelope: bytes,
    pub: Path,
    *,
    lock_dir: Path | None = None,
    image_id: str | None = None,
) -> Verification:
    """Check a DSSE envelope against a trusted public key, and optionally a lock/image."""
    public_key = keymod.load_public(pub)
    if lock_dir is not None:
        statement.lock_configuration(lock_dir)  # a bad --lock is the caller's input error
    if image_id is not None:
        statement.parse_digest(image_id, "image id")
    out = Verification(
        ok=False,
        signature_ok=False,
        result=None,
        subject=[],
        drift=[],
        problems=[],
        keyid=keymod.keyid(public_key),
        key_type=keymod.key_type_of(public_key),
    )
    try:
        env = dsse.parse_envelope(envelope)
        dsse.verify(env, public_key)
    except dsse.EnvelopeError as e:
        out.problems.append(str(e))
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
    problems = _consistency(doc)
    if problems:
        out.problems.extend(problems)
        return out
    out.statement = doc
    out.subject = list(doc["subject"])
    out.result = doc["predicate"]["result"]
    out.drift, out.checked = _drift(doc, lock_dir, image_id)
    out.ok = not out.problems and not out.drift
    return out
