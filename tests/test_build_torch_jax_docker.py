"""torch and JAX locks built into images through the Docker Engine (#43): `envlock
lock torch==2.11` and `envlock lock 'jax[cuda13]==0.11.2'`, `lock --check`,
`envlock build` and `envlock smoke` of each image; `ci lock` and `ci build` of a torch
range.

The real wheels with their nvidia-* closures are gigabytes and no registry or
PyTorch index is reachable here, so a local index serves each framework and its
whole Linux closure as tiny wheels described as the real ones: the METADATA (and
torch/version.py) from the GPU machine that ran them
(tests/fixtures/index/torch_cu130.py and jax_cuda13.py name each source). The base
image is the local test image (Python 3.11) given as --base-image with
--python-from image, as the README's "When no registry can be reached" section
does; JAX 0.11.2 needs Python 3.12, so its base is that image with pyenv's CPython
3.12 copied in (tests/pythons.sh's interpreters). The real frameworks ran on the
GPU machine: docs/gpu-run-40-43.md (`doctor --lock` and `smoke --host --expect` of
a lock of that machine's environment).
"""

from __future__ import annotations

import io
import json
import os
import sys
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from docker_support import (
    build_test_image,
    checks,
    docker_unavailable,
    engine_client,
    remove_image,
    smoke_json,
)
from fixtures.index import jax_cuda13
from fixtures.index.fakeindex import FakeIndex
from fixtures.index.torch_cu130 import CUDA, RECORDED, STANDINS, VERSION, wheels

from envlock.cli import main

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TAG = "envlock-test/torch-2.11:cu130"
JAX_TAG = "envlock-test/jax-0.11.2:cuda13"
PY312_BASE = "envlock-test/bookworm-python3.12:1"

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def index(make_module_index: Callable[..., FakeIndex]) -> FakeIndex:
    idx = make_module_index()
    for wheel in wheels():
        idx.add(wheel)
    return idx


@pytest.fixture(scope="module")
def bundle(index: FakeIndex, base_image: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("torch") / "env"
    argv = ["lock", "torch==2.11", "--python", "3.11", "--base-image", base_image]
    argv += ["--python-from", "image", "--index-url", index.url, "-o", str(out)]
    assert main(argv) == 0
    return out


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    yield from engine_client(900)


def _packages(bundle: Path) -> dict[str, str]:
    doc = tomllib.loads((bundle / "pylock.toml").read_text(encoding="utf-8"))
    return {p["name"]: p["version"] for p in doc["packages"]}


def _build_and_smoke(
    bundle: Path, tag: str, index: FakeIndex, client: Any, capsys: pytest.CaptureFixture[str]
) -> tuple[dict[str, str], int, dict[str, Any]]:
    """`envlock build` of ``bundle`` as ``tag`` from ``index``, checked to hold exactly
    the locked distributions (pip's own besides), then `envlock smoke` of the image:
    its labels, smoke's exit and its document."""
    argv = ["build", str(bundle), "--tag", tag, "--network", "host", "--json"]
    code = main([*argv, "--build-arg", f"PIP_INDEX_URL={index.url}"])
    out, err = capsys.readouterr()
    assert code == 0, err  # what stopped the build: its step and the log's last lines
    labels: dict[str, str] = json.loads(out)["labels"]
    frozen = client.containers.run(
        tag, ["python", "-m", "pip", "freeze", "--all"], remove=True, network_mode="none"
    ).decode()
    installed = dict(line.split("==") for line in frozen.split())
    installed.pop("pip")
    assert installed == _packages(bundle)
    code, doc, _ = smoke_json(capsys, tag, "--allow-cpu", "--gpus", "none")
    return labels, code, doc


def test_the_lock_holds_torch_and_its_whole_closure_and_checks_current(
    bundle: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = {name: version for name, version, _ in RECORDED}
    expected |= {name: version for name, version, _ in STANDINS}
    assert _packages(bundle) == expected
    expect = json.loads((bundle / "expect.json").read_text(encoding="utf-8"))
    # the CUDA of the build from its torch/version.py; the sm targets from the
    # machine's reading of this build (envlock/data/matrices/arch-lists.toml)
    assert (expect["framework"], expect["version"], expect["cuda"]) == ("torch", VERSION, CUDA)
    assert (expect["build"], expect["driver_min"]) == ("cu130", "580")
    assert expect["compute_capabilities"] == [
        "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120",
    ]  # fmt: skip
    capsys.readouterr()
    assert main(["lock", "--check", str(bundle)]) == 0
    assert capsys.readouterr().out.startswith(f"{bundle}: the lock is current (29 packages, torch")


def test_envlock_build_makes_the_image_and_smoke_checks_it_against_the_lock(
    bundle: Path, index: FakeIndex, client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    try:
        labels, code, doc = _build_and_smoke(bundle, TAG, index, client, capsys)
        assert labels["io.envlock.framework"] == "torch"
        assert labels["io.envlock.framework.version"] == VERSION
        assert (labels["io.envlock.cuda"], labels["io.envlock.cuda-source"]) == (CUDA, "pip")
        # the harness in the image checks the build against the lock: the version and
        # the CUDA build PASS; the stand-in torch has no torch.cuda, so the GPU and
        # benchmark checks fail (the real torch ran them on the GPU machine)
        got = checks(doc)
        assert code == 1 and doc["framework"] == "torch"
        assert got["framework_version"] == ("PASS", "PyTorch 2.11.0+cu130 as locked")
        assert got["build_cuda"] == (
            "PASS",
            "built with CUDA 13.0 as locked; the cu130 build as locked (2.11.0+cu130)",
        )
        assert doc["expected"]["lock_digest"] == labels["io.envlock.lock.digest"]
    finally:
        remove_image(client, TAG)


def _pyenv_312() -> Path | None:
    """pyenv's newest CPython 3.12, if installed (as tests/pythons.sh finds its Pythons)."""
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    found = sorted(root.glob("3.12.*"), key=lambda p: [int(x) for x in p.name.split(".")[1:]])
    return found[-1] if found and (found[-1] / "bin" / "python3.12").is_file() else None


@pytest.fixture(scope="module")
def base_312(client: Any, base_image: str) -> Iterator[str]:
    """The local base image with pyenv's CPython 3.12 at its own prefix (its
    libpython is found by that path) and ``python3.12`` on PATH; /root opened so
    the runtime stage's user reaches it. Its test suite, static library, site
    packages and byte code are left out (~60 MB)."""
    prefix = _pyenv_312()
    if prefix is None:
        # a prerequisite of this Docker test: fails instead under ENVLOCK_REQUIRE_DOCKER=1
        docker_unavailable("no CPython 3.12 from pyenv here for the JAX image's base")
    skip = ("/test/", "/config-3.12-", "/site-packages/", "/__pycache__/", "/idlelib/")

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        return None if any(part in f"/{info.name}/" for part in skip) else info

    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        tar.add(prefix, arcname="python", filter=keep)
        dockerfile = (
            f"FROM {base_image}\n"
            f"COPY python {prefix}\n"
            f"RUN chmod 755 /root && ln -s {prefix}/bin/python3.12 /usr/local/bin/python3.12 "
            "&& python3.12 -c 'import ensurepip, ssl, venv'\n"
        ).encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        tar.addfile(info, io.BytesIO(dockerfile))
    raw.seek(0)
    build_test_image(client, fileobj=raw, custom_context=True, tag=PY312_BASE, rm=True)
    try:
        yield PY312_BASE
    finally:
        remove_image(client, PY312_BASE)


@pytest.fixture(scope="module")
def jax_index(make_module_index: Callable[..., FakeIndex]) -> FakeIndex:
    idx = make_module_index()
    for wheel in jax_cuda13.wheels():
        idx.add(wheel)
    return idx


def test_a_jax_lock_builds_into_an_image_that_holds_it(
    jax_index: FakeIndex,
    base_312: str,
    client: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bundle = tmp_path / "env"
    spec = f"jax[cuda13]=={jax_cuda13.VERSION}"
    argv = ["lock", spec, "--python", "3.12", "--base-image", base_312]
    assert (
        main([*argv, "--python-from", "image", "--index-url", jax_index.url, "-o", str(bundle)])
        == 0
    )
    expected = {name: version for name, version, _ in jax_cuda13.RECORDED}
    expected |= {name: version for name, version, _ in jax_cuda13.STANDINS}
    assert _packages(bundle) == expected
    expect = json.loads((bundle / "expect.json").read_text(encoding="utf-8"))
    # the CUDA major the plugin's name carries, as the harness reads it in the image
    assert (expect["framework"], expect["version"], expect["cuda"]) == ("jax", "0.11.2", "13")
    capsys.readouterr()
    assert main(["lock", "--check", str(bundle)]) == 0
    assert capsys.readouterr().out.startswith(f"{bundle}: the lock is current (21 packages, jax")
    try:
        labels, code, doc = _build_and_smoke(bundle, JAX_TAG, jax_index, client, capsys)
        assert (labels["io.envlock.framework"], labels["io.envlock.python"]) == ("jax", "3.12")
        # the harness in the image: JAX's version and its CUDA plugin as locked; the
        # stand-in jax has no devices(), so the GPU and benchmark checks fail
        got = checks(doc)
        assert code == 1 and doc["framework"] == "jax"
        assert got["framework_version"] == ("PASS", "JAX 0.11.2 as locked")
        assert got["build_cuda"] == (
            "PASS",
            "built with CUDA 13 as locked; jax-cuda13-plugin 0.11.2 as locked",
        )
    finally:
        remove_image(client, JAX_TAG)


def test_ci_lock_and_ci_build_take_a_torch_range(
    index: FakeIndex,
    base_image: str,
    client: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`ci lock 'torch>=2.11,<2.12'` makes a cell per CUDA build; only the cu130 one
    is on the configured index (the others are PyTorch's, not given here: named, exit
    1). `ci build` builds that cell and smoke-tests it in the image: the build is ok,
    the stand-in torch fails the smoke test on what only a real torch has."""
    cells = tmp_path / "cells"
    argv = ["ci", "lock", "torch>=2.11,<2.12", "--python", "3.11", "--index-url", index.url]
    argv += ["--base-image", base_image, "--python-from", "image", "-o", str(cells)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    for build in ("cu126", "cu128"):
        assert f"cell torch2.11.0-py3.11-{build} failed: " in err
        assert f"--index pytorch=URL --route '+{build}=pytorch'" in err
    cell = "torch2.11.0-py3.11-cu130"
    assert sorted(p.name for p in cells.iterdir() if (p / "Dockerfile").is_file()) == [cell]
    argv = ["ci", "build", str(cells), "--network", "host", "--allow-cpu", "--json"]
    try:
        assert main([*argv, "--build-arg", f"PIP_INDEX_URL={index.url}"]) == 1
        summary = json.loads(capsys.readouterr().out)
        [done] = summary["cells"]
        assert (done["cell"], done["build"], done["smoke"]) == (cell, "ok", "FAILED")
        assert done["reason"] == (
            "smoke FAILED: build_cudnn: PyTorch build info names no cuDNN, "
            "the lock expects cuDNN 9.19"
        )
        assert summary["failed"] == [cell] and done["digest"] is None  # nothing pushed
    finally:
        remove_image(client, f"envlock-ci:{cell}")
