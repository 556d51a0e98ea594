"""``envlock report sign RESULT`` as one call: ``sign_result_file(SignRequest)``:
a smoke result made elsewhere wrapped in a signed in-toto statement."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from envlock import output
from envlock.errors import DataError, UsageError
from envlock.output import Printed

if TYPE_CHECKING:
    from envlock.report import SignedReport


def _read_result(path: str) -> dict[str, object]:
    """The result JSON through the strict reader verify uses (exit 2 naming the file)."""
    from envlock.fsutil import read_input
    from envlock.report import strict

    data = read_input(path, "result", hint="save 'envlock smoke --json' output", stdin=True)
    name = "standard input" if path == "-" else path
    try:
        doc = strict.loads(
            data, max_bytes=strict.MAX_RESULT_BYTES, max_depth=strict.MAX_RESULT_DEPTH
        )
    except strict.JSONDefect as e:
        raise DataError(f"{name}: {e}", hint="give the JSON the smoke harness printed") from e
    if not isinstance(doc, dict):
        raise DataError(f"{name}: a JSON {type(doc).__name__}, not a smoke result object")
    return doc


@dataclass(frozen=True)
class SignRequest:
    """``envlock report sign``'s flags as typed values."""

    result: str
    key: str
    output: str
    lock: str | None = None
    image: str | None = None
    url: str | None = None


def sign_result_file(args: SignRequest) -> Printed:
    """Sign RESULT into -o; the summary (``SignSummary``) is --json."""
    from envlock import fsutil
    from envlock.report import envelope_bytes, sign_report
    from envlock.report.image import local_image_id
    from envlock.report.inputs import sign_inputs
    from envlock.report.outputs import refuse_clobber
    from envlock.report.result_check import check_result

    out = Path(args.output)
    if out.is_dir():
        raise UsageError(f"{out} is a folder", hint="give -o a file name, e.g. report.intoto.json")
    lock_dir = Path(args.lock) if args.lock else None
    refuse_clobber(
        out,
        sign_inputs(Path(args.key), args.result, lock_dir),
        hint="write the report to a new file, e.g. -o env.intoto.json",
    )
    result = _read_result(args.result)
    check_result(result, "standard input" if args.result == "-" else args.result)
    image_id = image_name = image_ref = None
    if args.image:
        from envlock.image import ref as imageref

        ref = imageref.match(args.image)
        if ref is not None and ref.digest is not None:
            image_ref = ref.at(ref.digest)  # repository + manifest digest, no engine needed
        else:
            image_id = local_image_id(args.image)
            image_name = None if args.image == image_id else args.image
    signed = sign_report(
        result,
        Path(args.key),
        lock_dir=lock_dir,
        image_id=image_id,
        image_name=image_name,
        url=args.url,
        image_ref=image_ref,
    )
    fsutil.atomic_write(out, envelope_bytes(signed.envelope.to_dict()))
    summary = _summary(signed, out)
    rows = [
        ["report", str(out)],
        ["subject", summary["subject"]],
        ["result", summary["result"]],
        ["made", summary["created"] or "(not stated)"],  # a statement we sign states it
        ["keyid", summary["keyids"][0]],
        ["configuration", ", ".join(summary["configuration"]) or "(none)"],
    ]
    return Printed(summary, output.table(["", "value"], rows))


class SignSummary(TypedDict):
    """envlock report sign --json."""

    subject: str  # "NAME sha256:HEX"
    subject_kind: str | None
    created: str | None
    result: str
    keyids: list[str]
    configuration: list[str]  # the bundle files whose digests were signed
    report: str  # the file written


def _summary(signed: SignedReport, out: Path) -> SignSummary:
    """What was signed, from the statement our own verify read (never parsed again)."""
    trusted = signed.statement
    subject = trusted.subject[0]
    return {
        "subject": f"{subject['name']} sha256:{subject['digest']['sha256']}",
        "subject_kind": trusted.subject_kind,
        "created": trusted.created,
        "result": trusted.result,
        "keyids": [s.keyid or "" for s in signed.envelope.signatures],
        "configuration": list(trusted.configuration),
        "report": str(out),
    }
