"""Sign and verify what the real smoke harness printed (a FAILED run: no framework here)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from report_support import cli, decode, make_bundle, make_keys

import envlock.smoke

HARNESS = Path(envlock.smoke.__file__).parent / "harness.py"


def test_real_failed_harness_result_is_signed_verified_and_stays_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = make_bundle(tmp_path)
    lock_digest = "sha256:" + hashlib.sha256((bundle / "pylock.toml").read_bytes()).hexdigest()
    expect = bundle / "expect.json"
    expect.write_text(
        json.dumps({"framework": "tensorflow", "version": "2.15.1", "lock_digest": lock_digest})
    )
    # -S: no site-packages, so no framework can be imported and the run must fail
    run = subprocess.run(
        [sys.executable, "-S", str(HARNESS), "--expect", str(expect), "--no-benchmark"],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 1, run.stderr
    result_file = tmp_path / "result.json"
    result_file.write_bytes(run.stdout)
    result = json.loads(run.stdout)
    assert result["status"] == "FAILED"
    failed = [c["name"] for c in result["checks"] if c["status"] == "FAIL"]
    assert failed

    priv, pub = make_keys(tmp_path)
    report = tmp_path / "host.intoto.json"
    # no --lock: the subject is the lock digest the harness read from expect.json
    code, out, err = cli(
        capsys, "report", "sign", str(result_file), "--key", str(priv), "-o", str(report)
    )
    assert code == 0, err
    statement = decode(json.loads(report.read_text()))
    assert statement["subject"] == [{"name": "pylock.toml", "digest": {"sha256": lock_digest[7:]}}]
    assert statement["predicate"]["result"] == "FAILED"
    assert statement["predicate"]["failedTests"] == failed
    assert statement["predicate"]["envlock"]["smoke"] == result

    # the report records the lock digest only: asked to check the whole bundle, verify
    # fails naming what the report does not cover, instead of saying "matches"
    code, out, err = cli(capsys, "verify", str(report), "--key", str(pub), "--lock", str(bundle))
    assert code == 1
    assert "the report does not cover requirements.txt; the report does not cover Dockerfile" in err
    assert "pylock.toml: matches the report" in out
    code, out, err = cli(capsys, "verify", str(report), "--key", str(pub))
    assert code == 0, err
    assert "not checked (no --lock given)" in out
    # signed with --lock, the report covers every file of the bundle
    code, out, err = cli(
        capsys,
        *["report", "sign", str(result_file), "--key", str(priv), "--lock", str(bundle)],
        *["-o", str(report)],
    )
    assert code == 0, err
    code, out, err = cli(capsys, "verify", str(report), "--key", str(pub), "--lock", str(bundle))
    assert code == 0, err
    assert "PASSED" not in out
    assert f"FAILED (0 passed, 0 warned, {len(failed)} failed)" in out
    code, out, err = cli(capsys, "verify", str(report), "--key", str(pub), "--require-pass")
    assert code == 1
