"""envlock verify: check a signed env report against a public key, a lock, an image."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from envlock import output
from envlock.errors import CheckFailed


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "verify",
        help="verify a signed env report",
        description="Exit 0 when the report's signature is valid for KEY over the DSSE PAE, "
        "it is an in-toto test-result statement, and the lock and image, when given, match. "
        "Otherwise exit 1 saying what failed. A valid report of a FAILED smoke test verifies "
        "(exit 0) but is shown as FAILED; add --require-pass to exit 1 unless it PASSED or WARNED.",
    )
    p.add_argument("report", metavar="REPORT", help="the DSSE envelope (.intoto.json)")
    p.add_argument("--key", required=True, metavar="PUB", help="trusted public key (NAME.pub.pem)")
    p.add_argument(
        "--lock",
        metavar="DIR",
        help="bundle folder whose pylock.toml, requirements.txt "
        "and Dockerfile must match the report",
    )
    p.add_argument(
        "--image", metavar="REF", help="local image (name or id) that must be the subject"
    )
    p.add_argument(
        "--require-pass",
        action="store_true",
        help="also exit 1 unless the smoke result is PASSED or WARNED (for CI)",
    )
    p.add_argument("--json", action="store_true", help="print the verification as JSON")
    p.set_defaults(func=run)


def read_report(path: str) -> bytes:
    from envlock.fsutil import read_input

    return read_input(
        path, "report", hint="give the file 'envlock report sign -o' wrote", stdin=True
    )


def _subject_text(subject: list[dict[str, Any]]) -> str:
    parts = []
    for item in subject:
        digest = item.get("digest") or {}
        algo, value = next(iter(digest.items()), ("?", "?"))
        parts.append(f"{item.get('name', '?')} {algo}:{value}")
    return "; ".join(parts)


def run(args: argparse.Namespace) -> int:
    from envlock.commands.report import read_envelope
    from envlock.lock.manifest import recover_bundle
    from envlock.report import keys, verify_envelope
    from envlock.report.image import local_image_id

    lock_dir = Path(args.lock) if args.lock else None
    if lock_dir is not None:
        # an interrupted `envlock lock`/`render` into DIR is finished or undone
        # first, so the files compared are one whole bundle
        note = recover_bundle(lock_dir)
        if note:
            sys.stderr.write(f"envlock: note: {note}\n")
    public_key = keys.load_public(Path(args.key))
    env = read_envelope(args.report)
    image_id = local_image_id(args.image) if args.image else None
    v = verify_envelope(env, public_key, lock_dir=lock_dir, image_id=image_id)
    passed = v.result in ("PASSED", "WARNED")
    verified = v.ok and (passed or not args.require_pass)
    if args.json:
        doc = {"report": args.report, "verified": verified, **v.to_dict()}
        output.emit_json(doc)
    else:
        sys.stdout.write(_table(args, v))
    if not v.ok:
        raise CheckFailed(
            f"{args.report}: NOT VERIFIED: {'; '.join(v.reasons())}",
            hint=None if v.signature_ok else "check that PUB is the key the report was signed with",
        )
    if not verified:
        raise CheckFailed(
            f"{args.report}: the signature is valid but the smoke result is {v.result} "
            "(--require-pass)"
        )
    return 0


_STATUS = {
    "matches": "matches the report",
    "drift": "DRIFT",
    "missing": "MISSING (the report records it)",
    "not covered": "NOT COVERED by the report",
}


def _table(args: argparse.Namespace, v: Any) -> str:
    rows: list[list[str]] = [["report", args.report]]
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
    if v.statement is not None:
        rows.append(["subject", _subject_text(v.subject)])
        predicate = v.statement["predicate"]
        rows.append(["result", _result_text(v.result, predicate)])
        if not args.image:
            rows.append(["image", "not checked (no --image given)"])
        if not args.lock:
            rows.append(["lock", "not checked (no --lock given)"])
        for entry in v.checked:
            if entry["kind"] == "image":
                rows.append(["image", f"{args.image}: {_STATUS[entry['status']]}"])
                continue
            if entry["kind"] == "subject":
                what = f"subject (lock digest of {Path(args.lock) / entry['name']})"
            else:
                what = str(Path(args.lock) / entry["name"])
            rows.append(["checked", f"{what}: {_STATUS[entry['status']]}"])
    out = output.table(["check", "outcome"], rows)
    if v.problems:
        out += "\nproblems:\n" + "".join(f"  - {p}\n" for p in v.problems)
    if v.drift:
        out += "\ndrift:\n" + output.table(
            ["field", "in the report", "actual"], [list(d) for d in v.drift]
        )
    if v.ok and v.result == "FAILED":
        out += "\nthe signature is valid, but this report says the smoke test FAILED\n"
    elif v.ok:
        out += f"\nVERIFIED: signed by the given key, smoke result {v.result}\n"
    return out


def _result_text(result: str | None, predicate: dict[str, Any]) -> str:
    failed = predicate.get("failedTests") or []
    warned = predicate.get("warnedTests") or []
    passed = predicate.get("passedTests") or []
    text = f"{result} ({len(passed)} passed, {len(warned)} warned, {len(failed)} failed)"
    if failed:
        text += f"; failed: {', '.join(failed)}"
    if warned:
        text += f"; warned: {', '.join(warned)}"
    return text
