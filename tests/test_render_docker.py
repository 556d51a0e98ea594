"""The rendered Dockerfile, built for real through the Docker Engine.

No registry is reachable here, so the nvidia/cuda base cannot be pulled: the
same template is rendered with the local base image (tests/docker/setup.sh)
as --base-image and --python-from image, then built with the real TensorFlow
2.15.1 wheels from the index, and the image is inspected and smoke-tested.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from envlock.cli import main
from envlock.index.config import index_url

REPO = Path(__file__).resolve().parent.parent
CASE = REPO / "tests" / "golden" / "render" / "tf2.15-system"
SYSTEM_CA = Path("/etc/ssl/certs/ca-certificates.crt")
TAG = "envlock-test/render-tf2.15:latest"

pytestmark = [pytest.mark.docker, pytest.mark.network, pytest.mark.slow]


def run(client: Any, image: str, command: list[str], **kwargs: Any) -> tuple[int, str]:
    container = client.containers.run(image, command, detach=True, network_mode="none", **kwargs)
    try:
        status = container.wait(timeout=600)
        logs = container.logs(stdout=True, stderr=False).decode()
    finally:
        container.remove(force=True)
    return int(status["StatusCode"]), logs


@pytest.fixture(scope="module")
def built(base_image: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    import docker

    bundle = tmp_path_factory.mktemp("tf215-image")
    for name in ("pylock.toml", "requirements.txt"):
        shutil.copy(CASE / name, bundle / name)
    argv = ["render", str(bundle), "--base-image", base_image, "--python-from", "image"]
    if SYSTEM_CA.is_file():  # the TLS-intercepting proxy of this machine
        argv += ["--ca-cert", str(SYSTEM_CA)]
    assert main(argv) == 0
    client = docker.from_env(timeout=1800)
    start = time.monotonic()
    image, logs = client.images.build(
        path=str(bundle),
        tag=TAG,
        network_mode="host",
        buildargs={"PIP_INDEX_URL": index_url()},
        rm=True,
        forcerm=True,
    )
    seconds = time.monotonic() - start
    log = "".join(chunk.get("stream", "") for chunk in logs if isinstance(chunk, dict))
    return {"client": client, "image": image, "bundle": bundle, "seconds": seconds, "log": log}


def test_image_carries_the_lock(built: dict[str, Any], base_image: str) -> None:
    image = built["image"]
    bundle: Path = built["bundle"]
    config = image.attrs["Config"]
    labels = config["Labels"]
    digest = "sha256:" + hashlib.sha256((bundle / "pylock.toml").read_bytes()).hexdigest()
    assert labels["io.envlock.lock.digest"] == digest
    assert labels["io.envlock.framework"] == "tensorflow"
    assert labels["io.envlock.framework.version"] == "2.15.1"
    assert labels["io.envlock.python"] == "3.11"
    assert labels["io.envlock.cuda"] == "12.2"
    assert labels["io.envlock.cudnn"] == "8.9"
    assert labels["io.envlock.cuda-source"] == "system"
    assert labels["org.opencontainers.image.base.name"] == base_image
    assert labels["org.opencontainers.image.version"] == "2.15.1"
    assert config["User"] == "10001:10001"
    assert "ENVLOCK_RUNTIME_CONFIG=/opt/envlock/runtime.json" in config["Env"]
    assert config["Cmd"] == [
        "python",
        "/opt/envlock/envlock_smoke.py",
        "--expect",
        "/opt/envlock/expect.json",
    ]
    # hashed, dependency-free install from the lock, and pip check in the build
    log = built["log"]
    install = [line for line in log.splitlines() if "pip install" in line and "Step " in line]
    assert len(install) == 1 and "--require-hashes --no-deps" in install[0], log
    after = log.split(install[0], 1)[1].split("\nStep ", 1)[0]
    assert "Using cache" in after or "No broken requirements found." in after, after
    print(f"\nbuild: {built['seconds']:.0f} s, image {image.attrs['Size'] / 1e9:.2f} GB")


def test_runtime_stage_contents(built: dict[str, Any]) -> None:
    script = (
        "set -u; id -u; id -g; "
        "for t in gcc cc g++ make; do command -v $t && echo has-$t; done; "
        "test -e /etc/envlock && echo has-ca; "
        "test -e /opt/envlock/envlock-ca.pem && echo ca-in-bundle; "
        "test -d $HOME/.cache/pip && echo pip-cache; test -d /root/.cache/pip && echo root-cache; "
        "ls /opt/envlock; "
        "python -c 'import sys, envlock_runtime as r; print(sys.prefix, r.load()[\"seed\"])'"
    )
    code, out = run(built["client"], TAG, ["bash", "-c", script])
    assert code == 0, out
    lines = out.split()
    assert lines[:2] == ["10001", "10001"]
    assert not [w for w in lines if w.startswith("has-")], out
    for word in ("ca-in-bundle", "pip-cache", "root-cache"):
        assert word not in lines, out
    assert lines[2:8] == [
        "envlock_smoke.py",
        "expect.json",
        "pylock.toml",
        "requirements.txt",
        "runtime.json",
        "/opt/venv",
    ]
    assert lines[8] == "42"


def test_smoke_in_the_image(built: dict[str, Any]) -> None:
    code, out = run(
        built["client"],
        TAG,
        [
            "python",
            "/opt/envlock/envlock_smoke.py",
            "--expect",
            "/opt/envlock/expect.json",
            "--allow-cpu",
            "--no-benchmark",
        ],
    )
    result = json.loads(out)
    assert code == 0, out
    assert result["status"] == "WARNED"
    assert result["version"] == "2.15.1"
    checks = {c["name"]: c["status"] for c in result["checks"]}
    assert checks["framework_version"] == "PASS"
    assert checks["build_cuda"] == "PASS" and checks["build_cudnn"] == "PASS"
    assert checks["gpu_visible"] == "WARN"
    # the training checks run by default and pass on the CPU: the loss fell in each
    train = ["train_eager", "train_fit_float32", "train_fit_mixed_float16", "train_fit_jit_compile"]
    assert [(n, checks.get(n)) for n in train] == [(n, "PASS") for n in train]
    assert [c["name"] for c in result["checks"] if c["status"] == "WARN"] == ["gpu_visible"]
    assert result["settings"]["runtime_config"] == "/opt/envlock/runtime.json"
    expect = json.loads((built["bundle"] / "expect.json").read_text())
    assert result["expected"] == expect

    # the image's default command is the strict smoke test: no GPU here, so it fails
    code, out = run(built["client"], TAG, None)
    assert code == 1
    assert json.loads(out)["status"] == "FAILED"


def test_base_image_as_a_build_argument(
    built: dict[str, Any], base_image: str, tmp_path: Path
) -> None:
    """The nvidia/cuda default stays in the Dockerfile; --build-arg BASE_IMAGE replaces it."""
    for name in ("pylock.toml", "requirements.txt"):
        shutil.copy(CASE / name, tmp_path / name)
    argv = ["render", str(tmp_path), "--python-from", "image"]
    if SYSTEM_CA.is_file():
        argv += ["--ca-cert", str(SYSTEM_CA)]
    assert main(argv) == 0
    dockerfile = (tmp_path / "Dockerfile").read_text()
    assert "ARG BASE_IMAGE=nvidia/cuda:12.2.2-cudnn8-runtime-ubuntu22.04\n" in dockerfile
    image, _ = built["client"].images.build(
        path=str(tmp_path),
        tag="envlock-test/render-tf2.15-buildarg:latest",
        network_mode="host",
        buildargs={"BASE_IMAGE": base_image, "PIP_INDEX_URL": index_url()},
        rm=True,
        forcerm=True,
    )
    labels = image.attrs["Config"]["Labels"]
    assert labels["org.opencontainers.image.base.name"] == base_image
    assert labels["io.envlock.lock.digest"] == built["image"].labels["io.envlock.lock.digest"]
    code, out = run(
        built["client"],
        image.id,
        ["python", "-c", "import tensorflow, sys; print(tensorflow.__version__, sys.prefix)"],
    )
    assert code == 0 and out.split()[-2:] == ["2.15.1", "/opt/venv"], out
