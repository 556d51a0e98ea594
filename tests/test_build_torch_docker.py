"""A torch lock built into an image through the Docker Engine (#43): `envlock lock
torch==2.11`, `lock --check`, `envlock build` and `envlock smoke` of the image.

torch's real wheels with their nvidia-* closure are about 4 GB and no registry
or PyTorch index is reachable here, so a local index serves torch 2.11.0 and its
whole Linux closure as tiny wheels described as the real ones: every METADATA
and torch/version.py from the GPU machine that ran this torch
(tests/fixtures/index/torch_cu130.py names each source). The base image is the
local test image (Python 3.11) given as --base-image with --python-from image,
as the README's "When no registry can be reached" section does. The real torch
in a real image ran on the GPU machine: docs/gpu-run-40-43.md (`doctor --lock`
and `smoke --host --expect` of a lock of that machine's environment).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from docker_support import checks, engine_client, remove_image, smoke_json
from fixtures.index.fakeindex import FakeIndex
from fixtures.index.torch_cu130 import CUDA, RECORDED, STANDINS, VERSION, wheels

from envlock.cli import main

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TAG = "envlock-test/torch-2.11:cu130"

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
    argv = ["build", str(bundle), "--tag", TAG, "--network", "host", "--json"]
    try:
        code = main([*argv, "--build-arg", f"PIP_INDEX_URL={index.url}"])
        out = capsys.readouterr().out
        assert code == 0, out
        result = json.loads(out)
        labels = result["labels"]
        assert labels["io.envlock.framework"] == "torch"
        assert labels["io.envlock.framework.version"] == VERSION
        assert (labels["io.envlock.cuda"], labels["io.envlock.cuda-source"]) == (CUDA, "pip")
        # the image holds exactly the locked distributions (pip's own besides)
        frozen = client.containers.run(
            TAG, ["python", "-m", "pip", "freeze", "--all"], remove=True, network_mode="none"
        ).decode()
        installed = dict(line.split("==") for line in frozen.split())
        installed.pop("pip")
        assert installed == _packages(bundle)
        # the harness in the image checks the build against the lock: the version and
        # the CUDA build PASS; the stand-in torch has no torch.cuda, so the GPU and
        # benchmark checks fail (the real torch ran them on the GPU machine)
        code, doc, _ = smoke_json(capsys, TAG, "--allow-cpu", "--gpus", "none")
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
