"""The private key never enters a build context or an image (issue #6, must-show 17).

A user makes a key beside a bundle (allowed) and tries to make one inside it
(refused); then, carelessly, copies the key into the bundle and a subfolder of
it anyway. The bundle is rendered by envlock's real templates and built by
envlock's real build code on the local base image. The test captures the exact
context tar docker-py sends to the engine, and exports the built image's whole
filesystem, and looks for the key in both, by name and by content. Controls
show that the same scans do find files that are meant to be there.
"""

from __future__ import annotations

import io
import shutil
import tarfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from report_support import cli

from envlock import fsutil
from envlock.image.build import build_image
from envlock.lock import pylock_text, requirements_text
from envlock.model import Constraints, Lock, LockInput, Resolution
from envlock.render import RenderOptions, render_bundle

TAG = "envlock-test/report-nokey:1"
E2E_TAG = "envlock-test/report-e2e:1"


def tiny_lock(base_image: str) -> Lock:
    """A lock with no packages: the build is fast and needs no network."""
    res = Resolution(
        framework="tensorflow",
        version="2.15.1",
        python="3.11",
        python_supported=("3.11",),
        cuda="12.2",
        cudnn="8.9",
        driver_min="525.60.13",
        compute_capabilities=("sm_80",),
        cuda_source="system",
        os="ubuntu22.04",
        base_image=base_image,
        base_image_digest=None,
        cuda_image_version="12.2.2",
        image_cudnn=None,
        and_cuda=(),
        requires_python=">=3.9",
        matrix_version="2026-11-30",
        matrix_digest="0" * 64,
    )
    return Lock(res, LockInput(Constraints(spec="tensorflow==2.15.1")), (), "uv", "0.0")


def write_bundle(bundle: Path, base_image: str) -> None:
    lock = tiny_lock(base_image)
    lock_files = {
        "pylock.toml": pylock_text(lock).encode(),
        "requirements.txt": requirements_text(lock).encode(),
    }
    rendered = render_bundle(
        lock, RenderOptions(base_image=base_image, python_from="image"), lock_files
    )
    fsutil.write_files(bundle, {**lock_files, **rendered})


def pem_body(pem: bytes) -> bytes:
    """The base64 lines of a PEM file: what any copy of it must contain."""
    lines = [ln for ln in pem.splitlines() if ln and not ln.startswith(b"-----")]
    return lines[0]


def find(chunks: Iterable[bytes], needles: list[bytes]) -> set[bytes]:
    """Which needles occur in a byte stream (matches across chunk borders too)."""
    keep = max(len(n) for n in needles)
    tail = b""
    found: set[bytes] = set()
    for chunk in chunks:
        window = tail + chunk
        found.update(n for n in needles if n in window)
        tail = window[-keep:]
    return found


def tar_names(data: bytes) -> list[str]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return tar.getnames()


@pytest.fixture
def captured_context(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bytes]]:
    """Record every build context tar docker-py makes, unchanged, as it goes to the engine."""
    import docker.utils

    seen: list[bytes] = []
    real_tar = docker.utils.tar

    def recording_tar(*args: Any, **kwargs: Any) -> Any:
        fileobj = real_tar(*args, **kwargs)
        data = fileobj.read()
        seen.append(data)
        fileobj.seek(0)
        return fileobj

    monkeypatch.setattr(docker.utils, "tar", recording_tar)
    yield seen


@pytest.fixture(scope="module")
def e2e_image(
    tmp_path_factory: pytest.TempPathFactory, base_image: str
) -> Iterator[tuple[Path, str]]:
    import docker

    bundle = tmp_path_factory.mktemp("e2e") / "env"
    write_bundle(bundle, base_image)
    result = build_image(
        bundle, tag=E2E_TAG, base_image=base_image, network="none", progress="quiet"
    )
    yield bundle, result.image_id
    client = docker.from_env()
    client.images.remove(E2E_TAG, force=True)
    client.close()


@pytest.mark.docker
@pytest.mark.slow
def test_private_key_never_enters_the_context_or_the_image(
    tmp_path: Path,
    base_image: str,
    e2e_image: tuple[Path, str],  # built first: the same layers, so this build is cached
    captured_context: list[bytes],
    capsys: pytest.CaptureFixture[str],
) -> None:
    import docker

    bundle = tmp_path / "env"
    write_bundle(bundle, base_image)

    # beside the bundle, as documented: allowed
    code, _, err = cli(capsys, "keygen", "-o", f"{bundle}/../key")
    assert code == 0, err
    private = tmp_path / "key.pem"
    # inside the bundle: refused, nothing written
    before = sorted(p.name for p in bundle.iterdir())
    code, _, err = cli(capsys, "keygen", "-o", str(bundle / "signing"))
    assert code == 2 and "would be sent with the build context" in err
    assert sorted(p.name for p in bundle.iterdir()) == before
    # the careless user copies it in anyway, at the top and in a subfolder
    shutil.copy(private, bundle / "signing.pem")
    (bundle / "keys").mkdir()
    shutil.copy(private, bundle / "keys" / "envlock.pem")

    key_marker = pem_body(private.read_bytes())
    lock_marker = (bundle / "pylock.toml").read_bytes()
    harness_marker = (bundle / "envlock_smoke.py").read_bytes()[:200]

    result = build_image(bundle, tag=TAG, base_image=base_image, network="none", progress="quiet")
    client = docker.from_env()
    try:
        # the context: exactly what was sent
        assert len(captured_context) == 1
        context = captured_context[0]
        names = tar_names(context)
        assert "pylock.toml" in names and "requirements.txt" in names  # control
        assert not [n for n in names if n.endswith(".pem") or n.startswith("keys")], names
        assert find([context], [key_marker, lock_marker]) == {lock_marker}

        # the image: its whole filesystem, exported
        container = client.containers.create(result.image_id, command=["true"])
        try:
            found = find(
                container.export(chunk_size=1 << 20), [key_marker, lock_marker, harness_marker]
            )
            # also by name: no private key file anywhere
            files = container.get_archive("/opt/envlock")[0]
            archived = b"".join(files)
        finally:
            container.remove(force=True)
        assert lock_marker in found and harness_marker in found  # controls
        assert key_marker not in found
        assert not [n for n in tar_names(archived) if n.endswith(".pem")]
        # labels and history carry no key either
        image = client.images.get(result.image_id)
        history = repr(image.history()) + repr(image.attrs)
        assert key_marker.decode() not in history
    finally:
        client.images.remove(TAG, noprune=True)  # the layers belong to the e2e image too
        client.close()


@pytest.mark.docker
@pytest.mark.slow
def test_build_smoke_sign_verify_end_to_end(
    tmp_path: Path, e2e_image: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """envlock smoke IMAGE --sign in a real image; verify against the image and the lock."""
    import json

    bundle, image_id = e2e_image
    assert cli(capsys, "keygen", "-o", str(tmp_path / "key"))[0] == 0
    report = tmp_path / "env.intoto.json"
    code, out, err = cli(
        capsys,
        "smoke",
        E2E_TAG,
        "--gpus",
        "none",
        "--sign",
        str(tmp_path / "key.pem"),
        "--lock",
        str(bundle),
        "-o",
        str(report),
    )
    assert code == 1, err  # no framework in this image: the smoke test fails, and says so
    pub = str(tmp_path / "key.pub.pem")
    code, out, err = cli(
        capsys,
        "verify",
        str(report),
        "--key",
        pub,
        "--lock",
        str(bundle),
        "--image",
        E2E_TAG,
        "--json",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["subject"] == [{"name": E2E_TAG, "digest": {"sha256": image_id[7:]}}]
    assert doc["result"] == "FAILED" and doc["uncovered"] == []
    assert {c["status"] for c in doc["checked"]} == {"matches"}
    assert {c["kind"] for c in doc["checked"]} == {"image", "file"}
    assert "import" in doc["failedTests"]

    # the bundle changes after the report: drift, field by field
    with open(bundle / "Dockerfile", "a") as f:
        f.write("# edited\n")
    try:
        code, out, err = cli(
            capsys,
            "verify",
            str(report),
            "--key",
            pub,
            "--lock",
            str(bundle),
            "--image",
            E2E_TAG,
            "--json",
        )
    finally:
        text = (bundle / "Dockerfile").read_text()
        (bundle / "Dockerfile").write_text(text.removesuffix("# edited\n"))
    assert code == 1
    assert [d["field"] for d in json.loads(out)["drift"]] == ["configuration[Dockerfile].sha256"]
