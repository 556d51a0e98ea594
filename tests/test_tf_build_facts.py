"""The build facts of an installed TensorFlow, read at run time by the smoke harness
and doctor's probe (standard library copies) as matrix refresh reads them from a
wheel (envlock.matrix.headers): the 2.22 layout, a CPU build, and agreement."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from test_smoke_harness import BUILD_INFO_2_22, fake_tensorflow_tree, h

from envlock.matrix import headers, refresh
from envlock.matrix.build_info import parse_build_info
from envlock.venv import probe

CONFIG = "include/third_party/gpus/cuda/cuda_config.h"
CUDNN = "include/external/cuda_cudnn/include/cudnn_version.h"


def _clean_tensorflow(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(sys.modules):
        if name == "tensorflow" or name.startswith("tensorflow."):
            monkeypatch.delitem(sys.modules, name)


def test_probe_completes_build_info_and_says_from_where(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_tensorflow_tree(tmp_path, BUILD_INFO_2_22)
    _clean_tensorflow(monkeypatch)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        doc = probe.tensorflow()
    finally:
        _clean_tensorflow(monkeypatch)
    assert doc["imported"] is True and doc["version"] == "2.22.0rc0"
    info = doc["build_info"]
    # what doctor's findings and --libraries-from-build read, now stated
    assert info["cuda_version"] == "12.5.1"
    assert info["cudnn_version"] == "9.10.0"
    assert info["cuda_compute_capabilities"][-1] == "compute_90"
    assert info["is_cuda_build"] is True  # TensorFlow's own keys unchanged
    assert doc["build_info_from"] == {
        "cuda_version": "cuda_config.h",
        "cudnn_version": "cudnn_version.h",
        "cuda_compute_capabilities": "cuda_config.h+inferred-ptx",
    }
    assert probe.sonames(info["cuda_version"], info["cudnn_version"])[-1] == "libcudnn.so.9"


@pytest.mark.parametrize(
    "config",
    [
        '#define TF_CUDA_VERSION "12.5.1"\n#define TF_CUDNN_VERSION "9"\n'
        "#define TF_CUDA_COMPUTE_CAPABILITIES 60, 70, 80, 89, 90\n",
        '#define TF_CUDA_VERSION "11.8"\n#define TF_CUDNN_VERSION "8"\n'
        "#define TF_CUDA_COMPUTE_CAPABILITIES 3.5, 5.2, 7.0\n",
        '#define TF_CUDA_VERSION "12.2"\n#define TF_CUDNN_VERSION "8"\n'
        '#define TF_CUDA_COMPUTE_CAPABILITIES "sm_80", "compute_90"\n',
        '#define TF_CUDA_VERSION ""\n#define TF_CUDNN_VERSION ""\n'
        "#define TF_CUDA_COMPUTE_CAPABILITIES \n",
    ],
)
@pytest.mark.parametrize("with_cudnn_h", [True, False])
def test_the_three_readers_agree(tmp_path: Path, config: str, with_cudnn_h: bool) -> None:
    """The harness, the probe and matrix refresh read the same facts from the same files."""
    cudnn = "#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 10\n#define CUDNN_PATCHLEVEL 0\n"
    for rel, text in ((CONFIG, config), (CUDNN, cudnn if with_cudnn_h else None)):
        if text is not None:
            (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / rel).write_text(text)
    harness = h.header_build_facts(str(tmp_path))
    assert probe.header_build_facts(str(tmp_path)) == harness
    read = headers.read(
        (CONFIG, config.encode()), (CUDNN, cudnn.encode()) if with_cudnn_h else None, "w.whl"
    )
    expected: dict[str, Any] = {}
    if read.cuda_version:
        expected["cuda_version"] = (read.cuda_version, "cuda_config.h")
    if read.cudnn_version:
        expected["cudnn_version"] = (read.cudnn_version, "cudnn_version.h")
    elif read.cudnn_major:
        expected["cudnn_version"] = (read.cudnn_major, "cuda_config.h")
    if read.capabilities:
        names, source = headers.split(read.capabilities)
        expected["cuda_compute_capabilities"] = (list(names), source)
    assert harness == expected


def _remote_members(project: str, filename: str) -> Any:
    from envlock.index import http, pep691
    from envlock.index.config import index_url
    from envlock.matrix.wheel_members import read_members

    index = index_url(None)
    sess = http.session(http.HttpSettings.from_env())
    try:
        files = {f.filename: f for f in pep691.project_files(sess, index, project) or []}
        if filename not in files:
            pytest.skip(f"{filename} is not on the index")
        f = files[filename]
        return read_members(refresh.range_fetcher(sess, f.url, index, f.size), filename)
    finally:
        sess.close()


def _installed_tree(root: Path, members: Any) -> Path:
    """The members a wheel would install, at their paths under ``root``."""
    for path, data in [(members.build_info_path, members.build_info), *members.headers.values()]:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    return root / "tensorflow"


@pytest.mark.network
def test_the_real_2_15_1_cpu_package(tmp_path: Path) -> None:
    """tensorflow-cpu 2.15.1: build_info says is_cuda_build False, its cuda_config.h
    states empty strings: no fact is read, none invented."""
    wheel = "tensorflow_cpu-2.15.1-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
    members = _remote_members("tensorflow-cpu", wheel)
    assert "cuda_config.h" in members.headers
    pkg = _installed_tree(tmp_path, members)
    info = parse_build_info(members.build_info.decode())
    assert info["is_cuda_build"] is False
    for reader in (h, probe):
        assert reader.header_build_facts(str(pkg)) == {}
        assert reader.with_header_facts(info, str(pkg)) == (info, {})


@pytest.mark.network
def test_the_real_2_22_0rc0_package(tmp_path: Path) -> None:
    """tensorflow 2.22.0rc0 as installed: build_info without facts, the headers with them."""
    wheel = "tensorflow-2.22.0rc0-cp313-cp313-manylinux_2_27_x86_64.whl"
    members = _remote_members("tensorflow", wheel)
    pkg = _installed_tree(tmp_path, members)
    info = parse_build_info(members.build_info.decode())
    assert "cuda_version" not in info and info["is_cuda_build"] is True
    for reader in (h, probe):
        completed, sources = reader.with_header_facts(info, str(pkg))
        assert completed["cuda_version"] == "12.5.1"
        assert completed["cudnn_version"] == "9.10.0"
        assert completed["cuda_compute_capabilities"] == [
            "sm_60",
            "sm_70",
            "sm_80",
            "sm_89",
            "compute_90",
        ]
        assert sources["cuda_compute_capabilities"] == "cuda_config.h+inferred-ptx"


def _installed_sonames(env_txt: Path) -> dict[str, set[str]]:
    """{distribution: its .so files}, from the GPU machine's record (gpu-record-40.sh)."""
    out: dict[str, set[str]] = {}
    name = ""
    for line in env_txt.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            name = line.split()[1]
        elif line.strip().startswith("files: [") and name:
            files = line.split("[", 1)[1].rstrip("]").split(", ")
            out[name] = {f.strip("'").rsplit("/", 1)[-1] for f in files if f}
    return out


def test_the_sonames_doctor_loads_for_cuda_13_are_those_the_wheels_install() -> None:
    """Under CUDA 13 cuFFT, cuSOLVER and cuSPARSE keep their own major 12 (the GPU
    machine's torch 2.11.0 closure: docs/gpu-run/issue40-43/env.txt); doctor once looked
    for libcufft.so.11, libcusolver.so.11 and libcusparse.so.13 there and failed a
    working environment."""
    record = Path(__file__).resolve().parents[1] / "docs/gpu-run/issue40-43/env.txt"
    installed = set().union(*_installed_sonames(record).values())
    names = probe.sonames("13.0", "9.19.0")
    assert names == [
        "libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13", "libcufft.so.12",
        "libcusparse.so.12", "libcusolver.so.12", "libcurand.so.10", "libcudnn.so.9",
    ]  # fmt: skip
    assert [n for n in names if n not in installed] == []
    # a CUDA major envlock has not read: the libraries named by their own majors are
    # not guessed
    assert probe.sonames("14.0", "10.1") == [
        "libcudart.so.14", "libcublas.so.14", "libcublasLt.so.14", "libcudnn.so.10",
    ]  # fmt: skip
