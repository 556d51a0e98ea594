"""Evidence where other tools look (issue #28), on the tests' real registry.

Debian's docker-registry 2.8 (tests/docker/setup.sh: 127.0.0.1:5000) has no
referrers API, so envlock's bundles land in the referrers tag schema's index.
A small image (the local base, the pylock.toml of tests/fixtures/old-bundles/v1-lock
where envlock's Dockerfile puts it, one label) is pushed, its SBOM made
(``envlock report sbom``: that lock and the image's dpkg database) and signed, a
smoke report signed with ``--lock`` (so it names the SBOM by digest), and both
attached. Then clients that are not
envlock read them: oras-py (the tag index, each manifest, each blob), Debian's
skopeo (``inspect --raw`` of every manifest), @sigstore/verify from npm (each
bundle, with only the public key) and cyclonedx-python-lib (the SBOM against
the CycloneDX 1.6 schema). ``verify --from-registry`` passes on this layout and
on the legacy ``.att`` one, and fails naming the layer when either artifact is
replaced by a tampered one. The base image has no framework: the smoke result
is an honest FAILED; what is checked here is the evidence, not the verdict.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from docker_support import build_test_image, docker_unavailable, remove_repository
from report_support import cli, make_keys

from envlock.lock.pylock import read_lock
from envlock.report import sbom as sbommod

pytestmark = pytest.mark.docker

REGISTRY = os.environ.get("ENVLOCK_TEST_REGISTRY", "127.0.0.1:5000")
REPO = f"{REGISTRY}/referrers-helper/cell"
BUNDLE = "application/vnd.dev.sigstore.bundle.v0.3+json"
INDEX = "application/vnd.oci.image.index.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
FIXTURE_LOCK = Path(__file__).parent / "fixtures" / "old-bundles" / "v1-lock"
VERIFY_JS = Path(__file__).parent / "sigstore" / "verify-bundle.js"


@dataclass
class Cell:
    """A pushed image with its SBOM and report signed and attached in one layout."""

    image: str  # REPO@sha256:<hex>
    lock: Path
    priv: Path
    pub: Path
    report: Path
    sbom_statement: Path
    attached: list[dict[str, Any]]

    @property
    def hexdigest(self) -> str:
        return self.image.partition("@sha256:")[2]

    @property
    def path(self) -> str:
        return REPO.partition("/")[2]


@pytest.fixture(scope="module")
def registry_up() -> str:
    import requests

    try:
        ok = requests.get(f"http://{REGISTRY}/v2/", timeout=5).status_code == 200
    except requests.RequestException:
        ok = False
    if not ok:
        docker_unavailable(f"no registry answers at {REGISTRY} (tests/docker/setup.sh starts one)")
    return REGISTRY


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    import docker

    c = docker.from_env(timeout=300)
    yield c
    c.close()


def _push(client: Any, base_image: str) -> str:
    tag = f"{REPO}:{uuid.uuid4().hex[:12]}"
    # the lock where envlock's Dockerfile puts it: report sbom reads it from the image
    dockerfile = (
        f"FROM {base_image}\nCOPY pylock.toml {sbommod.IMAGE_LOCK}\n"
        f"LABEL io.envlock.test.referrers={tag}\n"
    )
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        for name, data in (
            ("Dockerfile", dockerfile.encode()),
            ("pylock.toml", (FIXTURE_LOCK / "pylock.toml").read_bytes()),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    context.seek(0)
    build_test_image(
        client, fileobj=context, custom_context=True, tag=tag, rm=True, network_mode="none"
    )
    repo, _, name = tag.rpartition(":")
    digest = None
    for line in client.api.push(repo, tag=name, stream=True, decode=True):
        assert "error" not in line, line
        digest = (line.get("aux") or {}).get("Digest") or digest
    assert digest and digest.startswith("sha256:")
    return f"{repo}@{digest}"


def _cell(capsys: Any, client: Any, base_image: str, tmp: Path, fmt: str) -> Iterator[Cell]:
    image = _push(client, base_image)
    lock = tmp / "lock"
    shutil.copytree(FIXTURE_LOCK, lock)
    keys = tmp / "keys"
    keys.mkdir()
    priv, pub = make_keys(keys, "team")
    statement = tmp / "sbom.intoto.json"
    code, out, err = cli(
        capsys,
        *["report", "sbom", image, "--lock", str(lock), "--sign", str(priv)],
        *["-o", str(statement), "--json"],
    )
    assert code == 0, err
    report = tmp / "smoke.intoto.json"
    code, out, err = cli(
        capsys,
        *["smoke", image, "--allow-cpu", "--gpus", "none", "--lock", str(lock)],
        *["--sign", str(priv), "-o", str(report)],
    )
    assert code == 1, err  # the base image has no framework: FAILED, and signed
    attached = []
    for path in (report, statement):
        code, out, err = cli(
            capsys, "report", "attach", str(path), "--image", image, "--format", fmt, "--json"
        )
        assert code == 0, err
        attached.append(json.loads(out))
    try:
        yield Cell(image, lock, priv, pub, report, statement, attached)
    finally:
        remove_repository(client, REPO, keep=base_image)


@pytest.fixture(scope="module")
def cell(
    client: Any,
    base_image: str,
    registry_up: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Cell]:
    capsys = _Capture()
    try:
        cells = _cell(capsys, client, base_image, tmp_path_factory.mktemp("referrers"), "referrers")
        made = next(cells)
    finally:
        capsys.close()
    yield made
    next(cells, None)


@pytest.fixture(scope="module")
def legacy_cell(
    client: Any,
    base_image: str,
    registry_up: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Cell]:
    capsys = _Capture()
    try:
        cells = _cell(capsys, client, base_image, tmp_path_factory.mktemp("legacy"), "legacy")
        made = next(cells)
    finally:
        capsys.close()
    yield made
    next(cells, None)


class _Capture:
    """``capsys`` for a module fixture: ``cli`` calls ``main`` with stdout and stderr
    redirected here, then ``readouterr``."""

    def __init__(self) -> None:
        self.out = io.StringIO()
        self.err = io.StringIO()
        self._stack = contextlib.ExitStack()
        self._stack.enter_context(contextlib.redirect_stdout(self.out))
        self._stack.enter_context(contextlib.redirect_stderr(self.err))

    def readouterr(self) -> Any:
        out, err = self.out.getvalue(), self.err.getvalue()
        for buf in (self.out, self.err):
            buf.seek(0)
            buf.truncate()
        return type("Captured", (), {"out": out, "err": err})()

    def close(self) -> None:
        self._stack.close()


def _get(url: str, accept: str | None = None) -> Any:
    import requests

    resp = requests.get(url, headers={"Accept": accept} if accept else {}, timeout=30)
    assert resp.status_code == 200, (url, resp.status_code, resp.text[:200])
    return resp


def _put(url: str, body: bytes, media: str) -> None:
    import requests

    resp = requests.put(url, data=body, headers={"Content-Type": media}, timeout=30)
    assert resp.status_code == 201, (url, resp.status_code, resp.text[:200])


def _push_blob(path: str, data: bytes) -> str:
    import requests

    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    start = requests.post(f"http://{REGISTRY}/v2/{path}/blobs/uploads/", timeout=30)
    assert start.status_code == 202
    location = start.headers["Location"]
    if location.startswith("/"):
        location = f"http://{REGISTRY}{location}"
    sep = "&" if "?" in location else "?"
    done = requests.put(f"{location}{sep}digest={digest}", data=data, timeout=30)
    assert done.status_code == 201, done.text
    return digest


def _tampered_envelope(envelope: dict[str, Any]) -> dict[str, Any]:
    """The same envelope, its payload changed by one field, the signature kept."""
    statement = json.loads(base64.b64decode(envelope["payload"]))
    if statement["predicateType"] == sbommod.PREDICATE_TYPE:
        statement["predicate"]["components"][0]["version"] = "6.6.6"
    else:
        statement["predicate"]["result"] = "PASSED"
    payload = json.dumps(statement, separators=(",", ":")).encode()
    return {**envelope, "payload": base64.b64encode(payload).decode()}


def _envlock_verify(capsys: Any, cell: Cell, *extra: str) -> tuple[int, str, str]:
    return cli(
        capsys, "verify", "--from-registry", "--image", cell.image, "--key", str(cell.pub), *extra
    )


def _sigstore_js() -> Path:
    for folder in (
        os.environ.get("ENVLOCK_SIGSTORE_JS"),
        "/var/cache/envlock-sigstore-js",
        str(Path.home() / ".cache" / "envlock-sigstore-js"),
    ):
        if folder and (Path(folder) / "node_modules" / "@sigstore" / "verify").is_dir():
            return Path(folder) / "node_modules"
    docker_unavailable("@sigstore/verify is not installed (bash tests/sigstore/setup.sh)")


def _node_verify(bundle: bytes, pub: Path, tmp: Path) -> dict[str, Any]:
    path = tmp / f"{hashlib.sha256(bundle).hexdigest()[:12]}.sigstore.json"
    path.write_bytes(bundle)
    proc = subprocess.run(
        ["node", str(VERIFY_JS), str(path), str(pub)],
        env={**os.environ, "NODE_PATH": str(_sigstore_js())},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    doc: dict[str, Any] = json.loads(proc.stdout)
    assert (proc.returncode == 0) == doc["verified"], (proc.returncode, proc.stdout, proc.stderr)
    return doc


# ------------------------------------------------------------ the referrers layout


def test_the_tag_index_lists_both_bundles_as_cosign_lays_them_out(cell: Cell) -> None:
    index = _get(f"http://{REGISTRY}/v2/{cell.path}/manifests/sha256-{cell.hexdigest}", INDEX)
    assert index.headers["Content-Type"] == INDEX
    doc = index.json()
    assert doc["schemaVersion"] == 2 and doc["mediaType"] == INDEX
    assert [a["layout"] for a in cell.attached] == ["referrers tag", "referrers tag"]
    listed = [m["digest"] for m in doc["manifests"]]
    assert listed == [a["attached"].partition("@")[2] for a in cell.attached]
    predicate_types = []
    for entry in doc["manifests"]:
        assert entry["mediaType"] == MANIFEST and entry["artifactType"] == BUNDLE
        manifest = _get(f"http://{REGISTRY}/v2/{cell.path}/manifests/{entry['digest']}", MANIFEST)
        assert len(manifest.content) == entry["size"]
        body = manifest.json()
        assert body["artifactType"] == BUNDLE
        assert body["config"] == {
            "mediaType": "application/vnd.oci.empty.v1+json",
            "digest": "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a",
            "size": 2,
        }
        assert body["subject"]["digest"] == f"sha256:{cell.hexdigest}"
        assert body["annotations"] == entry["annotations"]
        assert body["annotations"]["dev.sigstore.bundle.content"] == "dsse-envelope"
        predicate_types.append(body["annotations"]["dev.sigstore.bundle.predicateType"])
        (layer,) = body["layers"]
        assert layer["mediaType"] == BUNDLE
        assert layer["annotations"]["org.opencontainers.image.title"] == (
            f"sha256-{layer['digest'][7:]}.sigstore.json"
        )
    assert predicate_types == [
        "https://in-toto.io/attestation/test-result/v0.1",
        "https://cyclonedx.org/bom",
    ]


def test_oras_reads_the_index_by_tag_and_every_manifest_and_blob(cell: Cell) -> None:
    """oras-py has no discover: the referrers tag index is read by tag, then each
    listed manifest and its bundle blob, as any OCI client would."""
    import oras.provider

    remote = oras.provider.Registry(hostname=REGISTRY, insecure=True)
    index = remote.get_manifest(
        remote.get_container(f"{REPO}:sha256-{cell.hexdigest}"), allowed_media_type=[INDEX]
    )
    seen = []
    for entry in index["manifests"]:
        container = remote.get_container(f"{REPO}@{entry['digest']}")
        manifest = remote.get_manifest(container)
        assert manifest["subject"]["digest"] == f"sha256:{cell.hexdigest}"
        layer = manifest["layers"][0]
        blob = remote.get_blob(container, layer["digest"]).content
        assert hashlib.sha256(blob).hexdigest() == layer["digest"][7:]
        bundle = json.loads(blob)
        assert bundle["mediaType"] == BUNDLE
        statement = json.loads(base64.b64decode(bundle["dsseEnvelope"]["payload"]))
        seen.append(statement["predicateType"])
    print(f"oras-py: {len(seen)} bundles under {REPO}:sha256-{cell.hexdigest[:12]}...: {seen}")
    assert seen == ["https://in-toto.io/attestation/test-result/v0.1", "https://cyclonedx.org/bom"]


def test_skopeo_inspect_raw_reads_the_index_and_the_manifests(cell: Cell) -> None:
    if shutil.which("skopeo") is None:
        docker_unavailable("skopeo is not installed (tests/docker/setup.sh installs it)")

    def raw(ref: str) -> bytes:
        proc = subprocess.run(
            ["skopeo", "inspect", "--raw", "--tls-verify=false", f"docker://{ref}"],
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    index = raw(f"{REPO}:sha256-{cell.hexdigest}")
    assert (
        index
        == _get(
            f"http://{REGISTRY}/v2/{cell.path}/manifests/sha256-{cell.hexdigest}", INDEX
        ).content
    )
    for entry in json.loads(index)["manifests"]:
        body = raw(f"{REPO}@{entry['digest']}")
        assert "sha256:" + hashlib.sha256(body).hexdigest() == entry["digest"]
        assert json.loads(body)["artifactType"] == BUNDLE
    print(f"skopeo inspect --raw: index {len(index)} bytes, {len(json.loads(index)['manifests'])}")


def _bundles(cell: Cell) -> list[bytes]:
    index = _get(f"http://{REGISTRY}/v2/{cell.path}/manifests/sha256-{cell.hexdigest}", INDEX)
    out = []
    for entry in index.json()["manifests"]:
        manifest = _get(f"http://{REGISTRY}/v2/{cell.path}/manifests/{entry['digest']}", MANIFEST)
        layer = manifest.json()["layers"][0]["digest"]
        out.append(_get(f"http://{REGISTRY}/v2/{cell.path}/blobs/{layer}").content)
    return out


def test_sigstore_js_verifies_both_bundles_with_only_the_public_key(
    cell: Cell, tmp_path: Path
) -> None:
    if shutil.which("node") is None:
        docker_unavailable("node is not installed (tests/sigstore/setup.sh installs it as root)")
    report, sbom = _bundles(cell)
    for bundle, predicate_type in (
        (report, "https://in-toto.io/attestation/test-result/v0.1"),
        (sbom, "https://cyclonedx.org/bom"),
    ):
        doc = _node_verify(bundle, cell.pub, tmp_path)
        version = json.loads((_sigstore_js() / "@sigstore/verify/package.json").read_text())
        print(f"@sigstore/verify {version['version']}: {json.dumps(doc)[:200]}")
        assert doc["verified"] is True, doc
        assert doc["mediaType"] == BUNDLE and doc["predicateType"] == predicate_type
        assert doc["subject"] == [
            {"name": REPO, "digest": {"sha256": cell.hexdigest}},
        ]
    # the check can fail: another key, or a payload changed under the signature
    _, other = make_keys(tmp_path, "other")
    doc = _node_verify(report, other, tmp_path)
    assert doc == {"verified": False, "error": "VerificationError: signature verification failed"}
    changed = json.loads(report)
    changed["dsseEnvelope"] = _tampered_envelope(changed["dsseEnvelope"])
    doc = _node_verify(json.dumps(changed).encode(), cell.pub, tmp_path)
    assert doc["verified"] is False and "signature" in doc["error"]


def test_the_sbom_is_valid_cyclonedx_1_6_and_lists_the_lock_and_the_os(
    cell: Cell, client: Any
) -> None:
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    text = (cell.lock / sbommod.FILE).read_text()
    validator = JsonStrictValidator(SchemaVersion.V1_6)
    assert validator.validate_str(text) is None
    # the one in the registry is the same document, and as valid
    _, sbom_bundle = _bundles(cell)
    envelope = json.loads(sbom_bundle)["dsseEnvelope"]
    bom = json.loads(base64.b64decode(envelope["payload"]))["predicate"]
    assert sbommod.sbom_bytes(bom).decode() == text
    assert validator.validate_str(json.dumps(bom)) is None
    # invalid stays invalid: the validator can fail
    broken = json.loads(text)
    broken["components"][0]["hashes"][0]["alg"] = "SHA-257"
    assert validator.validate_str(json.dumps(broken)) is not None

    doc = json.loads(text)
    python = {
        (c["name"], c["version"], tuple(h["content"] for h in c["hashes"]))
        for c in doc["components"]
        if c["purl"].startswith("pkg:pypi/")
    }
    locked = read_lock(cell.lock)
    assert python == {
        (p.name, p.version, tuple(w.sha256 for w in p.wheels)) for p in locked.packages
    }
    os_components = {
        (c["name"], c["version"]) for c in doc["components"] if c["purl"].startswith("pkg:deb/")
    }
    listed = client.containers.run(
        cell.image,
        ["dpkg-query", "-W", "-f=${db:Status-Abbrev} ${Package} ${Version}\n"],
        network_mode="none",
        remove=True,
        entrypoint=[],
    ).decode()
    installed = {tuple(line.split()[1:3]) for line in listed.splitlines() if line.startswith("ii ")}
    assert len(installed) > 50
    assert os_components == installed
    assert all(
        c["purl"].startswith("pkg:deb/debian/") and "?arch=" in c["purl"]
        for c in doc["components"]
        if c["purl"].startswith("pkg:deb/")
    )


# ----------------------------------------------- envlock verify, both layouts, tampering


def test_verify_from_registry_passes_on_the_referrers_layout_and_names_the_sbom(
    cell: Cell, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _envlock_verify(capsys, cell, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["found"] == {"test-result": {"referrers tag": 1}, "sbom": {"referrers tag": 1}}
    report, sbom = doc["attestations"]
    digest = sbommod.sbom_digest(json.loads((cell.lock / sbommod.FILE).read_text()))
    assert report["kind"] == "test-result" and report["verified"] is True
    assert report["result"] == "FAILED"
    assert report["sbom"] == {"named": f"sha256:{digest}", "verified": True}
    assert sbom["kind"] == "sbom" and sbom["sbom_digest"] == f"sha256:{digest}"
    code, out, err = _envlock_verify(capsys, cell, "--lock", str(cell.lock))
    assert code == 0, err
    assert f"{cell.lock / sbommod.FILE}: matches the report" in out
    assert f"\nSBOM sha256:{digest}, named by this report: attached and verified\n" in out
    assert "found: test result(s): 1 referrers tag; SBOM(s): 1 referrers tag\n" in out


def _replace_in_index(cell: Cell, which: int) -> tuple[bytes, str]:
    """Replace the ``which``-th bundle listed in the tag index by one whose envelope was
    changed under its signature; (the original index, the tampered layer's digest)."""
    url = f"http://{REGISTRY}/v2/{cell.path}/manifests/sha256-{cell.hexdigest}"
    original = _get(url, INDEX).content
    index = json.loads(original)
    entry = index["manifests"][which]
    manifest = _get(f"http://{REGISTRY}/v2/{cell.path}/manifests/{entry['digest']}", MANIFEST)
    body = manifest.json()
    bundle = json.loads(
        _get(f"http://{REGISTRY}/v2/{cell.path}/blobs/{body['layers'][0]['digest']}").content
    )
    bundle["dsseEnvelope"] = _tampered_envelope(bundle["dsseEnvelope"])
    blob = json.dumps(bundle, separators=(",", ":")).encode()
    layer = _push_blob(cell.path, blob)
    body["layers"][0].update(digest=layer, size=len(blob))
    new = json.dumps(body, separators=(",", ":")).encode()
    new_digest = "sha256:" + hashlib.sha256(new).hexdigest()
    _put(f"http://{REGISTRY}/v2/{cell.path}/manifests/{new_digest}", new, MANIFEST)
    entry.update(digest=new_digest, size=len(new))
    _put(url, json.dumps(index).encode(), INDEX)
    return original, layer


def test_verify_fails_naming_the_layer_when_a_bundle_is_tampered(
    cell: Cell, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://{REGISTRY}/v2/{cell.path}/manifests/sha256-{cell.hexdigest}"
    for which, what in ((0, "report"), (1, "SBOM")):
        original, layer = _replace_in_index(cell, which)
        try:
            code, out, err = _envlock_verify(capsys, cell)
        finally:
            _put(url, original, INDEX)
        assert code == 1, (what, out)
        line = next(x for x in out.splitlines() if f"layer {layer}" in x)
        assert "(referrers tag)" in line
        if what == "report":
            assert "signature  NOT valid for" in out
            assert (
                f"layer {layer} (referrers tag) [1/2]: NOT VERIFIED: no signature is valid" in out
            )
        else:
            assert f"layer {layer} (referrers tag) [2/2]: SBOM NOT VERIFIED: no signature" in out
            assert "the SBOM it names (sha256:" in out
        assert "Traceback" not in err
    assert _envlock_verify(capsys, cell)[0] == 0  # restored


def test_verify_passes_on_the_legacy_layout_and_fails_naming_a_tampered_layer(
    legacy_cell: Cell, capsys: pytest.CaptureFixture[str]
) -> None:
    cell = legacy_cell
    tag = f"sha256-{cell.hexdigest}.att"
    assert [a["attached"] for a in cell.attached] == [f"{REPO}:{tag}"] * 2
    code, out, err = _envlock_verify(capsys, cell, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["found"] == {"test-result": {"legacy": 1}, "sbom": {"legacy": 1}}
    assert doc["attestations"][0]["sbom"]["verified"] is True
    url = f"http://{REGISTRY}/v2/{cell.path}/manifests/{tag}"
    original = _get(url, MANIFEST).content
    for which, what in ((0, "report"), (1, "SBOM")):
        manifest = json.loads(original)
        layer = manifest["layers"][which]
        envelope = json.loads(
            _get(f"http://{REGISTRY}/v2/{cell.path}/blobs/{layer['digest']}").content
        )
        blob = json.dumps(_tampered_envelope(envelope)).encode()
        layer.update(digest=_push_blob(cell.path, blob), size=len(blob))
        _put(url, json.dumps(manifest).encode(), MANIFEST)
        try:
            code, out, err = _envlock_verify(capsys, cell)
        finally:
            _put(url, original, MANIFEST)
        assert code == 1, (what, out)
        named = f"{REPO}:{tag} layer {layer['digest']} [{which + 1}/2]"
        assert named in out, out
        if what == "SBOM":
            assert f"{named}: SBOM NOT VERIFIED: no signature" in out
    assert _envlock_verify(capsys, cell)[0] == 0
    # no referrers were written for this image: only the legacy tag holds evidence
    import requests

    gone = requests.get(
        f"http://{REGISTRY}/v2/{cell.path}/manifests/sha256-{cell.hexdigest}",
        headers={"Accept": INDEX},
        timeout=30,
    )
    assert gone.status_code == 404
