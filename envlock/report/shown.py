"""``envlock report show REPORT`` as one call: ``show_report(report)``, what a
report says (the signature is not checked). --json: verified (false), payloadType,
keyids, problems, statement."""

from __future__ import annotations

from typing import Any

from envlock import output
from envlock.errors import DataError
from envlock.output import Printed
from envlock.report.attach import _digest_text, _get, _items  # one reading of an unchecked doc


def show_report(report: str) -> Printed:
    """What REPORT says, its signature NOT checked."""
    from envlock.report import dsse
    from envlock.report.inputs import read_envelope
    from envlock.report.statement import PREDICATE_TYPE, statement_problems

    env = read_envelope(report)
    try:
        doc = dsse.strict_json(env.payload, "the payload")
    except dsse.EnvelopeError as e:
        raise DataError(
            f"{report}: {e}", hint="is this a report 'envlock report sign' wrote?"
        ) from e
    problems = statement_problems(doc)
    shown = {
        "verified": False,
        "payloadType": env.payload_type,
        "keyids": [s.keyid for s in env.signatures],
        "problems": problems,
        "statement": doc,
    }
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
    return Printed(shown, out)


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
