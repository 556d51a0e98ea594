"""The in-toto Statement v1 that envlock signs: a test-result v0.1 predicate.

::

    {"_type": "https://in-toto.io/Statement/v1",
     "subject": [{"name": "<image ref or pylock.toml>", "digest": {"sha256": "<hex>"}}],
     "predicateType": "https://in-toto.io/attestation/test-result/v0.1",
     "predicate": {
        "result": "PASSED" | "WARNED" | "FAILED",
        "configuration": [{"name": "pylock.toml", "digest": {"sha256": ...}}, ...],
        "url": "...",                      # optional
        "passedTests": [...], "warnedTests": [...], "failedTests": [...],
        "envlock": {"schema": "envlock.report/v1",
                    "subject_kind": "image-manifest" | "image" | "lock" | "environment",
                    "created": "2025-01-31T12:00:00Z",   # when the report was made
                    "smoke": {...whole smoke JSON...}, "measurements": {...}}}}

The subject is, for an image named by digest (``REF@sha256:...``), the
repository and its manifest digest, as cosign names an image; for a local
image named otherwise, its config digest (the image id); for a run on a
host, the lock digest (sha256 of pylock.toml), or, for a host run without a
lock, the environment itself (the sha256 of the sorted installed
distributions the harness recorded). ``docs/report-format.md`` describes
every field.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from envlock.errors import DataError, UsageError
from envlock.fsutil import sha256_bytes
from envlock.report.result_check import (
    HEX64,
    RESULT_HINT,
    RESULTS,
    check_result,
    parse_digest,
)

if TYPE_CHECKING:
    from envlock.image.ref import ImageRef


class Subject(TypedDict):
    """One subject of a statement: what it is about, by digest (in-toto ResourceDescriptor)."""

    name: str
    digest: dict[str, str]  # algorithm -> hex, {"sha256": ...}


STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://in-toto.io/attestation/test-result/v0.1"
EXTENSION = "envlock"
EXTENSION_SCHEMA = "envlock.report/v1"
# what the subject names: a manifest in a registry repository (REF@sha256:...),
# a local image's config digest, a lock (a host run), or the environment itself
# (a host run without a lock: its installed distributions, hashed)
SUBJECT_KINDS = ("image-manifest", "image", "lock", "environment")
ENVIRONMENT_NAME = "environment"
# RFC 3339 in UTC with a Z, whole seconds: what ``created`` holds
_RFC3339_UTC = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")
# Every file of a bundle (``envlock.bundle.folder.bundle_files``, plus the CA
# file render copies in with --ca-cert and the SBOM), in the order a report lists them; the
# first three were the only ones recorded before issue #11.
BUNDLE_FILES = (
    "pylock.toml",
    "requirements.txt",
    "Dockerfile",
    ".dockerignore",
    "bootstrap.sh",
    "envlock_smoke.py",
    "envlock_runtime.py",
    "expect.json",
    "runtime.json",
    "render.json",
    "README.md",
    "envlock-ca.pem",
    "sbom.cdx.json",  # envlock report sbom (issue #28): a report names the SBOM by digest
)
CONFIG_FILES = BUNDLE_FILES


def lock_configuration(lock_dir: Path) -> dict[str, str]:
    """{file name: sha256 hex} of every bundle file in ``lock_dir``.

    pylock.toml must be there; the other files of ``BUNDLE_FILES`` are
    recorded when present (a host-only bundle may lack a Dockerfile), so a
    report covers the whole bundle it was made from.
    """
    if not lock_dir.is_dir():
        raise UsageError(
            f"lock folder {lock_dir} does not exist"
            if not lock_dir.exists()
            else f"{lock_dir} is not a folder",
            hint="give --lock the folder 'envlock lock -o DIR' wrote",
        )
    out: dict[str, str] = {}
    for name in BUNDLE_FILES:
        path = lock_dir / name
        if not path.is_file():
            continue
        from envlock.readers import read_bytes

        out[name] = sha256_bytes(read_bytes(path))  # bounded, a regular file
    if "pylock.toml" not in out:
        raise DataError(
            f"{lock_dir} has no pylock.toml",
            hint="give --lock the folder 'envlock lock -o DIR' wrote",
        )
    return out


def _expected_lock_digest(result: Mapping[str, Any]) -> str | None:
    expected = result.get("expected")
    if isinstance(expected, dict):
        value = expected.get("lock_digest")
        if isinstance(value, str) and value:
            return parse_digest(value, "the result's expected.lock_digest")
    return None


def now_rfc3339() -> str:
    """This moment in UTC, RFC 3339 with a Z and whole seconds ("2025-01-31T12:00:00Z").

    A report's time is when it was made; SOURCE_DATE_EPOCH (which makes builds
    reproducible) is deliberately not read here: a report is a record of one
    run, and two runs of the same image must not claim the same moment.
    """
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def manifest_subject(pinned_ref: str | ImageRef) -> Subject:
    """The subject for an image named by digest: the repository and the manifest digest.

    cosign names an image the same way: ``name`` is the repository with its
    registry host ("127.0.0.1:5000/team/tf"; no tag), ``digest.sha256`` the
    manifest digest the reference pins.
    """
    from envlock.image import ref as imageref

    ref = imageref.parse(pinned_ref, "--image")  # an ImageRef is not parsed again
    if ref.digest is None:
        raise UsageError(
            f"--image {str(ref)!r} names no manifest digest",
            hint="give the reference with its digest, REPO@sha256:<64 hex>",
        )
    return {"name": ref.repository, "digest": {"sha256": ref.digest[7:]}}


def build_statement(
    result: Mapping[str, Any],
    *,
    lock_dir: Path | None = None,
    image_id: str | None = None,
    image_name: str | None = None,
    url: str | None = None,
    image_ref: str | ImageRef | None = None,
    created: str | None = None,
) -> dict[str, Any]:
    """The in-toto Statement for a smoke result (not yet signed).

    ``image_ref`` (``REPO@sha256:<manifest digest>``) makes the subject the
    repository and manifest digest; else ``image_id`` (a config digest)
    names a local image; else the lock digest is the subject. ``created``
    defaults to now.
    """
    status, lists = check_result(result)
    config = lock_configuration(lock_dir) if lock_dir is not None else {}
    seen_lock = _expected_lock_digest(result)
    if config and seen_lock and seen_lock != config["pylock.toml"]:
        raise UsageError(
            f"the result was made with lock sha256:{seen_lock[:12]}..., but "
            f"{lock_dir}/pylock.toml is sha256:{config['pylock.toml'][:12]}...",
            hint="give --lock the bundle the smoke test ran against",
        )
    if not config and seen_lock:
        config = {"pylock.toml": seen_lock}
    environment = environment_digest(result) if "pylock.toml" not in config else None

    subject: list[Subject]
    if image_ref is not None:
        subject = [manifest_subject(image_ref)]
        kind = "image-manifest"
    elif image_id is not None:
        subject = [
            {
                "name": image_name or "image",
                "digest": {"sha256": parse_digest(image_id, "image id")},
            }
        ]
        kind = "image"
    elif "pylock.toml" in config:
        subject = [{"name": "pylock.toml", "digest": {"sha256": config["pylock.toml"]}}]
        kind = "lock"
    elif environment is not None:
        subject = [{"name": ENVIRONMENT_NAME, "digest": {"sha256": environment}}]
        kind = "environment"
    else:
        raise UsageError(
            "nothing to name as the report's subject: no image, no lock, and the result "
            "records neither a lock digest nor its environment",
            hint="pass --image REF for an image run or --lock DIR for a host run "
            "(or run the current harness, which records the environment)",
        )
    predicate: dict[str, Any] = {
        "result": status,
        "configuration": [
            {"name": name, "digest": {"sha256": digest}} for name, digest in config.items()
        ],
    }
    if url:
        predicate["url"] = url
    predicate.update(lists)
    predicate[EXTENSION] = {
        "schema": EXTENSION_SCHEMA,
        "subject_kind": kind,
        "created": created or now_rfc3339(),
        "measurements": result.get("benchmark") or {},
        "smoke": dict(result),
    }
    return {
        "_type": STATEMENT_TYPE,
        "subject": subject,
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }


def canonical_environment(distributions: list[str]) -> bytes:
    """The bytes an environment subject's digest is taken over: the recorded
    ``name==version`` lines, sorted, each ending in a newline, UTF-8."""
    return "".join(line + "\n" for line in sorted(distributions)).encode("utf-8")


def environment_digest(result: Mapping[str, Any]) -> str | None:
    """sha256 of the environment the harness recorded (``environment.distributions``),
    or None when the result records none. A recorded ``sha256`` that differs from
    the list's is an edited result (DataError)."""
    env = result.get("environment")
    if not isinstance(env, dict) or "distributions" not in env:
        return None
    dists = env["distributions"]
    if not _str_list(dists):  # empty is an environment too: a bare interpreter
        raise DataError(
            "result: environment.distributions: not a list of strings",
            hint=RESULT_HINT,
        )
    digest = sha256_bytes(canonical_environment(dists))
    recorded = env.get("sha256")
    if recorded is not None and recorded != digest:
        raise DataError(
            f"result: environment.sha256 {str(recorded)[:16]}... is not the digest of the "
            f"recorded distributions ({digest[:16]}...)",
            hint="the result was edited or is corrupt; run the smoke test again",
        )
    return digest


def _environment_problems(doc: Mapping[str, Any], smoke: Any) -> list[str]:
    """An environment subject must be the digest of the signed distributions list."""
    if subject_kind(doc) != "environment":
        return []
    try:
        digest = environment_digest(smoke) if isinstance(smoke, dict) else None
    except DataError as e:
        return [f"predicate {EXTENSION}.smoke: {e.message.removeprefix('result: ')}"]
    if digest is None:
        return [f"the subject is an environment but predicate {EXTENSION}.smoke records none"]
    if digest not in subject_digests(doc):
        return [f"the subject is not the digest of the signed environment ({digest[:16]}...)"]
    return []


def _str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def statement_problems(doc: Any) -> list[str]:
    """What is wrong with a (signed) statement; empty when it is usable.

    The same checks ``build_statement`` output must pass (``sign_result``
    runs them on every envelope it makes): every field envlock reads has its
    type, the signed smoke result passes ``check_result``, and the verdict and
    test lists agree with it.
    """
    if not isinstance(doc, dict):
        return [f"the statement is a JSON {type(doc).__name__}, not an object"]
    problems: list[str] = []
    if doc.get("_type") != STATEMENT_TYPE:
        problems.append(f"statement _type is {doc.get('_type')!r}, expected {STATEMENT_TYPE!r}")
    subject = doc.get("subject")
    if not isinstance(subject, list) or not subject:
        problems.append("statement subject is empty or missing")
    else:
        for i, item in enumerate(subject):
            digest = item.get("digest") if isinstance(item, dict) else None
            if not isinstance(digest, dict) or not digest:
                problems.append(f"statement subject[{i}] has no digest")
                continue
            if not isinstance(item.get("name", ""), str):
                problems.append(f"statement subject[{i}].name is not a string")
            for algo, value in digest.items():
                if not isinstance(value, str) or not value:
                    problems.append(f"statement subject[{i}].digest.{algo} is not a string")
    if doc.get("predicateType") != PREDICATE_TYPE:
        problems.append(
            f"predicateType is {doc.get('predicateType')!r}, expected {PREDICATE_TYPE!r}"
        )
        return problems
    predicate = doc.get("predicate")
    if not isinstance(predicate, dict):
        problems.append("predicate is missing or not an object")
        return problems
    result = predicate.get("result")
    if result not in RESULTS:
        problems.append(f"predicate result is {result!r}, expected one of {', '.join(RESULTS)}")
    problems += _configuration_problems(predicate.get("configuration", []))
    if "url" in predicate and not isinstance(predicate["url"], str):
        problems.append("predicate url is not a string")
    lists: dict[str, list[str]] = {}
    for key in ("passedTests", "warnedTests", "failedTests"):
        value = predicate.get(key, [])
        if _str_list(value):
            lists[key] = value
        else:
            problems.append(f"predicate {key} is not a list of strings")
    if problems:
        return problems
    failed, warned = lists["failedTests"], lists["warnedTests"]
    if result != "FAILED" and failed:
        problems.append(f"predicate result is {result} but failedTests lists {failed}")
    if result == "PASSED" and warned:
        problems.append(f"predicate result is PASSED but warnedTests lists {warned}")
    problems += _extension_problems(predicate, lists)
    ext = predicate.get(EXTENSION)
    smoke = ext.get("smoke") if isinstance(ext, dict) else None
    return problems or _environment_problems(doc, smoke)


def _configuration_problems(config: Any) -> list[str]:
    if not isinstance(config, list):
        return ["predicate configuration is not a list of resource descriptors"]
    problems: list[str] = []
    names: set[str] = set()
    for i, item in enumerate(config):
        name = item.get("name") if isinstance(item, dict) else None
        digest = item.get("digest") if isinstance(item, dict) else None
        value = digest.get("sha256") if isinstance(digest, dict) else None
        if not isinstance(name, str) or not name:
            problems.append(f"predicate configuration[{i}] has no name")
        elif not isinstance(value, str) or not HEX64.fullmatch(value):
            problems.append(f"predicate configuration[{i}] ({name}) has no sha256 digest")
        elif name in names:
            problems.append(f"predicate configuration names {name} twice")
        else:
            names.add(name)
    return problems


def _extension_problems(predicate: Mapping[str, Any], lists: dict[str, list[str]]) -> list[str]:
    ext = predicate.get(EXTENSION)
    if not isinstance(ext, dict):
        return [f"predicate has no {EXTENSION!r} object (the signed smoke result)"]
    problems: list[str] = []
    if ext.get("schema") != EXTENSION_SCHEMA:
        problems.append(
            f"predicate {EXTENSION}.schema is {ext.get('schema')!r}, expected {EXTENSION_SCHEMA!r}"
        )
    if ext.get("subject_kind") not in SUBJECT_KINDS:
        problems.append(f"predicate {EXTENSION}.subject_kind is {ext.get('subject_kind')!r}")
    created = ext.get("created")  # absent in reports made before issue 13
    if created is not None and not (isinstance(created, str) and _RFC3339_UTC.fullmatch(created)):
        problems.append(
            f"predicate {EXTENSION}.created is {created!r}, not an RFC 3339 UTC time "
            "(YYYY-MM-DDTHH:MM:SSZ)"
        )
    if not isinstance(ext.get("measurements", {}), dict):
        problems.append(f"predicate {EXTENSION}.measurements is not an object")
    smoke = ext.get("smoke")
    result = predicate.get("result")
    if isinstance(smoke, dict) and smoke.get("status") in RESULTS and smoke["status"] != result:
        problems.append(
            f"predicate result is {result} but the signed smoke result says {smoke['status']}"
        )
        return problems
    try:
        _, smoke_lists = check_result(smoke, f"predicate {EXTENSION}.smoke")
    except DataError as e:
        return [*problems, e.message]
    for key, names in smoke_lists.items():
        if names != lists[key]:
            problems.append(
                f"predicate {key} {lists[key]} differs from the signed smoke checks {names}"
            )
    return problems


def subject_digests(doc: Mapping[str, Any]) -> list[str]:
    """The sha256 digests named by the statement's subject."""
    out: list[str] = []
    for item in doc.get("subject") or []:
        if isinstance(item, dict) and isinstance(item.get("digest"), dict):
            value = item["digest"].get("sha256")
            if isinstance(value, str):
                out.append(value)
    return out


def subject_kind(doc: Mapping[str, Any]) -> str | None:
    """The predicate's envlock.subject_kind, or None."""
    predicate = doc.get("predicate")
    ext = predicate.get(EXTENSION) if isinstance(predicate, dict) else None
    kind = ext.get("subject_kind") if isinstance(ext, dict) else None
    return kind if isinstance(kind, str) else None
