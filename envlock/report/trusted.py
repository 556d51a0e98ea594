"""What a statement says, read from one that ``statement_problems`` passed: its
subject digests and kind, configuration digests, creation time, whether the GPU
was used, and the typed ``Statement`` verify, its table and the report page
decide on. Checking a statement and building one stay in
``envlock.report.statement``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from envlock.report.statement import (
    EXTENSION,
    Subject,
    statement_problems,
    subject_digests,
    subject_kind,
)


def configuration_digests(doc: Mapping[str, Any]) -> dict[str, str | None]:
    """{name: sha256 or None} of the predicate's configuration."""
    out: dict[str, str | None] = {}
    predicate = doc.get("predicate")
    if not isinstance(predicate, dict) or not isinstance(predicate.get("configuration"), list):
        return out
    for item in predicate["configuration"]:
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            digest = item.get("digest")
            value = digest.get("sha256") if isinstance(digest, dict) else None
            out[item["name"]] = value if isinstance(value, str) else None
    return out


def created_at(doc: Mapping[str, Any]) -> str | None:
    """When the report was made (RFC 3339 UTC), or None for reports that do not say."""
    predicate = doc.get("predicate")
    ext = predicate.get(EXTENSION) if isinstance(predicate, dict) else None
    value = ext.get("created") if isinstance(ext, dict) else None
    return value if isinstance(value, str) else None


def gpu_used(doc: Mapping[str, Any]) -> tuple[bool, str]:
    """Whether the signed smoke result shows the GPU really used, and why (one phrase).

    The GPU was used when the harness's ``op_on_gpu`` check PASSED: a matmul
    placed on GPU 0 ran there. A CPU-only run (``--allow-cpu``) WARNs on
    ``gpu_visible`` and SKIPs ``op_on_gpu``.
    """
    predicate = doc.get("predicate")
    ext = predicate.get(EXTENSION) if isinstance(predicate, dict) else None
    smoke = ext.get("smoke") if isinstance(ext, dict) else None
    checks = smoke.get("checks") if isinstance(smoke, dict) else None
    items = checks if isinstance(checks, list) else []
    by_name = {c.get("name"): c for c in items if isinstance(c, dict)}
    op = by_name.get("op_on_gpu")
    if op is not None and str(op.get("status", "")).upper() in ("PASS", "PASSED"):
        return True, f"op_on_gpu PASS: {op.get('reason', '')}".rstrip(": ")
    for name in ("gpu_request", "gpu_visible", "op_on_gpu"):
        check = by_name.get(name)
        if check is not None and str(check.get("status", "")).upper() not in ("PASS", "PASSED"):
            return False, f"{name} {check.get('status')}: {check.get('reason', '')}".rstrip(": ")
    return False, "the signed smoke result has no passing op_on_gpu check"


@dataclass(frozen=True)
class Statement:
    """A trusted statement (signed by the key, ``statement_problems`` found nothing),
    read once into what verify, its table and the report page decide on.

    ``document`` is the payload as it was signed; ``to_dict`` gives it back, so
    every JSON output keeps its shape.
    """

    subject: tuple[Subject, ...]  # as signed
    subject_kind: str | None
    result: str  # PASSED | WARNED | FAILED
    passed: tuple[str, ...]
    warned: tuple[str, ...]
    failed: tuple[str, ...]
    created: str | None
    configuration: dict[str, str]  # bundle file name -> sha256 hex, in the signed order
    gpu_used: bool
    gpu_why: str  # one phrase: the check that shows it
    smoke: dict[str, Any]  # the signed smoke result (predicate.envlock.smoke), a JSON object
    document: Mapping[str, Any] = field(repr=False, compare=False, default_factory=dict)

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any], *, checked: bool = False) -> Statement:
        """Read a statement that ``statement_problems`` passes (ValueError otherwise;
        ``checked``: the caller has just run it)."""
        problems = [] if checked else statement_problems(doc)
        if problems:
            raise ValueError("; ".join(problems))
        predicate = doc["predicate"]
        used, why = gpu_used(doc)
        return cls(
            subject=tuple(doc["subject"]),
            subject_kind=subject_kind(doc),
            result=predicate["result"],
            passed=tuple(predicate.get("passedTests", [])),
            warned=tuple(predicate.get("warnedTests", [])),
            failed=tuple(predicate.get("failedTests", [])),
            created=created_at(doc),
            configuration={k: v for k, v in configuration_digests(doc).items() if v is not None},
            gpu_used=used,
            gpu_why=why,
            smoke=predicate[EXTENSION]["smoke"],
            document=doc,
        )

    @property
    def subject_digests(self) -> list[str]:
        """The sha256 digests the subject names."""
        return subject_digests(self.document)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.document)
