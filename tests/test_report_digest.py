"""Reports bound to REPO@sha256:<manifest digest>: subject, verify without Docker,
--require-gpu, the report's time, and old reports (no time, image-id subject)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from report_support import cli, decode, make_keys, smoke_result

from envlock.report import dsse, sign_result
from envlock.report import keys as keymod
from envlock.report.statement import statement_problems
from envlock.report.trusted import gpu_used

REPO = "127.0.0.1:5000/team/tf"
DIGEST = "sha256:" + "d1" * 32
PINNED = f"{REPO}@{DIGEST}"


def _cpu_result() -> dict[str, Any]:
    """What the harness prints for an --allow-cpu run on a machine without a GPU."""
    result = smoke_result("WARNED")
    result["gpus"] = []
    result["checks"] = [
        {"name": "framework_version", "status": "PASS", "reason": "2.15.1"},
        {
            "name": "gpu_visible",
            "status": "WARN",
            "reason": "no GPU visible: TensorFlow runs on the CPU (--allow-cpu)",
        },
        {"name": "op_on_gpu", "status": "SKIP", "reason": "no GPU visible"},
    ]
    return result


@pytest.fixture
def keypair(tmp_path: Path) -> tuple[Path, Path]:
    return make_keys(tmp_path)


def _sign(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    priv: Path,
    image: str,
    result: dict[str, Any] | None = None,
    name: str = "r.json",
) -> Path:
    res = tmp_path / f"{name}.result"
    res.write_text(json.dumps(result or smoke_result()))
    report = tmp_path / name
    code, out, err = cli(
        capsys, "report", "sign", str(res), "--key", str(priv), "--image", image, "-o", str(report)
    )
    assert code == 0, err
    return report


def test_sign_by_digest_names_repository_and_manifest_digest(
    tmp_path: Path,
    keypair: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # no Docker Engine is asked: an engine address that cannot answer changes nothing
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    priv, pub = keypair
    before = time.time()
    report = _sign(tmp_path, capsys, priv, f"{REPO}:2.15.1@{DIGEST}")
    doc = decode(json.loads(report.read_text()))
    assert doc["subject"] == [{"name": REPO, "digest": {"sha256": "d1" * 32}}]
    ext = doc["predicate"]["envlock"]
    assert ext["subject_kind"] == "image-manifest"
    made = time.mktime(time.strptime(ext["created"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
    assert before - 2 <= made <= time.time() + 1

    code, out, err = cli(capsys, "verify", str(report), "--key", str(pub), "--image", PINNED)
    assert code == 0, err
    assert f"image      {PINNED}: matches the report\n" in out
    assert f"made       {ext['created']}\n" in out
    assert "VERIFIED: signed by the given key, smoke result PASSED" in out


@pytest.mark.parametrize(
    ("image", "drift"),
    [
        (
            f"127.0.0.1:5000/team/other@{DIGEST}",
            [{"field": "subject.name", "report": REPO, "actual": "127.0.0.1:5000/team/other"}],
        ),
        (
            f"{REPO}@sha256:{'e2' * 32}",
            [
                {
                    "field": "subject.digest.sha256",
                    "report": DIGEST,
                    "actual": "sha256:" + "e2" * 32,
                }
            ],
        ),
        (
            f"127.0.0.1:5000/team/other@sha256:{'e2' * 32}",
            [
                {"field": "subject.name", "report": REPO, "actual": "127.0.0.1:5000/team/other"},
                {
                    "field": "subject.digest.sha256",
                    "report": DIGEST,
                    "actual": "sha256:" + "e2" * 32,
                },
            ],
        ),
    ],
)
def test_verify_by_digest_says_which_part_differs(
    tmp_path: Path,
    keypair: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
    image: str,
    drift: list[dict[str, str]],
) -> None:
    priv, pub = keypair
    report = _sign(tmp_path, capsys, priv, PINNED)
    code, out, err = cli(capsys, "verify", str(report), "--key", str(pub), "--image", image)
    assert code == 1
    fields = " drifted; ".join(d["field"] for d in drift)
    assert f"NOT VERIFIED: {fields} drifted" in err
    code, out, err = cli(
        capsys, "verify", str(report), "--key", str(pub), "--image", image, "--json"
    )
    assert code == 1
    doc = json.loads(out)
    assert doc["drift"] == drift
    assert doc["verified"] is False and doc["subject_kind"] == "image-manifest"


def test_image_id_report_is_not_a_manifest_report(
    tmp_path: Path, keypair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """A report of a local image id (the old kind) still signs and verifies by its id."""
    priv, pub = keypair
    image_id = "sha256:" + "ab" * 32
    report = _sign(tmp_path, capsys, priv, image_id)
    doc = decode(json.loads(report.read_text()))
    assert doc["predicate"]["envlock"]["subject_kind"] == "image"
    assert cli(capsys, "verify", str(report), "--key", str(pub), "--image", image_id)[0] == 0


def _sign_raw(priv: Path, statement: dict[str, Any]) -> bytes:
    payload = json.dumps(statement).encode()
    env = dsse.sign(dsse.INTOTO_PAYLOAD_TYPE, payload, keymod.load_private(priv))
    return json.dumps(env.to_dict()).encode()


def test_report_made_before_created_existed_still_verifies(
    tmp_path: Path, keypair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    priv, pub = keypair
    envelope = sign_result(smoke_result(), priv, lock_dir=None, image_id="sha256:" + "ab" * 32)
    doc = decode(envelope)
    del doc["predicate"]["envlock"]["created"]  # as every report before issue 13
    report = tmp_path / "old.json"
    report.write_bytes(_sign_raw(priv, doc))
    code, out, err = cli(capsys, "verify", str(report), "--key", str(pub))
    assert code == 0, err
    assert "made       (not recorded)\n" in out
    assert (
        json.loads(cli(capsys, "verify", str(report), "--key", str(pub), "--json")[1])["created"]
        is None
    )
    code, out, err = cli(capsys, "report", "show", str(report))
    assert code == 0 and "made                        (not recorded)\n" in out


@pytest.mark.parametrize(
    "created", ["2025-01-31 12:00:00", "2025-01-31T12:00:00+01:00", 1738324800, ""]
)
def test_created_must_be_rfc3339_utc(
    tmp_path: Path, keypair: tuple[Path, Path], created: Any
) -> None:
    priv, _ = keypair
    doc = decode(sign_result(smoke_result(), priv, lock_dir=None, image_id=None, image_ref=PINNED))
    assert statement_problems(doc) == []
    doc["predicate"]["envlock"]["created"] = created
    assert statement_problems(doc) == [
        f"predicate envlock.created is {created!r}, not an RFC 3339 UTC time (YYYY-MM-DDTHH:MM:SSZ)"
    ]


def test_require_gpu_fails_a_cpu_only_run_that_require_pass_accepts(
    tmp_path: Path, keypair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    priv, pub = keypair
    cpu = _sign(tmp_path, capsys, priv, PINNED, _cpu_result(), "cpu.json")
    gpu = _sign(tmp_path, capsys, priv, PINNED, smoke_result(), "gpu.json")
    assert cli(capsys, "verify", str(cpu), "--key", str(pub), "--require-pass")[0] == 0

    code, out, err = cli(capsys, "verify", str(cpu), "--key", str(pub), "--require-gpu")
    assert code == 1
    assert (
        f"{cpu}: the signature is valid but the GPU was not used: gpu_visible WARN: "
        "no GPU visible: TensorFlow runs on the CPU (--allow-cpu) (--require-gpu)"
    ) in err
    assert "gpu        NOT used (gpu_visible WARN: " in out
    # one message: the failure; no VERIFIED line before it (as `report verify` too)
    assert "VERIFIED" not in out and err.count("(--require-gpu)") == 1
    code, out2, err2 = cli(capsys, "report", "verify", str(cpu), "--key", str(pub), "--require-gpu")
    assert (code, out2, err2) == (1, out, err)
    code, out, err = cli(capsys, "verify", str(cpu), "--key", str(pub), "--require-gpu", "--json")
    assert code == 1
    doc = json.loads(out)
    assert doc["verified"] is False and doc["gpu_used"] is False and doc["result"] == "WARNED"

    code, out, err = cli(
        capsys, "verify", str(gpu), "--key", str(pub), "--require-gpu", "--require-pass"
    )
    assert code == 0, err
    assert "gpu        used (op_on_gpu PASS: MatMul on /GPU:0)\n" in out


def test_gpu_used_reads_the_signed_checks() -> None:
    def doc(checks: list[dict[str, str]]) -> dict[str, Any]:
        return {"predicate": {"envlock": {"smoke": {"checks": checks}}}}

    assert gpu_used(doc([{"name": "op_on_gpu", "status": "PASS", "reason": "r"}])) == (
        True,
        "op_on_gpu PASS: r",
    )
    assert gpu_used(doc([{"name": "op_on_gpu", "status": "FAIL", "reason": "ran on CPU:0"}])) == (
        False,
        "op_on_gpu FAIL: ran on CPU:0",
    )
    assert gpu_used(doc([])) == (False, "the signed smoke result has no passing op_on_gpu check")


def test_sign_refuses_a_digest_reference_it_cannot_parse(
    tmp_path: Path, keypair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    priv, _ = keypair
    res = tmp_path / "res.json"
    res.write_text(json.dumps(smoke_result()))
    code, out, err = cli(
        capsys,
        "report",
        "sign",
        str(res),
        "--key",
        str(priv),
        "--image",
        f"{REPO}@sha256:{'D1' * 32}",  # upper-case hex is not a digest
        "-o",
        str(tmp_path / "r.json"),
    )
    # refused before any Docker Engine is asked (with none running it was exit 3)
    assert code == 2
    assert "is neither an image reference nor an image id" in err
    assert "Traceback" not in err and not (tmp_path / "r.json").exists()


def test_attach_refuses_a_report_about_another_image(
    tmp_path: Path, keypair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    priv, _ = keypair
    report = _sign(tmp_path, capsys, priv, PINNED)
    other = f"{REPO}@sha256:{'e2' * 32}"
    code, out, err = cli(capsys, "report", "attach", str(report), "--image", other)
    assert code == 2
    assert f"{report} is about {REPO} sha256:{'d1' * 32}, not {other}" in err
    code, out, err = cli(capsys, "report", "attach", str(report), "--image", f"team/tf@{DIGEST}")
    assert code == 2 and "names no registry host" in err


def test_attach_report_is_handed_the_envelope_and_the_parsed_image(
    keypair: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """ci build hands attach_report the envelope it signed and the ImageRef the push
    answered with: neither is parsed again, and the registry gets the report's bytes."""
    from envlock.errors import UsageError
    from envlock.image import attestations, referrers
    from envlock.image import ref as imageref
    from envlock.report import envelope_bytes, sign_envelope
    from envlock.report.attach import attach_report

    priv, _ = keypair
    image = imageref.ImageRef(REPO, None, DIGEST)
    envelope = sign_envelope(smoke_result(), priv, lock_dir=None, image_id=None, image_ref=image)
    sent: list[tuple[Any, bytes, str]] = []
    monkeypatch.setattr(
        attestations,
        "attach_attestation",
        lambda ref, data, predicate_type, insecure=False: (
            sent.append((ref, data, predicate_type)) or "attached"
        ),
    )

    def no_parse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("parsed again")

    monkeypatch.setattr(dsse, "parse_envelope", no_parse)
    monkeypatch.setattr(imageref, "match", no_parse)
    assert attach_report(envelope, image, format="legacy") == "attached"
    ((ref, data, predicate_type),) = sent
    assert ref == image and data == envelope_bytes(envelope.to_dict())
    assert predicate_type == "https://in-toto.io/attestation/test-result/v0.1"
    assert attach_report(envelope, image, data=b"the file as it is", format="legacy") == "attached"
    assert sent[1][1] == b"the file as it is"
    other = image.at("sha256:" + "e2" * 32)
    with pytest.raises(UsageError, match=f"REPORT is about {REPO} sha256:{'d1' * 32}, not {other}"):
        attach_report(envelope, other)
    assert len(sent) == 2

    # the default: the same envelope, as a Sigstore bundle referring to the image
    bundles: list[tuple[Any, bytes, str, str]] = []

    def attach_bundle(
        ref: Any, bundle: bytes, predicate_type: str, *, created: str, insecure: bool = False
    ) -> referrers.Attached:
        bundles.append((ref, bundle, predicate_type, created))
        return referrers.Attached(f"{REPO}@sha256:{'aa' * 32}", "referrers tag")

    monkeypatch.setattr(referrers, "attach_bundle", attach_bundle)
    assert attach_report(envelope, image) == f"{REPO}@sha256:{'aa' * 32}"
    ((ref, bundle, predicate_type, created),) = bundles
    assert ref == image and predicate_type == "https://in-toto.io/attestation/test-result/v0.1"
    doc = json.loads(bundle)
    assert doc["mediaType"] == "application/vnd.dev.sigstore.bundle.v0.3+json"
    assert doc["dsseEnvelope"] == envelope.to_dict()
    assert doc["verificationMaterial"]["publicKey"]["hint"] == envelope.signatures[0].keyid
    assert created == json.loads(envelope.payload)["predicate"]["envlock"]["created"]


def test_verify_from_registry_needs_a_pinned_image(
    tmp_path: Path, keypair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, pub = keypair
    code, out, err = cli(capsys, "verify", "--key", str(pub), "--from-registry")
    assert code == 2 and "--from-registry needs --image REPO@sha256:<digest>" in err
    code, out, err = cli(
        capsys, "verify", "--key", str(pub), "--from-registry", "--image", f"{REPO}:1"
    )
    assert code == 2 and "names no manifest digest" in err
    code, out, err = cli(capsys, "verify", "--key", str(pub))
    assert code == 2 and "no REPORT given" in err


def test_unreachable_registry_is_exit_3(
    tmp_path: Path,
    keypair: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import socket

    monkeypatch.setenv("ENVLOCK_HTTP_RETRIES", "0")
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    priv, pub = keypair
    image = f"127.0.0.1:{port}/team/tf@{DIGEST}"
    report = _sign(tmp_path, capsys, priv, image)
    code, out, err = cli(capsys, "report", "attach", str(report), "--image", image)
    assert code == 3
    assert f"cannot reach the registry 127.0.0.1:{port}" in err and "connection refused" in err
    code, out, err = cli(capsys, "verify", "--key", str(pub), "--from-registry", "--image", image)
    assert code == 3 and "Traceback" not in err


def test_plain_http_only_for_loopback_or_when_asked() -> None:
    from envlock.image import attestations, registry
    from envlock.image import ref as imageref

    def url(ref: str, insecure: bool = False) -> str:
        return registry.base_url(imageref.parse(ref), insecure)

    assert url(PINNED) == "http://127.0.0.1:5000/v2/team/tf"
    assert url(f"localhost:5000/a@{DIGEST}") == "http://localhost:5000/v2/a"
    assert url(f"127.1.2.3:5000/a@{DIGEST}") == "http://127.1.2.3:5000/v2/a"
    assert url(f"10.0.0.1:5000/a@{DIGEST}") == "https://10.0.0.1:5000/v2/a"
    assert url(f"registry.example:5000/a/b@{DIGEST}") == "https://registry.example:5000/v2/a/b"
    assert url(f"registry.example/a@{DIGEST}", insecure=True) == "http://registry.example/v2/a"
    assert attestations.attestation_tag(DIGEST) == f"sha256-{'d1' * 32}.att"


def test_show_prints_kind_and_time(
    tmp_path: Path, keypair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    priv, _ = keypair
    report = _sign(tmp_path, capsys, priv, PINNED)
    created = decode(json.loads(report.read_text()))["predicate"]["envlock"]["created"]
    code, out, err = cli(capsys, "report", "show", str(report))
    assert code == 0, err
    assert f"subject                     {REPO} sha256:{'d1' * 32}\n" in out
    assert "subject kind                image-manifest\n" in out
    assert f"made                        {created}\n" in out
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", created)
