"""The rendered Dockerfile, built for real through the Docker Engine, and
envlock build / smoke / verify on that TensorFlow image.

No registry is reachable here, so the nvidia/cuda base cannot be pulled: the
same template is rendered with a local base image (tests/docker/setup.sh's,
plus one label: see own_base) as --base-image and --python-from image, then
built with the real TensorFlow 2.15.1 wheels from the index (the golden lock
tests/golden/render/tf2.15-system), the image inspected and smoke-tested.
`envlock build` of the same bundle comes from the layers of that build (one
install of TensorFlow for the module), and is what `envlock smoke` runs and
`envlock verify` checks: no GPU and no NVIDIA container toolkit here, so the
GPU request fails when the container starts and the harness runs on the CPU.
A fresh lock against the real index is built and imported elsewhere
(test_lock_install.py, test_lock_network.py).
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from docker_support import build_test_image, checks, engine_client, remove_image, smoke_json

from envlock.cli import main
from envlock.image.build import build_image
from envlock.index.config import index_url

REPO = Path(__file__).resolve().parent.parent
CASE = REPO / "tests" / "golden" / "render" / "tf2.15-system"
SYSTEM_CA = Path("/etc/ssl/certs/ca-certificates.crt")
TAG = "envlock-test/render-tf2.15:latest"
TF_TAG = "envlock-test/h5-smoke-tf:2.15"  # envlock build's tag of the same bundle

pytestmark = [pytest.mark.docker, pytest.mark.network, pytest.mark.slow]


def run(client: Any, image: str, command: list[str], **kwargs: Any) -> tuple[int, str]:
    container = client.containers.run(image, command, detach=True, network_mode="none", **kwargs)
    try:
        status = container.wait(timeout=600)
        logs = container.logs(stdout=True, stderr=False).decode()
    finally:
        container.remove(force=True)
    return int(status["StatusCode"]), logs


@pytest.fixture(scope="module", autouse=True)
def _reproducible_builds() -> Iterator[None]:
    """A fixed created label (envlock build sets it): the rebuild below stays cached."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SOURCE_DATE_EPOCH", "1700000000")
        yield


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    yield from engine_client(1800)


@pytest.fixture(scope="module")
def own_base(client: Any, base_image: str) -> Iterator[str]:
    """The local base image with one label of this module's: an image id no other
    test builds on. The classic builder takes, for a step, the newest image made
    by that step on the same parent; two builds that ran the first shared steps
    (the runtime stage's user and folders) at the same time made two such images,
    and a rebuild followed the other build's one and missed its cache (seen once,
    when the module started beside other builds)."""
    tag = "envlock-test/tf-image-base:1"
    build_test_image(
        client,
        fileobj=io.BytesIO(f"FROM {base_image}\nLABEL io.envlock.test.base=tf-image\n".encode()),
        tag=tag,
        rm=True,
    )
    yield tag
    for ref in (TAG, "envlock-test/render-tf2.15-buildarg:latest", TF_TAG, tag):
        remove_image(client, ref)


@pytest.fixture(scope="module")
def built(client: Any, own_base: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    bundle = tmp_path_factory.mktemp("tf215-image")
    for name in ("pylock.toml", "requirements.txt"):
        shutil.copy(CASE / name, bundle / name)
    argv = ["render", str(bundle), "--base-image", own_base, "--python-from", "image"]
    if SYSTEM_CA.is_file():  # the TLS-intercepting proxy of this machine
        argv += ["--ca-cert", str(SYSTEM_CA)]
    assert main(argv) == 0
    start = time.monotonic()
    image, logs = build_test_image(
        client,
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


def test_image_carries_the_lock(built: dict[str, Any], own_base: str) -> None:
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
    assert labels["org.opencontainers.image.base.name"] == own_base
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
    built: dict[str, Any], own_base: str, tmp_path: Path
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
    image, _ = build_test_image(
        built["client"],
        path=str(tmp_path),
        tag="envlock-test/render-tf2.15-buildarg:latest",
        network_mode="host",
        buildargs={"BASE_IMAGE": own_base, "PIP_INDEX_URL": index_url()},
        rm=True,
        forcerm=True,
    )
    labels = image.attrs["Config"]["Labels"]
    assert labels["org.opencontainers.image.base.name"] == own_base
    assert labels["io.envlock.lock.digest"] == built["image"].labels["io.envlock.lock.digest"]
    code, out = run(
        built["client"],
        image.id,
        ["python", "-c", "import tensorflow, sys; print(tensorflow.__version__, sys.prefix)"],
    )
    assert code == 0 and out.split()[-2:] == ["2.15.1", "/opt/venv"], out


# ------------------------------------- envlock build, smoke and verify of the image


@pytest.fixture(scope="module")
def tf_bundle(built: dict[str, Any]) -> Path:
    bundle: Path = built["bundle"]
    return bundle


@pytest.fixture(scope="module")
def tf_image(built: dict[str, Any], tf_bundle: Path) -> dict[str, Any]:
    """`envlock build` of the bundle the module built above: the same Dockerfile,
    context and build arguments on the same base, so every step up to envlock's
    own labels comes from that build's layers."""
    result = build_image(
        tf_bundle,
        tag=TF_TAG,
        build_args={"PIP_INDEX_URL": index_url()},
        network="host",
        progress="quiet",
    )
    installs = [s for s in result.steps if "pip install" in s.instruction]
    assert len(installs) == 1 and installs[0].cached, [
        (s.instruction, s.cached) for s in result.steps
    ]
    return {"id": result.image_id, "build": result}


@pytest.mark.slow
@pytest.mark.network
def test_tf_bundle_image_fails_loudly_without_a_gpu(
    tf_image: dict[str, Any], tf_bundle: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    labels = tf_image["build"].labels
    assert labels["io.envlock.framework.version"] == "2.15.1"
    assert labels["io.envlock.cuda"] == "12.2"
    code, result, err = smoke_json(capsys, TF_TAG)
    got = checks(result)
    assert code == 1
    assert result["status"] == "FAILED"
    assert result["framework"] == "tensorflow"
    assert result["version"] == "2.15.1"
    assert result["build_info"]["cuda"] == "12.2"
    assert result["expected"] == json.loads((tf_bundle / "expect.json").read_text())
    assert got["framework_version"] == ("PASS", "TensorFlow 2.15.1 as locked")
    assert got["build_cuda"] == ("PASS", "built with CUDA 12.2 as locked")
    assert got["gpu_visible"] == ("FAIL", "no GPU visible: TensorFlow runs on the CPU")
    status, reason = got["gpu_request"]
    assert status == "FAIL"
    assert "the NVIDIA container toolkit is missing" in reason
    assert "could not select device driver" in reason
    assert result["image"] == {"ref": TF_TAG, "id": tf_image["id"], "labels": labels}
    assert result["runner"] == {"kind": "docker", "gpus": "all", "network": "none"}
    assert result["host"]["python_executable"] == "/opt/venv/bin/python"
    assert result["host"]["in_container"] is True
    assert result["settings"]["runtime_config"] == "/opt/envlock/runtime.json"
    assert result["benchmark"]["results"][0]["device"] == "cpu"
    assert "Traceback" not in err


@pytest.mark.slow
@pytest.mark.network
def test_tf_bundle_image_with_allow_cpu_warns(
    tf_image: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    code, result, _ = smoke_json(capsys, TF_TAG, "--allow-cpu", "--gpus", "none")
    got = checks(result)
    assert code == 0
    assert result["status"] == "WARNED"
    assert "gpu_request" not in got  # no GPU asked for
    assert got["gpu_visible"] == (
        "WARN",
        "no GPU visible: TensorFlow runs on the CPU (--allow-cpu)",
    )
    bench = result["benchmark"]["results"]
    assert [(r["device"], r["dtype"], r["n"]) for r in bench] == [("cpu", "fp32", 512)]
    assert bench[0]["tflops"] > 0

    code = main(["smoke", TF_TAG, "--allow-cpu"])
    table = capsys.readouterr().out
    assert code == 0
    assert table.splitlines()[0] == f"WARNED: tensorflow 2.15.1 in {TF_TAG}"
    assert "WARN    gpu_request" in table
    assert "matmul 512^3  fp32  cpu" in table


@pytest.mark.slow
@pytest.mark.network
def test_rebuild_of_the_unchanged_bundle_is_fully_cached(
    tf_image: dict[str, Any], tf_bundle: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["build", str(tf_bundle), "--tag", TF_TAG, "--network", "host", "--json"]
    code = main([*argv, "--build-arg", f"PIP_INDEX_URL={index_url()}"])
    again = json.loads(capsys.readouterr().out)
    assert code == 0
    assert again["image_id"] == tf_image["id"]
    cacheable = [s for s in again["steps"] if s["cacheable"]]
    assert len(cacheable) >= 10
    assert all(s["cached"] for s in cacheable), [s for s in cacheable if not s["cached"]]
    assert again["fully_cached"] is True
    assert again["seconds"] <= 5.0


@pytest.mark.slow
@pytest.mark.network
def test_signed_report_of_the_image(
    tf_image: dict[str, Any],
    tf_bundle: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["keygen", "-o", str(tmp_path / "key")]) == 0
    report = tmp_path / "report.intoto.json"
    code = main(
        ["smoke", TF_TAG, "--allow-cpu", "--gpus", "none", "--sign", str(tmp_path / "key.pem")]
        + ["--lock", str(tf_bundle), "-o", str(report)]
    )
    capsys.readouterr()
    assert code == 0
    envelope = json.loads(report.read_text())
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    code = main(
        ["verify", str(report), "--key", str(tmp_path / "key.pub.pem"), "--image", TF_TAG]
        + ["--lock", str(tf_bundle), "--require-pass"]
    )
    assert code == 0, capsys.readouterr()
