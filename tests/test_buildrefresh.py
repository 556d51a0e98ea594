"""envlock.matrix.buildrefresh: a torch or JAX row from what a wheel states (issue 43).

The METADATA and torch/version.py below are copied from the real wheels on the
package index (torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl,
torch-2.9.0-cp310-cp310-manylinux_2_28_x86_64.whl,
jax_cuda13_plugin-0.11.2-cp312-cp312-manylinux_2_27_x86_64.whl, read by range
requests on 2026-12-05), cut to the lines the rows read; the network test
(tests/test_lock_torch_jax_network.py) reads the real ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from packaging.version import Version

from envlock.errors import DataError
from envlock.index.pep691 import IndexFile
from envlock.matrix import buildrefresh


@dataclass
class Listing:
    members: dict[str, bytes] = field(default_factory=dict)


def _file(name: str) -> IndexFile:
    return IndexFile(
        name, f"https://files.example/{name}", "ab" * 32, 1, "2026-03-18T17:00:00Z", False
    )


TORCH_2_11 = b"""Metadata-Version: 2.4
Name: torch
Version: 2.11.0
Requires-Python: >=3.10
Requires-Dist: filelock
Requires-Dist: cuda-toolkit[cublas,cudart,cufft,cufile,cupti,curand,cusolver,cusparse,nvjitlink,nvrtc,nvtx]==13.0.2; platform_system == "Linux"
Requires-Dist: cuda-bindings<14,>=13.0.3; platform_system == "Linux"
Requires-Dist: nvidia-cudnn-cu13==9.19.0.56; platform_system == "Linux"
Requires-Dist: nvidia-nccl-cu13==2.28.9; platform_system == "Linux"
Requires-Dist: triton==3.6.0; platform_system == "Linux"
Requires-Dist: optree>=0.13.0; extra == "optree"
"""  # noqa: E501
VERSION_PY_2_11 = b"""__version__ = '2.11.0+cu130'
debug = False
cuda: Optional[str] = '13.0'
"""
TORCH_2_9 = b"""Metadata-Version: 2.4
Name: torch
Version: 2.9.0
Requires-Python: >=3.10
Requires-Dist: nvidia-cuda-runtime-cu12==12.8.90; platform_system == "Linux" and platform_machine == "x86_64"
Requires-Dist: nvidia-cudnn-cu12==9.10.2.21; platform_system == "Linux" and platform_machine == "x86_64"
Requires-Dist: nvidia-nccl-cu12==2.27.5; platform_system == "Linux" and platform_machine == "x86_64"
"""  # noqa: E501
JAX_13 = b"""Metadata-Version: 2.1
Name: jax-cuda13-plugin
Version: 0.11.2
Requires-Python: >=3.12
Requires-Dist: jax-cuda13-pjrt==0.11.2
Requires-Dist: nvidia-cuda-runtime>=13.0.48; sys_platform == "linux" and extra == "with-cuda"
Requires-Dist: nvidia-cudnn-cu13<10.0,>=9.12.0.46; sys_platform == "linux" and extra == "with-cuda"
Requires-Dist: nvidia-nccl-cu13>=2.27.7; sys_platform == "linux" and extra == "with-cuda"
"""


def test_torch_2_11_row_from_its_version_py_and_pins() -> None:
    files = [_file(f"torch-2.11.0-cp3{m}-cp3{m}-manylinux_2_28_x86_64.whl") for m in (10, 12)]
    listing = Listing(
        {
            "torch-2.11.0.dist-info/METADATA": TORCH_2_11,
            "torch/version.py": VERSION_PY_2_11,
        }
    )
    row = buildrefresh.torch_row(Version("2.11.0"), files, listing)
    assert not isinstance(row, str)
    assert (row.build, row.cuda, row.cuda_full, row.cudnn, row.cudnn_full, row.nccl) == (
        "cu130",
        "13.0",
        "13.0.2",
        "9.19",
        "9.19.0.56",
        "2.28.9",
    )
    assert row.python == ("3.10", "3.12")
    assert row.wheel == "torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl"  # newest Python
    # the CUDA requirements, markers stripped; triton, filelock and extras are not CUDA
    assert row.requires == (
        "cuda-toolkit[cublas,cudart,cufft,cufile,cupti,curand,cusolver,cusparse,nvjitlink,nvrtc,nvtx]==13.0.2",
        "cuda-bindings<14,>=13.0.3",
        "nvidia-cudnn-cu13==9.19.0.56",
        "nvidia-nccl-cu13==2.28.9",
    )
    assert row.compute_capabilities == () and row.compute_capabilities_from == "unknown"


def test_a_runtime_pin_is_a_library_version_so_cuda_full_is_version_py_s() -> None:
    files = [_file("torch-2.9.0-cp312-cp312-manylinux_2_28_x86_64.whl")]
    listing = Listing(
        {
            "torch-2.9.0.dist-info/METADATA": TORCH_2_9,
            "torch/version.py": b"cuda: Optional[str] = '12.8'\n",
        }
    )
    row = buildrefresh.torch_row(Version("2.9.0"), files, listing)
    assert not isinstance(row, str)
    assert (row.build, row.cuda_full) == ("cu128", "12.8")
    assert "the runtime pin is 12.8.90, a library version" in row.note


def test_a_cpu_build_has_no_row_and_says_why() -> None:
    files = [_file("torch-2.9.0-cp312-cp312-manylinux_2_28_x86_64.whl")]
    listing = Listing(
        {
            "torch-2.9.0.dist-info/METADATA": TORCH_2_9,
            "torch/version.py": b"cuda: Optional[str] = None\n",
        }
    )
    assert buildrefresh.torch_row(Version("2.9.0"), files, listing) == (
        "torch 2.9.0: torch/version.py states no CUDA (a CPU build)"
    )


def test_a_wheel_without_metadata_is_refused_naming_it() -> None:
    files = [_file("torch-2.9.0-cp312-cp312-manylinux_2_28_x86_64.whl")]
    with pytest.raises(DataError) as e:
        buildrefresh.torch_row(Version("2.9.0"), files, Listing())
    assert e.value.message == (
        "torch-2.9.0-cp312-cp312-manylinux_2_28_x86_64.whl: no "
        "torch-2.9.0.dist-info/METADATA in the wheel"
    )


def test_jax_row_takes_the_with_cuda_floors() -> None:
    files = [_file("jax_cuda13_plugin-0.11.2-cp312-cp312-manylinux_2_27_x86_64.whl")]
    listing = Listing({"jax_cuda13_plugin-0.11.2.dist-info/METADATA": JAX_13})
    row = buildrefresh.jax_row("13", Version("0.11.2"), files, listing)
    assert not isinstance(row, str)
    assert (row.build, row.cuda, row.cuda_from, row.cudnn_full, row.nccl) == (
        "cuda13",
        "13.0",
        "with-cuda-minimum",
        "9.12.0.46",
        "2.27.7",
    )
    assert row.requires[0] == "jax-cuda13-pjrt==0.11.2"


def test_a_with_cuda_extra_of_the_wrong_major_is_refused() -> None:
    files = [_file("jax_cuda12_plugin-0.11.2-cp312-cp312-manylinux_2_27_x86_64.whl")]
    meta = JAX_13.replace(b"Name: jax-cuda13-plugin", b"Name: jax-cuda12-plugin")
    listing = Listing({"jax_cuda12_plugin-0.11.2.dist-info/METADATA": meta})
    with pytest.raises(DataError) as e:
        buildrefresh.jax_row("12", Version("0.11.2"), files, listing)
    assert "asks for CUDA 13.0.48, not CUDA 12" in e.value.message
