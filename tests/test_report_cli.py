"""envlock report sign/show and envlock verify on the command line: outputs, exit codes."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from report_support import cli, decode, make_bundle, make_keys, smoke_result

from envlock.report import sign_result


@pytest.fixture
def keypair(tmp_path: Path) -> tuple[Path, Path]:
    return make_keys(tmp_path)


@pytest.fixture
def result_file(tmp_path: Path) -> Path:
    path = tmp_path / "result.json"
    path.write_text(json.dumps(smoke_result("WARNED", build_cuda="WARN")))
    return path


def test_report_sign_then_verify_then_show(
    tmp_path: Path,
    keypair: tuple[Path, Path],
    result_file: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    priv, pub = keypair
    bundle = make_bundle(tmp_path)
    report = tmp_path / "out" / "env.intoto.json"
    code, out, err = cli(
        capsys,
        "report",
        "sign",
        str(result_file),
        "--key",
        str(priv),
        "--lock",
        str(bundle),
        "-o",
        str(report),
        "--json",
    )
    assert code == 0, err
    summary = json.loads(out)
    lock_sha = hashlib.sha256((bundle / "pylock.toml").read_bytes()).hexdigest()
    created = summary.pop("created")
    assert created == decode(json.loads(report.read_text()))["predicate"]["envlock"]["created"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", created)
    assert summary == {
        "subject": f"pylock.toml sha256:{lock_sha}",
        "subject_kind": "lock",
        "result": "WARNED",
        "keyids": [hashlib.sha256(_der(pub)).hexdigest()],
        "configuration": ["pylock.toml", "requirements.txt", "Dockerfile"],
        "report": str(report),
    }
    envelope = json.loads(report.read_text())
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    assert decode(envelope)["predicate"]["envlock"]["smoke"] == json.loads(result_file.read_text())

    code, out, err = cli(capsys, "verify", str(report), "--key", str(pub), "--lock", str(bundle))
    assert code == 0, err
    assert "VERIFIED: signed by the given key, smoke result WARNED" in out
    for name in ("pylock.toml", "requirements.txt", "Dockerfile"):
        assert f"checked    {bundle / name}: matches the report" in out
    assert "image      not checked (no --image given)" in out
    assert "WARNED (3 passed, 1 warned, 0 failed); warned: build_cuda" in out
    assert f"made       {created}\n" in out

    code, out, err = cli(capsys, "report", "show", str(report))
    assert code == 0, err
    assert "NOT checked" in out
    assert "warnedTests                 build_cuda" in out
    assert f"made                        {created}\n" in out
    assert "subject kind                lock\n" in out
    assert "measure matmul.fp16_tflops  610" in out
    code, out, err = cli(capsys, "report", "show", str(report), "--json")
    shown = json.loads(out)
    assert shown["verified"] is False and shown["problems"] == []
    assert shown["statement"] == decode(envelope)


def _der(pub: Path) -> bytes:
    from envlock.report import keys

    return keys.public_der(keys.load_public(pub))


def test_report_sign_reads_stdin(
    tmp_path: Path,
    keypair: tuple[Path, Path],
    result_file: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import io
    import sys

    priv, pub = keypair
    image = "sha256:" + "ab" * 32
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(result_file.read_bytes())))
    report = tmp_path / "r.json"
    code, out, err = cli(
        capsys, "report", "sign", "-", "--key", str(priv), "--image", image, "-o", str(report)
    )
    assert code == 0, err
    assert decode(json.loads(report.read_text()))["subject"][0]["digest"] == {"sha256": "ab" * 32}
    assert cli(capsys, "verify", str(report), "--key", str(pub), "--image", image)[0] == 0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "the envelope: not valid JSON"),
        (b"{not json", "the envelope: not valid JSON"),
        (b"[]", "the envelope is a JSON list, not an object"),
        (
            b'{"payload": "e30", "payloadType": 1, "signatures": []}',
            "the envelope's payloadType is not a string",
        ),
        (
            b'{"payload": "%%%", "payloadType": "x", "signatures": []}',
            "the envelope's payload is not base64",
        ),
        (b"\x89PNG\r\n\x1a\n", "the envelope: not UTF-8 text"),
    ],
)
def test_a_file_that_is_not_an_envelope_exits_2_with_one_message(
    tmp_path: Path,
    keypair: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
    content: bytes,
    message: str,
) -> None:
    """Issue #11: a report that cannot be read as a DSSE envelope is an input
    error (exit 2, the file and the problem), in verify as in show."""
    _, pub = keypair
    report = tmp_path / "bad.json"
    report.write_bytes(content)
    for argv in (
        ["verify", str(report), "--key", str(pub)],
        ["verify", str(report), "--key", str(pub), "--json"],
        ["report", "show", str(report)],
    ):
        code, out, err = cli(capsys, *argv)
        assert code == 2, (argv, err)
        assert err.startswith(f"envlock: error: {report}: {message}"), err
        assert "Traceback" not in err and out == ""


def test_unreadable_inputs_exit_2(
    tmp_path: Path,
    keypair: tuple[Path, Path],
    result_file: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    priv, pub = keypair
    report = tmp_path / "r.json"
    report.write_text(
        json.dumps(sign_result(smoke_result(), priv, lock_dir=None, image_id="sha256:" + "0" * 64))
    )
    cases = [
        (("verify", str(tmp_path / "missing.json"), "--key", str(pub)), "does not exist"),
        (("verify", str(tmp_path), "--key", str(pub)), "is a folder, not a file"),
        (("verify", str(report), "--key", str(tmp_path / "nokey.pub.pem")), "does not exist"),
        (("verify", str(report), "--key", str(priv)), "is a private key; verify with the public"),
        (
            ("verify", str(report), "--key", str(pub), "--lock", str(tmp_path / "nolock")),
            "does not exist",
        ),
        (
            ("report", "sign", str(tmp_path / "nope.json"), "--key", str(priv), "-o", "x"),
            "does not exist",
        ),
        (
            (
                "report",
                "sign",
                str(result_file),
                "--key",
                str(pub),
                "-o",
                "x",
                "--image",
                "sha256:" + "0" * 64,
            ),
            "is a public key; signing needs the private key",
        ),
        (
            ("report", "sign", str(report), "--key", str(priv), "-o", "x"),
            "schema is None, expected 'envlock.smoke/v1'",
        ),
        (("report", "show", str(tmp_path / "missing.json")), "does not exist"),
    ]
    for argv, message in cases:
        code, out, err = cli(capsys, *argv)
        assert code == 2, (argv, err)
        assert message in err.splitlines()[0], (argv, err)
        assert "Traceback" not in err


def test_failed_sign_leaves_the_earlier_report_untouched(
    tmp_path: Path,
    keypair: tuple[Path, Path],
    result_file: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    priv, pub = keypair
    report = tmp_path / "r.json"
    image = ["--image", "sha256:" + "0" * 64]
    assert (
        cli(
            capsys,
            "report",
            "sign",
            str(result_file),
            "--key",
            str(priv),
            "-o",
            str(report),
            *image,
        )[0]
        == 0
    )
    before = report.read_bytes()
    bad = json.loads(result_file.read_text())
    bad["status"] = "BROKEN"
    result_file.write_text(json.dumps(bad))
    code, _, err = cli(
        capsys, "report", "sign", str(result_file), "--key", str(priv), "-o", str(report), *image
    )
    assert code == 2 and "status is 'BROKEN'" in err
    assert report.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["key.pem", "key.pub.pem", "result.json", "r.json"]
    )


def test_duplicate_keys_in_a_result_are_refused(
    tmp_path: Path, keypair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    priv, _ = keypair
    text = json.dumps(smoke_result("FAILED"))
    result = tmp_path / "dup.json"
    result.write_text(text[:-1] + ', "status": "PASSED"}')
    code, _, err = cli(
        capsys,
        "report",
        "sign",
        str(result),
        "--key",
        str(priv),
        "-o",
        str(tmp_path / "r.json"),
        "--image",
        "sha256:" + "0" * 64,
    )
    assert code == 2
    assert f"{result}: not valid JSON: duplicate key 'status' in one object" in err


def test_every_report_action_is_under_report_and_the_top_level_ones_are_aliases(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], result_file: Path
) -> None:
    """keygen, sign, verify, attach, sbom, show, page under `envlock report`; `envlock
    keygen`/`envlock verify` stay, the same commands, documented as aliases."""
    from envlock.parser import build_parser

    report = build_parser(["report"])._subparsers._group_actions[0].choices["report"]  # type: ignore[union-attr]
    actions = report._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert list(actions) == ["keygen", "sign", "verify", "attach", "sbom", "show", "page"]
    top = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for name in ("keygen", "verify"):
        assert top[name].description.startswith(f"An alias of `envlock report {name}`")
        assert actions[name].description == top[name].description.split(". ", 1)[1]

    code, out, _ = cli(capsys, "report", "keygen", "-o", str(tmp_path / "a"), "--json")
    assert code == 0 and json.loads(out)["type"] == "ecdsa-p256"
    code, out, _ = cli(capsys, "keygen", "-o", str(tmp_path / "b"), "--json")
    assert code == 0 and json.loads(out)["type"] == "ecdsa-p256"
    signed = tmp_path / "r.intoto.json"
    code, _, err = cli(
        capsys, "report", "sign", str(result_file), "--key", str(tmp_path / "a.pem"),
        "--image", f"127.0.0.1:5000/t/tf@sha256:{'ab' * 32}", "-o", str(signed),
    )  # fmt: skip
    assert code == 0, err
    via_report = cli(capsys, "report", "verify", str(signed), "--key", str(tmp_path / "a.pub.pem"))
    via_alias = cli(capsys, "verify", str(signed), "--key", str(tmp_path / "a.pub.pem"))
    assert via_report == via_alias and via_report[0] == 0
    assert "VERIFIED: signed by the given key" in via_report[1]


def test_a_report_changed_after_signing_is_not_blamed_on_the_key(
    tmp_path: Path,
    keypair: tuple[Path, Path],
    result_file: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """#42: a report whose payload changed after signing said "check that PUB is the
    key the report was signed with". Its signature names this key (the keyid is a
    hint, never trusted: it only chooses the words), so the failure says the bytes
    changed; a report signed by another key still points at the key."""
    import base64

    priv, pub = keypair
    bundle = make_bundle(tmp_path)
    report = tmp_path / "env.intoto.json"
    code, _out, err = cli(
        capsys, "report", "sign", str(result_file), "--key", str(priv),
        "--lock", str(bundle), "-o", str(report),
    )  # fmt: skip
    assert code == 0, err
    env = json.loads(report.read_text())
    payload = json.loads(base64.b64decode(env["payload"]))
    payload["predicate"]["envlock"]["result"] = "PASSED"  # the WARNED result, made to look PASSED
    env["payload"] = base64.b64encode(json.dumps(payload).encode()).decode()
    changed = tmp_path / "changed.intoto.json"
    changed.write_text(json.dumps(env))
    code, _out, err = cli(capsys, "verify", str(changed), "--key", str(pub))
    assert code == 1
    assert "no signature is valid for this key over the DSSE PAE (1 signature tried; keyids " in err
    assert "are not trusted): one names this key (keyid " in err
    assert "so the payload or the signature was changed after signing" in err
    assert "hint: the report's bytes are not the ones this key signed" in err
    assert "check that PUB" not in err
    _other_priv, other_pub = make_keys(tmp_path, "other")
    code, _out, err = cli(capsys, "verify", str(report), "--key", str(other_pub))
    assert code == 1
    assert "no signature is valid for this key over the DSSE PAE" in err
    assert "hint: check that PUB is the key the report was signed with" in err
