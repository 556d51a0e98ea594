"""envlock report: sign a smoke result made elsewhere; show, attach a report; a page of many."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from envlock import output
from envlock.errors import DataError, UsageError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("report", help="sign or show env reports (in-toto test results)")
    rsub = p.add_subparsers(dest="report_command", metavar="ACTION")
    rsub.required = True

    s = rsub.add_parser(
        "sign",
        help="sign a smoke result JSON",
        description="Wrap a smoke result in an in-toto test-result Statement and sign it "
        "(DSSE). The subject is the image (--image) or, for a host run, the lock digest.",
    )
    s.add_argument("result", metavar="RESULT.json", help="smoke result JSON ('-' for stdin)")
    s.add_argument("--key", required=True, metavar="KEY", help="private key (NAME.pem)")
    s.add_argument(
        "--lock",
        metavar="DIR",
        help="bundle folder: digests of pylock.toml, "
        "requirements.txt and the Dockerfile go into the report",
    )
    s.add_argument(
        "--image",
        metavar="REF",
        help="the image the smoke test ran in (the subject): REPO@sha256:<manifest digest> "
        "names the repository and digest (no Docker Engine needed), a local name or id "
        "its image id",
    )
    s.add_argument("--url", help="where the run can be seen (a CI job URL), recorded in the report")
    s.add_argument(
        "-o", "--output", required=True, metavar="REPORT", help="write the envelope here"
    )
    s.add_argument("--json", action="store_true", help="print a summary as JSON")
    s.set_defaults(func=run_sign)

    a = rsub.add_parser(
        "attach",
        help="attach a signed report to its image in the registry (cosign's layout)",
        description="Push REPORT as an attestation of REPO@sha256:<digest>: a layer of the OCI "
        "manifest tagged sha256-<digest>.att in the same repository, where cosign looks "
        "(attestations already there are kept). The report's subject must be that image. "
        "Exit 3 when the registry cannot be reached or refuses.",
    )
    a.add_argument("report", metavar="REPORT", help="the DSSE envelope (.intoto.json)")
    a.add_argument(
        "--image", required=True, metavar="REPO@sha256:DIGEST", help="the image, by digest"
    )
    a.add_argument(
        "--insecure-registry",
        action="store_true",
        help="plain HTTP to a registry that is not on this machine "
        "(a loopback registry always gets plain HTTP)",
    )
    a.add_argument("--json", action="store_true", help="print the result as JSON")
    a.set_defaults(func=run_attach)

    w = rsub.add_parser(
        "show",
        help="show what a report says (does not check the signature)",
        description="Print the statement inside a report. The signature is NOT checked; "
        "use 'envlock verify REPORT --key PUB' for that.",
    )
    w.add_argument("report", metavar="REPORT")
    w.add_argument("--json", action="store_true", help="print the decoded statement as JSON")
    w.set_defaults(func=run_show)

    g = rsub.add_parser(
        "page",
        help="verify many reports and write them as one static HTML page",
        description="Verify every REPORT (as 'envlock verify' does) against the trusted keys "
        "and, where known, the image and lock it claims (ci build's summary.json, or "
        "--image/--lock for every report); write DIR/index.html (one self-contained file) "
        "and DIR/summary.json. A report that does not verify is listed as not verified, "
        "never as a result. Exit 1 when some report did not verify (the page is written).",
    )
    g.add_argument("reports", metavar="REPORT", nargs="*", help="DSSE envelopes (.intoto.json)")
    g.add_argument(
        "--key",
        action="append",
        required=True,
        metavar="PUB",
        help="a trusted public key (repeatable)",
    )
    g.add_argument(
        "--summary",
        metavar="SUMMARY.json",
        help="ci build's summary.json: each cell's "
        "report, pushed image and folder (its lock); its reports when no REPORT is given",
    )
    g.add_argument("--lock", metavar="DIR", help="the bundle every report must match")
    g.add_argument("--image", metavar="REF", help="the image every report must name")
    g.add_argument("--title", default="envlock report page", help="the page's title")
    g.add_argument("-o", "--output", required=True, metavar="DIR", help="write the page here")
    g.add_argument(
        "--force",
        action="store_true",
        help="overwrite DIR/index.html and DIR/summary.json even when they are inputs of "
        "this run or were not written by a report page",
    )
    g.add_argument("--json", action="store_true", help="print the page's summary as JSON")
    g.set_defaults(func=run_page)


def run_page(args: argparse.Namespace) -> int:
    from envlock.ci.summary import read_summary
    from envlock.errors import CheckFailed
    from envlock.report import page
    from envlock.report.page_rows import load_keys

    keys = load_keys(args.key)  # a bad key is named before a bad summary, as always
    claims, missing = read_summary(Path(args.summary)) if args.summary is not None else ({}, [])
    inputs = [("the report", Path(r)) for r in args.reports or [str(p) for p in claims]]
    inputs += [("the trusted key", Path(k)) for k in args.key]
    if args.summary is not None:
        inputs.append(("the summary --summary", Path(args.summary)))
    page.refuse_overwrite(Path(args.output), inputs, force=args.force)
    made = page.page_for(
        args.reports,
        keys,
        claims=claims,
        missing=missing,
        source=args.summary,
        lock=args.lock,
        image=args.image,
    )
    path = page.write_page(Path(args.output), made, title=args.title)
    if args.json:
        output.emit_json({"page": str(path), **made.to_dict()})
    else:
        sys.stdout.write(page.describe(made, path))
    if made.unverified:
        raise CheckFailed(f"{len(made.unverified)} report(s) did not verify (see {path})")
    return 0


def _read_result(path: str) -> dict[str, Any]:
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


def sign_inputs(key: Path, result: str | None, lock_dir: Path | None) -> list[tuple[str, Path]]:
    """What a signing run reads, which its -o must never overwrite."""
    from envlock.report.keys import key_paths
    from envlock.report.statement import BUNDLE_FILES

    inputs = [("the private key --key", key)]
    pub = key_paths(key)[1] if key.name.endswith(".pem") else None
    if pub is not None and pub != key and pub.exists():
        inputs.append(("the public key", pub))
    if result and result != "-":
        inputs.append(("the result", Path(result)))
    if lock_dir is not None:
        inputs += [("the lock file", lock_dir / name) for name in BUNDLE_FILES]
    return inputs


def run_sign(args: argparse.Namespace) -> int:
    from envlock import fsutil
    from envlock.report import envelope_bytes, sign_result
    from envlock.report.image import local_image_id
    from envlock.report.outputs import refuse_clobber
    from envlock.report.statement import check_result

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
            image_ref = ref.pinned  # repository + manifest digest, no engine needed
        else:
            image_id = local_image_id(args.image)
            image_name = None if args.image == image_id else args.image
    envelope = sign_result(
        result,
        Path(args.key),
        lock_dir=lock_dir,
        image_id=image_id,
        image_name=image_name,
        url=args.url,
        image_ref=image_ref,
    )
    fsutil.atomic_write(out, envelope_bytes(envelope))
    summary = _summary(envelope)
    summary["report"] = str(out)
    if args.json:
        output.emit_json(summary)
    else:
        rows = [
            ["report", str(out)],
            ["subject", summary["subject"]],
            ["result", summary["result"]],
            ["made", summary["created"]],
            ["keyid", summary["keyids"][0]],
            ["configuration", ", ".join(summary["configuration"]) or "(none)"],
        ]
        sys.stdout.write(output.table(["", "value"], rows))
    return 0


def _summary(envelope: dict[str, Any]) -> dict[str, Any]:
    import base64
    import json

    doc = json.loads(base64.b64decode(envelope["payload"]))
    subject = doc["subject"][0]
    predicate = doc["predicate"]
    return {
        "subject": f"{subject['name']} sha256:{subject['digest']['sha256']}",
        "subject_kind": predicate["envlock"]["subject_kind"],
        "created": predicate["envlock"]["created"],
        "result": predicate["result"],
        "keyids": [s.get("keyid", "") for s in envelope["signatures"]],
        "configuration": [c["name"] for c in predicate["configuration"]],
    }


def run_attach(args: argparse.Namespace) -> int:
    from envlock.report.attach import attach_report
    from envlock.report.inputs import read_report

    data = read_report(args.report)
    tag = attach_report(data, args.image, insecure=args.insecure_registry, where=args.report)
    if args.json:
        output.emit_json({"report": args.report, "image": args.image, "attached": tag})
    else:
        sys.stdout.write(f"attached {args.report} to {args.image} as {tag}\n")
    return 0


def _get(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, dict) else None


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _digest_text(digest: Any) -> str:
    if not isinstance(digest, dict):
        return "?"
    return " ".join(f"{k}:{v}" for k, v in digest.items())


def run_show(args: argparse.Namespace) -> int:
    from envlock.report import dsse
    from envlock.report.inputs import read_envelope
    from envlock.report.statement import PREDICATE_TYPE, statement_problems

    env = read_envelope(args.report)
    try:
        doc = dsse.strict_json(env.payload, "the payload")
    except dsse.EnvelopeError as e:
        raise DataError(
            f"{args.report}: {e}", hint="is this a report 'envlock report sign' wrote?"
        ) from e
    problems = statement_problems(doc)
    if args.json:
        output.emit_json(
            {
                "verified": False,
                "payloadType": env.payload_type,
                "keyids": [s.keyid for s in env.signatures],
                "problems": problems,
                "statement": doc,
            }
        )
        return 0
    rows: list[list[str]] = [
        ["signature", "NOT checked (use: envlock verify REPORT --key PUB)"],
        ["payloadType", env.payload_type],
        ["keyids", ", ".join(s.keyid or "(none)" for s in env.signatures)],
    ]
    if isinstance(doc, dict):
        rows.append(["predicateType", str(doc.get("predicateType"))])
        for item in _items(doc.get("subject")):
            rows.append(["subject", f"{_get(item, 'name')} {_digest_text(_get(item, 'digest'))}"])
    predicate = _get(doc, "predicate")
    if isinstance(predicate, dict) and _get(doc, "predicateType") == PREDICATE_TYPE:
        rows.append(["result", str(predicate.get("result"))])
        ext = predicate.get("envlock")
        rows.append(["subject kind", str(_get(ext, "subject_kind"))])
        rows.append(["made", str(_get(ext, "created") or "(not recorded)")])
        for key in ("passedTests", "warnedTests", "failedTests"):
            rows.append([key, ", ".join(map(str, _items(predicate.get(key)))) or "-"])
        for c in _items(predicate.get("configuration")):
            rows.append(["configuration", f"{_get(c, 'name')} {_digest_text(_get(c, 'digest'))}"])
        if predicate.get("url"):
            rows.append(["url", str(predicate["url"])])
        smoke = _get(ext, "smoke")
        if isinstance(smoke, dict):
            rows.append(["framework", f"{smoke.get('framework')} {smoke.get('version')}"])
            for gpu in _items(smoke.get("gpus")):
                if isinstance(gpu, dict):
                    rows.append(
                        [
                            "gpu",
                            f"{gpu.get('name')} (cc {gpu.get('compute_capability')}, "
                            f"driver {gpu.get('driver')})",
                        ]
                    )
            for check in _items(smoke.get("checks")):
                if isinstance(check, dict):
                    rows.append(
                        [
                            f"check {check.get('name')}",
                            output.short(
                                f"{check.get('status')}: {check.get('reason', '')}"
                            ).rstrip(": "),
                        ]
                    )
        for name, value in _flatten(_get(ext, "measurements"))[:24]:
            rows.append([f"measure {name}", value])
    out = output.table(["field", "value"], rows)
    if problems:
        out += "\nproblems:\n" + "".join(f"  - {p}\n" for p in problems)
    sys.stdout.write(out)
    return 0


def _flatten(value: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Scalars of a nested measurements object as (dotted.name, text)."""
    if isinstance(value, dict):
        rows: list[tuple[str, str]] = []
        for k, v in value.items():
            rows += _flatten(v, f"{prefix}.{k}" if prefix else str(k))
        return rows
    if isinstance(value, (str, int, float, bool)) and prefix:
        text = f"{value:.4g}" if isinstance(value, float) else str(value)
        return [(prefix, text)]
    return []
