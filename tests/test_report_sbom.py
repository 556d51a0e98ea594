"""The SBOM (issue #28) and the Sigstore bundle, without Docker: dpkg status parsing,
package URLs, the CycloneDX document validated against the 1.6 schema by
cyclonedx-python-lib, SBOM statements checked, bundles read strictly, and the
`report sbom` command's input errors. The image side (dpkg inside a real image)
is tests/test_report_referrers_docker.py's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_support import cli, make_keys, smoke_result

from envlock.errors import CheckFailed
from envlock.image.ref import ImageRef
from envlock.lock.pylock import read_lock
from envlock.report import dsse, sbom, sigstore
from envlock.report import keys as keymod

FIXTURE_LOCK = Path(__file__).parent / "fixtures" / "old-bundles" / "v1-lock"
IMAGE = ImageRef("127.0.0.1:5000/team/tf", None, "sha256:" + "ab" * 32)

STATUS = """\
Package: libc6
Status: install ok installed
Priority: optional
Architecture: amd64
Version: 2.36-9+deb12u14
Description: GNU C Library: Shared libraries
 Contains the standard libraries that are used by nearly all programs on
 the system.

Package: removed-one
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0

Package: bash
Essential: yes
Status: install ok installed
Architecture: amd64
Version: 5.2.15-2+b7

Package: tzdata
Status: install ok installed
Architecture: all
Version: 2025b-0+deb12u1
Conffiles:
 /etc/timezone abc
"""


def test_dpkg_status_lists_the_installed_packages_only() -> None:
    assert sbom.parse_dpkg_status(STATUS) == [
        sbom.OsPackage("bash", "5.2.15-2+b7", "amd64"),
        sbom.OsPackage("libc6", "2.36-9+deb12u14", "amd64"),
        sbom.OsPackage("tzdata", "2025b-0+deb12u1", "all"),
    ]
    assert sbom.parse_dpkg_status("") == []
    assert sbom.os_release_id('NAME="Debian GNU/Linux"\nID=debian\n') == "debian"
    assert sbom.os_release_id("ID='ubuntu'\n") == "ubuntu"
    assert sbom.os_release_id("NAME=x\n") == ""


def test_package_urls_percent_encode_the_version() -> None:
    pkg = sbom.OsPackage("libgcc-s1", "1:12.2.0-14+deb12u1", "amd64")
    assert sbom.deb_purl(pkg, "debian") == (
        "pkg:deb/debian/libgcc-s1@1%3A12.2.0-14%2Bdeb12u1?arch=amd64"
    )
    assert sbom.deb_purl(sbom.OsPackage("x", "1", ""), "ubuntu") == "pkg:deb/ubuntu/x@1"


def _doc() -> dict[str, object]:
    packages = sbom.ImagePackages("debian", tuple(sbom.parse_dpkg_status(STATUS)))
    return sbom.make_sbom(
        read_lock(FIXTURE_LOCK),
        packages,
        image=str(IMAGE),
        envlock_version="0.1.0",
        created="2026-12-04T12:00:00Z",
        serial="4b1e2c3a-0000-4000-8000-000000000001",
    )


def test_the_sbom_is_cyclonedx_1_6_with_the_lock_and_the_os_packages() -> None:
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    doc = _doc()
    text = sbom.sbom_bytes(doc).decode()
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    components = doc["components"]
    assert isinstance(components, list)
    assert [c["purl"] for c in components] == [
        "pkg:pypi/dep-a@1.0",
        "pkg:pypi/tensorflow@2.14.1",
        "pkg:deb/debian/bash@5.2.15-2%2Bb7?arch=amd64",
        "pkg:deb/debian/libc6@2.36-9%2Bdeb12u14?arch=amd64",
        "pkg:deb/debian/tzdata@2025b-0%2Bdeb12u1?arch=all",
    ]
    locked = {p.name: p for p in read_lock(FIXTURE_LOCK).packages}
    for c in components[:2]:
        p = locked[c["name"]]
        assert c["version"] == p.version
        assert c["hashes"] == [{"alg": "SHA-256", "content": w.sha256} for w in p.wheels]
        assert [r["url"] for r in c["externalReferences"]] == [w.url for w in p.wheels]
    assert doc["dependencies"] == [
        {"ref": "pkg:pypi/dep-a@1.0", "dependsOn": []},
        {"ref": "pkg:pypi/tensorflow@2.14.1", "dependsOn": ["pkg:pypi/dep-a@1.0"]},
    ]
    assert doc["metadata"] == {
        "timestamp": "2026-12-04T12:00:00Z",
        "tools": {"components": [{"type": "application", "name": "envlock", "version": "0.1.0"}]},
        "component": {"type": "container", "bom-ref": str(IMAGE), "name": str(IMAGE)},
    }
    # the digest is the file's, written the one way
    assert sbom.sbom_digest(doc) == sbom.sbom_digest(json.loads(text))


def test_an_sbom_statement_checks_its_key_subject_and_predicate(tmp_path: Path) -> None:
    priv, pub = make_keys(tmp_path)
    key = keymod.load_private(priv)
    doc = _doc()
    env = sbom.sign_sbom(doc, key, IMAGE)
    assert sbom.is_sbom(env)
    ok = sbom.check_sbom(env, key.public_key(), IMAGE)
    assert ok == sbom.SbomCheck(True, sbom.sbom_digest(doc), 5)
    _, other = make_keys(tmp_path, "other")
    wrong_key = sbom.check_sbom(env, keymod.load_public(other), IMAGE)
    assert not wrong_key.ok and "no signature is valid" in wrong_key.problems[0]
    elsewhere = IMAGE.at("sha256:" + "cd" * 32)
    assert sbom.check_sbom(env, key.public_key(), elsewhere).problems == (
        f"its subject is not {elsewhere}",
    )
    not_bom = sbom.sign_sbom({"bomFormat": "SPDX"}, key, IMAGE)
    assert sbom.check_sbom(not_bom, key.public_key(), IMAGE).problems == (
        "its predicate is not a CycloneDX document",
    )
    report = dsse.sign(dsse.INTOTO_PAYLOAD_TYPE, json.dumps(smoke_result()).encode(), key)
    assert not sbom.is_sbom(report)


def test_a_bundle_is_read_strictly(tmp_path: Path) -> None:
    priv, _ = make_keys(tmp_path)
    key = keymod.load_private(priv)
    env = dsse.sign(dsse.INTOTO_PAYLOAD_TYPE, b'{"a": 1}', key)
    data = sigstore.bundle_bytes(env)
    assert sigstore.parse_bundle(data) == (env, keymod.keyid(key.public_key()))
    doc = json.loads(data)
    for change, message in (
        ({"mediaType": "application/vnd.dev.sigstore.bundle.v0.2+json"}, "mediaType is"),
        ({"verificationMaterial": {"certificate": {}}}, "names no publicKey hint"),
        ({"dsseEnvelope": None}, "holds no dsseEnvelope"),
        ({"dsseEnvelope": {**doc["dsseEnvelope"], "signatures": []}}, "has no signatures"),
    ):
        with pytest.raises(sigstore.BundleError, match=message):
            sigstore.parse_bundle(json.dumps({**doc, **change}).encode())
    with pytest.raises(sigstore.BundleError, match="duplicate"):
        sigstore.parse_bundle(data[:-1] + b',"mediaType":"x"}')
    with pytest.raises(sigstore.BundleError, match="not an object"):
        sigstore.parse_bundle(b"[]")


def test_report_sbom_input_errors_are_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    priv, _ = make_keys(tmp_path)
    code, _, err = cli(
        capsys, "report", "sbom", str(IMAGE), "--lock", str(FIXTURE_LOCK), "--sign", str(priv)
    )
    assert code == 2 and "--sign and -o go together" in err
    code, _, err = cli(
        capsys,
        *["report", "sbom", "envlock-test/x:1", "--lock", str(FIXTURE_LOCK)],
        *["--sign", str(priv), "-o", str(tmp_path / "s.json")],
    )
    assert code == 2 and "--sign needs the image by digest, not 'envlock-test/x:1'" in err
    code, _, err = cli(capsys, "report", "sbom", str(IMAGE), "--lock", str(tmp_path / "none"))
    assert code == 2 and "pylock.toml does not exist" in err
    assert "Traceback" not in err


def test_verify_and_show_read_a_bundle_file_as_its_envelope(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A .sigstore.json fetched from the registry (oras pull, cosign download) is
    verified like the report file it was made from."""
    from envlock.report import envelope_bytes, sign_result

    priv, pub = make_keys(tmp_path)
    env = sign_result(smoke_result(), priv, lock_dir=None, image_id=None, image_ref=IMAGE)
    bundle = sigstore.bundle_bytes(dsse.parse_envelope(envelope_bytes(env)))
    path = tmp_path / "report.sigstore.json"
    path.write_bytes(bundle)
    code, out, err = cli(capsys, "verify", str(path), "--key", str(pub), "--image", str(IMAGE))
    assert code == 0, err
    assert "VERIFIED: signed by the given key, smoke result PASSED" in out
    assert cli(capsys, "report", "show", str(path))[0] == 0
    doc = json.loads(bundle)
    doc["dsseEnvelope"]["payload"] = doc["dsseEnvelope"]["payload"][:-8] + "AAAAAAA="
    path.write_text(json.dumps(doc))
    code, out, err = cli(capsys, "verify", str(path), "--key", str(pub))
    assert code == 1 and "no signature is valid" in err, err
    doc["verificationMaterial"] = {}
    path.write_text(json.dumps(doc))
    code, out, err = cli(capsys, "verify", str(path), "--key", str(pub))
    assert code == 2 and "names no publicKey hint" in err, err


class _Response:
    """A streamed archive response: what was read of it, and whether it was closed."""

    def __init__(self, status: int, stat: dict[str, object] | None, body: bytes) -> None:
        import base64
        import io

        self.status_code = status
        self.headers = {}
        if stat is not None:
            header = base64.b64encode(json.dumps(stat).encode()).decode()
            self.headers["X-Docker-Container-Path-Stat"] = header
        self.raw = io.BytesIO(body)
        self.closed = False

    def raise_for_status(self) -> None:
        assert self.status_code == 200

    def close(self) -> None:
        self.closed = True


def _tar_of(name: str, data: bytes) -> bytes:
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_a_file_copied_out_is_read_only_when_regular_and_small_and_always_closed() -> None:
    """Break 8 (a, c) without an engine: the stat decides before a byte is read, and
    the response is closed on every way out (tests/test_report_sbom_docker.py runs
    the same against real images)."""
    from types import SimpleNamespace

    responses: list[_Response] = []

    def client_answering(status: int, stat: dict[str, object] | None, body: bytes) -> object:
        def get(url: str, **kwargs: object) -> _Response:
            assert url.endswith("/containers/c1/archive") and kwargs["stream"] is True
            responses.append(_Response(status, stat, body))
            return responses[-1]

        api = SimpleNamespace(base_url="http+docker://localhost", api_version="1.41", timeout=9)
        api.get = get
        return SimpleNamespace(api=api)

    copy = sbom._copy_out
    huge = {"name": "status", "size": 40 << 20, "mode": 0o644, "linkTarget": ""}
    got = copy(client_answering(200, huge, b"x" * 4096), "c1", sbom.DPKG_STATUS, 1 << 20)
    assert got == sbom._Copied(problem=f"{40 << 20} bytes, more than the {1 << 20} allowed")
    assert responses[-1].closed and responses[-1].raw.tell() == 0
    link = {"name": "status", "size": 9, "mode": 0o777 | 1 << 27, "linkTarget": "/dev/zero"}
    got = copy(client_answering(200, link, b""), "c1", sbom.DPKG_STATUS, 1 << 20)
    assert got.problem == "a symbolic link (to /dev/zero)" and responses[-1].closed
    fifo = {"name": "status", "size": 0, "mode": 0o644 | 1 << 25, "linkTarget": ""}
    assert copy(client_answering(200, fifo, b""), "c1", "/x", 1 << 20).problem == "a FIFO"
    assert copy(client_answering(404, None, b""), "c1", "/x", 1 << 20) == sbom._Copied()
    assert responses[-1].closed
    small = {"name": "status", "size": 6, "mode": 0o644, "linkTarget": ""}
    body = _tar_of("status", STATUS.encode())
    got = copy(client_answering(200, small, body), "c1", sbom.DPKG_STATUS, 1 << 20)
    assert got == sbom._Copied(STATUS.encode()) and responses[-1].closed
    # a stat that understates: the tar's own header is held to the cap too
    got = copy(client_answering(200, None, _tar_of("status", b"y" * 3000)), "c1", "/x", 1000)
    assert got.problem == "3000 bytes, more than the 1000 allowed"


def test_the_images_lock_must_list_what_the_bundles_lists() -> None:
    from envlock.render.context import BUNDLE_IN_IMAGE

    assert f"{BUNDLE_IN_IMAGE}/pylock.toml" == sbom.IMAGE_LOCK  # the Dockerfile's COPY
    locked = read_lock(FIXTURE_LOCK)
    text = (FIXTURE_LOCK / "pylock.toml").read_text()
    found = sbom.ImagePackages("debian", lock_text=text)
    assert sbom.image_lock(found, "img", locked, "DIR/pylock.toml") == locked
    other = text.replace('"dep-a"\nversion = "1.0"', '"dep-a"\nversion = "1.1"')
    other = other.replace("dep_a-1.0-py3", "dep_a-1.1-py3")
    inside = sbom.ImagePackages("debian", lock_text=other)
    with pytest.raises(CheckFailed) as failed:
        sbom.image_lock(inside, "img", locked, "DIR/pylock.toml")
    assert "dep-a: 1.1 in the image, 1.0 in DIR/pylock.toml" in failed.value.message
    assert (failed.value.hint or "").startswith("img was built from a lock of tensorflow 2.14.1")
    with pytest.raises(CheckFailed, match="img has no /opt/envlock/pylock.toml"):
        sbom.image_lock(sbom.ImagePackages("debian"), "img", locked, "DIR/pylock.toml")
