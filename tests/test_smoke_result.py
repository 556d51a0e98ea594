"""envlock.smoke.result: the runner's JSON read once into what the next stages decide on."""

from __future__ import annotations

import json

from report_support import smoke_result

from envlock.smoke.result import SmokeCheck, SmokeImage, SmokeResult


def test_a_result_reads_into_fields_and_gives_its_document_back_unchanged() -> None:
    doc = smoke_result("FAILED", op_on_gpu="FAIL")
    doc["image"] = {"ref": "127.0.0.1:5000/t/tf@sha256:" + "a" * 64, "id": "sha256:" + "b" * 64}
    text = json.dumps(doc, indent=2)
    smoke = SmokeResult.from_dict(doc)
    assert smoke.status == "FAILED" and not smoke.passed
    assert [c.name for c in smoke.failed_checks] == ["op_on_gpu"]
    assert smoke.failed_checks[0] == SmokeCheck("op_on_gpu", "FAIL", "MatMul on /GPU:0")
    assert smoke.image == SmokeImage(ref=doc["image"]["ref"], id=doc["image"]["id"], pinned=None)
    assert json.dumps(smoke.to_dict(), indent=2) == text  # the JSON shape never changes
    assert len(smoke.checks) == len(doc["checks"])


def test_passing_statuses_and_a_malformed_document() -> None:
    assert SmokeResult.from_dict(smoke_result("WARNED")).passed
    assert SmokeResult.from_dict(smoke_result("PASSED")).passed
    odd = SmokeResult.from_dict({"status": 3, "checks": ["not a check"], "image": "x"})
    assert (odd.status, odd.checks, odd.image, odd.passed) == ("3", (), None, False)
    assert SmokeResult.from_dict({}).status is None
