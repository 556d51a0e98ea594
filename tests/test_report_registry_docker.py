"""Reports bound to a pushed image's digest, through the real engine and registry.

A small image (the local base plus one label) is pushed to the tests' registry
(tests/docker/setup.sh: 127.0.0.1:5000, no auth) with docker-py, smoke-tested
by REPO@sha256:<digest> and signed; the local image is then removed and the
report still verifies by digest with no Docker Engine at all. The report is
attached as cosign lays attestations out and read back. The base image has
no framework, so the smoke result is an honest FAILED: what is checked here
is the subject, not the verdict.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from docker_support import build_test_image, docker_unavailable
from report_support import cli, decode, make_keys

from envlock.image import attestations
from envlock.report.statement import PREDICATE_TYPE

pytestmark = pytest.mark.docker

REGISTRY = os.environ.get("ENVLOCK_TEST_REGISTRY", "127.0.0.1:5000")
REPO = f"{REGISTRY}/digest-helper/smoke"


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


@pytest.fixture(scope="module")
def pushed(client: Any, base_image: str, registry_up: str) -> Iterator[str]:
    """REPO@sha256:<manifest digest> of a fresh image (a unique label: a new digest)."""
    tag = f"{REPO}:{uuid.uuid4().hex[:12]}"
    dockerfile = f"FROM {base_image}\nLABEL io.envlock.test.digest-helper={tag}\n"
    image, _ = build_test_image(
        client, fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True, network_mode="none"
    )
    repo, _, name = tag.rpartition(":")
    digest = None
    for line in client.api.push(repo, tag=name, stream=True, decode=True):
        assert "error" not in line, line
        digest = (line.get("aux") or {}).get("Digest") or digest
    assert digest and digest.startswith("sha256:")
    yield f"{repo}@{digest}"
    for ref in (tag, f"{repo}@{digest}"):
        with contextlib.suppress(Exception):
            client.images.remove(ref, force=True)


def _remove_local(client: Any, pinned: str) -> None:
    import docker.errors

    image = client.images.get(pinned)
    for ref in [*image.tags, pinned]:
        with contextlib.suppress(docker.errors.ImageNotFound):
            client.images.remove(ref, force=True)
    with pytest.raises(docker.errors.ImageNotFound):
        client.images.get(pinned)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_smoke_by_digest_then_verify_anywhere_and_attach(
    pushed: str,
    client: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import requests

    priv, pub = make_keys(tmp_path)
    report = tmp_path / "smoke.intoto.json"
    code, out, err = cli(
        capsys,
        *["smoke", pushed, "--allow-cpu", "--gpus", "none", "--sign", str(priv)],
        *["-o", str(report), "--json"],
    )
    assert code == 1, err  # the base image has no framework: FAILED, and signed
    result = json.loads(out)
    assert result["image"]["pinned"] == pushed
    assert result["image"]["id"] == client.images.get(pushed).id
    statement = decode(json.loads(report.read_text()))
    repo, _, digest = pushed.partition("@")
    assert statement["subject"] == [{"name": repo, "digest": {"sha256": digest[7:]}}]
    assert statement["predicate"]["envlock"]["subject_kind"] == "image-manifest"

    # no image here and no engine at all: the digest is in the reference
    _remove_local(client, pushed)
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    code, out, err = cli(capsys, "verify", str(report), "--key", str(pub), "--image", pushed)
    assert code == 0, err
    assert f"image      {pushed}: matches the report\n" in out
    assert "the signature is valid, but this report says the smoke test FAILED" in out
    wrong = f"{repo}@sha256:{'0' * 64}"
    code, out, err = cli(capsys, "verify", str(report), "--key", str(pub), "--image", wrong)
    assert code == 1
    assert "NOT VERIFIED: subject.digest.sha256 drifted" in err

    # attach as cosign's older layout does (--format legacy; the referrers layout, the
    # default, is tests/test_report_referrers_docker.py's), then read it back
    code, out, err = cli(
        capsys, "report", "attach", str(report), "--image", pushed, "--format", "legacy", "--json"
    )
    assert code == 0, err
    tag = f"sha256-{digest[7:]}.att"
    assert json.loads(out) == {
        "report": str(report),
        "image": pushed,
        "attached": f"{repo}:{tag}",
        "layout": "legacy",
    }
    path = repo.partition("/")[2]
    resp = requests.get(
        f"http://{REGISTRY}/v2/{path}/manifests/{tag}",
        headers={"Accept": "application/vnd.oci.image.manifest.v1+json"},
        timeout=30,
    )
    assert resp.status_code == 200
    manifest = resp.json()
    envelope = report.read_bytes()
    config = requests.get(
        f"http://{REGISTRY}/v2/{path}/blobs/{manifest['config']['digest']}", timeout=30
    ).content
    layer_digest = "sha256:" + hashlib.sha256(envelope).hexdigest()
    assert manifest == {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "size": len(config),
            "digest": "sha256:" + hashlib.sha256(config).hexdigest(),
        },
        "layers": [
            {
                "mediaType": "application/vnd.dsse.envelope.v1+json",
                "size": len(envelope),
                "digest": layer_digest,
                "annotations": {
                    "dev.cosignproject.cosign/signature": "",
                    "predicateType": PREDICATE_TYPE,
                },
            }
        ],
    }
    assert json.loads(config)["rootfs"] == {"type": "layers", "diff_ids": [layer_digest]}
    blob = requests.get(f"http://{REGISTRY}/v2/{path}/blobs/{layer_digest}", timeout=30)
    assert blob.content == envelope
    assert attestations.fetch_attestations(pushed) == [envelope]

    # attaching the same report again keeps one layer; verify it from the registry
    assert (
        cli(capsys, "report", "attach", str(report), "--image", pushed, "--format", "legacy")[0]
        == 0
    )
    assert attestations.fetch_attestations(pushed) == [envelope]
    code, out, err = cli(
        capsys, "verify", "--from-registry", "--image", pushed, "--key", str(pub), "--json"
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["verified"] is True and doc["attached"] == f"{repo}:{tag}"
    assert [a["verified"] for a in doc["attestations"]] == [True]
    assert doc["attestations"][0]["result"] == "FAILED"
    code, out, err = cli(
        capsys,
        *["verify", "--from-registry", "--image", pushed, "--key", str(pub)],
        "--require-pass",
    )
    assert code == 1
    assert f"none of the 1 report(s) attached to {pushed} verifies" in err
    other = f"{repo}@sha256:{'1' * 64}"
    code, out, err = cli(capsys, "verify", "--from-registry", "--image", other, "--key", str(pub))
    assert code == 1 and f"no report is attached to {other}" in err


def test_smoke_by_digest_pulls_an_image_that_is_not_local(
    pushed: str, client: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import docker.errors

    with contextlib.suppress(docker.errors.ImageNotFound):
        _remove_local(client, pushed)
    code = cli(capsys, "smoke", pushed, "--allow-cpu", "--gpus", "none", "--json")
    assert code[0] == 1, code[2]  # FAILED (no framework), but it ran
    assert f"envlock: {pushed} is not local; pulling it by digest" in code[2]
    assert json.loads(code[1])["image"]["pinned"] == pushed
    assert client.images.get(pushed).id

    repo = pushed.partition("@")[0]
    missing = f"{repo}@sha256:{'0' * 64}"
    code = cli(capsys, "smoke", missing, "--allow-cpu", "--gpus", "none")
    assert code[0] == 2, code[2]
    assert f"the registry holds no image {missing}" in code[2]

    unreachable = f"127.0.0.1:{_closed_port()}/digest-helper/x@sha256:{'0' * 64}"
    code = cli(capsys, "smoke", unreachable, "--allow-cpu", "--gpus", "none")
    assert code[0] == 3, code[2]
    assert f"cannot pull {unreachable}" in code[2] and "Traceback" not in code[2]
