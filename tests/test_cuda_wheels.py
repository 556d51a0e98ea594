"""The CUDA of every distribution in a lock (matrices/cuda-wheels.toml and
envlock.lock.gpufacts): a sourced table of real wheels with the facts envlock must
read from each, the one driver floor of a whole lock and who sets it, files two
wheels both install, and the findings for input envlock cannot trust.

WHEELS below was read from the configured package index on 2026-12-05 (METADATA
and the zip central directory by range requests; the filename of each is the one
read). ``test_the_table_is_what_the_index_serves`` reads every wheel again, so
the table cannot drift from the real files. torch 2.11.0+cu130 is a build of
PyTorch's own index, which cannot be reached here: its facts are those of its
installed dist-info on the device machine (docs/gpu-run.md) and PyTorch's
published +cuXYZ naming; it is checked by name and local version only.
"""

from __future__ import annotations

import copy
import hashlib
import json
import zlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from index_support import index_now

from envlock.cli import main
from envlock.errors import DataError, EnvironmentFailure
from envlock.lock import gpufacts
from envlock.lock.pylock import parse_pylock, pylock_text
from envlock.lock.requirements import requirements_text
from envlock.matrix import cudawheels, load_cuda, read_toml
from envlock.matrix.wheel_members import WheelListing, read_listing
from envlock.model import (
    Constraints,
    GpuFacts,
    Lock,
    LockedPackage,
    LockedWheel,
    LockInput,
    PackageCuda,
    Resolution,
)

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "golden" / "cuda-wheels"


@dataclass(frozen=True)
class Wheel:
    """One real wheel and what envlock must read from it."""

    name: str
    version: str
    filename: str  # as the index serves it ("" for the device's torch)
    family: str
    cuda: str | None
    cuda_from: str
    cudnn: str | None = None
    files: tuple[str, ...] = ()  # paths the wheel installs (evidence)
    member: str = ""  # torch/version.py as read
    requires: tuple[str, ...] = ()  # Requires-Dist lines, as read (a prefix of each)
    dependencies: tuple[str, ...] = ()  # what a lock of it holds beside it


VERSION_PY_215 = (
    "from typing import Optional\n\n"
    "__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'rocm', 'xpu']\n"
    "__version__ = '2.15.0+cu132'\ndebug = False\ncuda: Optional[str] = '13.2'\n"
)
VERSION_PY_210 = (
    "from typing import Optional\n\n"
    "__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'rocm', 'xpu']\n"
    "__version__ = '2.10.0+cu128'\ndebug = False\ncuda: Optional[str] = '12.8'\n"
)

WHEELS = (
    Wheel(
        "torch",
        "2.15.0",
        "torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64.whl",
        "torch",
        "13.2",
        "torch/version.py",
        member=VERSION_PY_215,
        requires=(
            "cuda-toolkit[cublas,cudart,cufft,cufile,cupti,cusolver,cusparse,nvjitlink,nvrtc,nvtx]"
            "==13.2.2",
            "nvidia-cudnn-cu13==9.26.0.51",
            "nvidia-nccl-cu13==2.30.7",
        ),
        dependencies=("cuda-toolkit", "nvidia-cudnn-cu13", "nvidia-nccl-cu13"),
    ),
    Wheel(
        "torch",
        "2.10.0",
        "torch-2.10.0-3-cp312-cp312-manylinux_2_28_x86_64.whl",
        "torch",
        "12.8",
        "torch/version.py",
        member=VERSION_PY_210,
        requires=("nvidia-cuda-runtime-cu12==12.8.90", "nvidia-cudnn-cu12==9.10.2.21"),
        dependencies=("nvidia-cuda-runtime-cu12", "nvidia-cudnn-cu12"),
    ),
    Wheel("torch", "2.11.0+cu130", "", "torch", "13.0", "+cu130"),
    Wheel(
        "jax-cuda13-plugin",
        "0.12.1",
        "jax_cuda13_plugin-0.12.1-cp312-cp312-manylinux_2_27_x86_64.whl",
        "jax-plugin",
        "13",
        "its name",
        requires=("jax-cuda13-pjrt==0.12.1", "nvidia-cudnn-cu13<10.0,>=9.12.0.46"),
    ),
    Wheel(
        "jax-cuda12-plugin",
        "0.7.2",
        "jax_cuda12_plugin-0.7.2-cp312-cp312-manylinux_2_27_x86_64.whl",
        "jax-plugin",
        "12",
        "its name",
        requires=("jax-cuda12-pjrt==0.7.2", "nvidia-cudnn-cu12<10.0,>=9.8"),
    ),
    Wheel(
        "cupy-cuda12x",
        "14.0.1",
        "cupy_cuda12x-14.0.1-cp312-cp312-manylinux2014_x86_64.whl",
        "cupy",
        "12",
        "its name",
        requires=("cuda-toolkit[cublas,cudart,cufft,curand,cusolver,cusparse,nvrtc]==12.*",),
    ),
    Wheel(
        "cupy-cuda13x",
        "14.0.1",
        "cupy_cuda13x-14.0.1-cp312-cp312-manylinux2014_x86_64.whl",
        "cupy",
        "13",
        "its name",
        requires=("cuda-toolkit[cublas,cudart,cufft,curand,cusolver,cusparse,nvrtc]==13.*",),
    ),
    Wheel(
        "cudf-cu12",
        "26.2.1",
        "cudf_cu12-26.2.1-cp312-cp312-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl",
        "cuda-suffixed",
        "12",
        "its name",
        requires=("cuda-toolkit[nvcc,nvrtc]==12.*", "rmm-cu12==26.2.*"),
    ),
    Wheel(
        "nvidia-cudnn-cu12",
        "9.10.2.21",
        "nvidia_cudnn_cu12-9.10.2.21-py3-none-manylinux_2_27_x86_64.whl",
        "cudnn",
        "12",
        "its name",
        cudnn="9.10.2.21",
        files=("nvidia/cudnn/lib/libcudnn.so.9",),
    ),
    Wheel(
        "nvidia-cudnn-cu13",
        "9.26.0.51",
        "nvidia_cudnn_cu13-9.26.0.51-py3-none-manylinux_2_27_x86_64.whl",
        "cudnn",
        "13",
        "its name",
        cudnn="9.26.0.51",
        files=("nvidia/cudnn/lib/libcudnn.so.9",),
    ),
    Wheel(
        "nvidia-nccl-cu12",
        "2.27.5",
        "nvidia_nccl_cu12-2.27.5-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
        "nvidia-per-major",
        "12",
        "its name",
        files=("nvidia/nccl/lib/libnccl.so.2",),
    ),
    Wheel(
        "nvidia-nccl-cu13",
        "2.30.7",
        "nvidia_nccl_cu13-2.30.7-py3-none-manylinux_2_18_x86_64.whl",
        "nvidia-per-major",
        "13",
        "its name",
        files=("nvidia/nccl/lib/libnccl.so.2",),
    ),
    Wheel(
        "nvidia-cufft",
        "12.2.0.57",
        "nvidia_cufft-12.2.0.57-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
        "nvidia-cuda13",
        "13",
        "nvidia/cu13/ in the wheel",
        files=("nvidia/cu13/lib/libcufft.so.12",),
    ),
    Wheel(
        "nvidia-cublas",
        "13.4.1.3",
        "nvidia_cublas-13.4.1.3-py3-none-manylinux_2_27_x86_64.whl",
        "nvidia-cuda13",
        "13",
        "nvidia/cu13/ in the wheel",
        files=("nvidia/cu13/lib/libcublas.so.13",),
    ),
    Wheel(
        "nvidia-cuda-runtime",
        "13.2.86",
        "nvidia_cuda_runtime-13.2.86-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
        "cuda-runtime",
        "13.2",
        "its version",
        files=("nvidia/cu13/lib/libcudart.so.13",),
    ),
    Wheel(
        "cuda-toolkit",
        "13.2.2",
        "cuda_toolkit-13.2.2-py2.py3-none-any.whl",
        "cuda-toolkit",
        "13.2",
        "its version",
        requires=("nvidia-cufft==12.2.0.57.*; ", "nvidia-cuda-runtime==13.2.86.*; "),
    ),
)


def _crc(path: str, owner: str) -> tuple[int, int]:
    data = f"{owner}:{path}".encode()
    return zlib.crc32(data), len(data)


def listing_of(w: Wheel, *, member: bool = True) -> WheelListing:
    files = {p: _crc(p, f"{w.name}-{w.version}") for p in w.files}
    members = {}
    if w.member and member:
        files["torch/version.py"] = _crc(w.member, "")
        members["torch/version.py"] = w.member.encode()
    return WheelListing(files, members, 1, 0)


def _wheel(name: str, version: str) -> LockedWheel:
    fn = f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    return LockedWheel(fn, f"http://127.0.0.1:1/{fn}", 1, hashlib.sha256(fn.encode()).hexdigest())


def tf_resolution(cuda_source: str = "system") -> Resolution:
    return Resolution.from_dict(
        {
            "framework": "tensorflow",
            "version": "2.21.0",
            "python": "3.12",
            "python_supported": ["3.10", "3.11", "3.12", "3.13"],
            "cuda": "12.5",
            "cudnn": "9.3",
            "driver_min": "525.60.13",
            "compute_capabilities": ["sm_60", "sm_70", "sm_80", "sm_89", "compute_90"],
            "cuda_source": cuda_source,
            "os": "ubuntu24.04",
            "base_image": "nvidia/cuda:12.6.3-cudnn-runtime-ubuntu24.04",
            "base_image_digest": None,
            "cuda_image_version": "12.6.3",
            "image_cudnn": "9.5.1.17",
            "and_cuda": [],
            "requires_python": ">=3.10",
            "matrix_version": "2026-11-30",
            "matrix_digest": "0" * 64,
            "reasons": ["newest 2.21 release"],
        }
    )


def lock_of(rows: list[tuple[str, str, tuple[str, ...]]], tops: tuple[str, ...]) -> Lock:
    """A lock of (name, version, dependencies) rows, with tensorflow 2.21.0 resolved."""
    packages = tuple(
        sorted(
            (LockedPackage(n, v, (_wheel(n, v),), dependencies=d) for n, v, d in rows),
            key=lambda p: p.name,
        )
    )
    return Lock(
        resolution=tf_resolution(),
        input=LockInput(Constraints(spec="tensorflow==2.21.0"), with_requirements=tops[1:]),
        packages=packages,
        resolver="uv",
        resolver_version="0.13.9",
        top_requirements=tops,
    )


def tf_torch_lock() -> tuple[Lock, dict[str, WheelListing]]:
    """tensorflow 2.21.0 with torch 2.15.0 and the CUDA 13 wheels torch pins (the
    versions of the real lock of 2026-12-05)."""
    rows = [
        ("tensorflow", "2.21.0", ("numpy",)),
        ("numpy", "2.5.5", ()),
        ("torch", "2.15.0", ("cuda-toolkit", "nvidia-cudnn-cu13", "nvidia-nccl-cu13")),
        ("cuda-toolkit", "13.2.2", ("nvidia-cublas", "nvidia-cuda-runtime", "nvidia-cufft")),
        ("nvidia-cublas", "13.4.1.3", ()),
        ("nvidia-cuda-runtime", "13.2.86", ()),
        ("nvidia-cufft", "12.2.0.57", ()),
        ("nvidia-cudnn-cu13", "9.26.0.51", ("nvidia-cublas",)),
        ("nvidia-nccl-cu13", "2.30.7", ()),
    ]
    lock = lock_of(rows, ("tensorflow==2.21.0", "torch==2.15.0"))
    by = {(w.name, w.version): w for w in WHEELS}
    listings = {n: listing_of(by[(n, v)]) for n, v, _ in rows if (n, v) in by}
    return lock, listings


@pytest.fixture(scope="module")
def rules() -> cudawheels.CudaWheels:
    return cudawheels.load()


# -- the table ----------------------------------------------------------------------


def test_the_table_holds_every_kind_the_issue_names() -> None:
    names = {w.name for w in WHEELS}
    assert {
        "torch",
        "jax-cuda12-plugin",
        "jax-cuda13-plugin",
        "cupy-cuda12x",
        "cupy-cuda13x",
    } <= names
    assert {"cudf-cu12", "nvidia-cudnn-cu12", "nvidia-cufft", "cuda-toolkit"} <= names
    assert len({w.version for w in WHEELS if w.name == "torch"}) == 3  # two default builds, +cu130
    assert any(
        w.name == "nvidia-cufft" and w.version.startswith("12.") and w.cuda == "13" for w in WHEELS
    )


@pytest.mark.parametrize("w", WHEELS, ids=lambda w: f"{w.name}-{w.version}")
def test_each_wheel_gives_its_facts(w: Wheel, rules: cudawheels.CudaWheels) -> None:
    family = rules.family_of(w.name)
    assert family is not None and family.id == w.family
    lock = lock_of([(w.name, w.version, ())], ("tensorflow==2.21.0", f"{w.name}=={w.version}"))
    facts = gpufacts.derive(lock, rules, load_cuda(), {w.name: listing_of(w)})
    (mine,) = [p for p in facts.packages if p.name == w.name]
    assert (mine.cuda, mine.cuda_from, mine.cudnn) == (w.cuda, w.cuda_from, w.cudnn)
    major = (w.cuda or "").split(".")[0]
    assert mine.driver_min == {"12": "525.60.13", "13": "580"}[major]
    assert facts.problems == ()


def test_torch_without_its_wheel_read_is_unknown_not_guessed(rules: cudawheels.CudaWheels) -> None:
    lock = lock_of([("torch", "2.15.0", ())], ("tensorflow==2.21.0", "torch==2.15.0"))
    facts = gpufacts.derive(lock, rules, load_cuda(), None)
    (torch,) = [p for p in facts.packages if p.name == "torch"]
    assert (torch.cuda, torch.cuda_from, torch.driver_min) == (None, "unknown", None)
    assert facts.problems == (
        "torch 2.15.0: envlock could not tell which CUDA it needs "
        "(its wheel was not read: --offline)",
    )
    assert facts.driver_min == "525.60.13"  # tensorflow's: nothing else is known


def test_without_the_file_lists_the_cuda13_names_take_cuda_toolkits_major(
    rules: cudawheels.CudaWheels,
) -> None:
    lock, _ = tf_torch_lock()
    facts = gpufacts.derive(lock, rules, load_cuda(), None)
    cufft = next(p for p in facts.packages if p.name == "nvidia-cufft")
    assert (cufft.cuda, cufft.cuda_from) == ("13", "cuda-toolkit 13.2.2 in the lock")
    assert facts.files_read is False


# -- one floor for the whole lock ------------------------------------------------------


def test_tensorflow_with_torch_has_torchs_floor_named_with_torch(
    rules: cudawheels.CudaWheels,
) -> None:
    lock, listings = tf_torch_lock()
    facts = gpufacts.derive(lock, rules, load_cuda(), listings)
    assert facts == GpuFacts(
        packages=(
            PackageCuda(
                "cuda-toolkit",
                "13.2.2",
                "cuda-toolkit",
                "13.2",
                "its version",
                None,
                "580",
                "595.45.04",
            ),
            PackageCuda(
                "nvidia-cublas",
                "13.4.1.3",
                "nvidia-cuda13",
                "13",
                "nvidia/cu13/ in the wheel",
                None,
                "580",
            ),
            PackageCuda(
                "nvidia-cuda-runtime",
                "13.2.86",
                "cuda-runtime",
                "13.2",
                "its version",
                None,
                "580",
                "595.45.04",
            ),
            PackageCuda(
                "nvidia-cudnn-cu13", "9.26.0.51", "cudnn", "13", "its name", "9.26.0.51", "580"
            ),
            PackageCuda(
                "nvidia-cufft",
                "12.2.0.57",
                "nvidia-cuda13",
                "13",
                "nvidia/cu13/ in the wheel",
                None,
                "580",
            ),
            PackageCuda(
                "nvidia-nccl-cu13", "2.30.7", "nvidia-per-major", "13", "its name", None, "580"
            ),
            PackageCuda(
                "tensorflow",
                "2.21.0",
                "tensorflow",
                "12.5",
                "matrices/tensorflow.toml",
                "9.3",
                "525.60.13",
                "555.42.02",
            ),
            PackageCuda(
                "torch", "2.15.0", "torch", "13.2", "torch/version.py", None, "580", "595.45.04"
            ),
        ),
        driver_min="580",
        set_by="torch 2.15.0 (CUDA 13.2, cuda-toolkit 13.2.2)",
        framework_driver_min="525.60.13",
        toolkit_driver="595.45.04",
        toolkit_set_by="torch 2.15.0 (CUDA 13.2, cuda-toolkit 13.2.2)",
        files_read=True,
        problems=(),
        rules_version=rules.data_version,
    )


def test_tensorflow_alone_sets_its_own_floor(rules: cudawheels.CudaWheels) -> None:
    lock = lock_of([("tensorflow", "2.21.0", ())], ("tensorflow==2.21.0",))
    facts = gpufacts.derive(lock, rules, load_cuda(), {})
    assert (facts.driver_min, facts.set_by) == ("525.60.13", "tensorflow 2.21.0 (CUDA 12.5)")


@pytest.mark.parametrize(
    "writer", ["pylock.toml", "requirements.txt", "Dockerfile", "README.md", "expect.json"]
)
def test_the_floor_and_its_package_in_every_file_golden(
    writer: str, rules: cudawheels.CudaWheels
) -> None:
    """The lock's headers, the Dockerfile and the README, compared whole."""
    import os

    from envlock.bundle.folder import bundle_files
    from envlock.render import RenderOptions

    lock, listings = tf_torch_lock()
    lock = replace(lock, gpu=gpufacts.derive(lock, rules, load_cuda(), listings))
    if writer == "pylock.toml":
        text = pylock_text(lock)
    elif writer == "requirements.txt":
        text = requirements_text(lock)
    else:
        text = bundle_files(lock, RenderOptions())[writer].decode()
    if writer == "expect.json":  # the smoke harness tests both frameworks of the lock
        assert json.loads(text)["frameworks"] == ["tensorflow", "torch"]
    else:
        assert "Needs an NVIDIA driver >= 580" in text or ">= 580 (torch 2.15.0" in text
    path = GOLDEN / writer
    if os.environ.get("ENVLOCK_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


def test_the_facts_read_back_as_written(rules: cudawheels.CudaWheels) -> None:
    lock, listings = tf_torch_lock()
    lock = replace(lock, gpu=gpufacts.derive(lock, rules, load_cuda(), listings))
    assert parse_pylock(pylock_text(lock), "pylock.toml").gpu == lock.gpu


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda g: g.update(driver_min=5), "tool.envlock.gpu.driver_min: missing or not a string"),
        (lambda g: g.update(extra="x"), "tool.envlock.gpu.extra: unknown key"),
        (
            lambda g: g.update(files_read="yes"),
            "tool.envlock.gpu.files_read: missing or not true/false",
        ),
        (
            lambda g: g["packages"][0].update(cuda=13),
            "tool.envlock.gpu.packages[0].cuda: not a string",
        ),
        (
            lambda g: g["packages"][0].update(name="../x"),
            "tool.envlock.gpu.packages[0].name: '../x' is not a name",
        ),
        (
            lambda g: g.update(set_by="a\x1bb"),
            "tool.envlock.gpu.set_by: 'a\\x1bb' holds the control character",
        ),
    ],
)
def test_a_damaged_gpu_table_is_refused_naming_the_field(
    edit: Any, problem: str, rules: cudawheels.CudaWheels
) -> None:
    import tomli_w

    from envlock.lock.pylock import pylock_document

    lock, listings = tf_torch_lock()
    lock = replace(lock, gpu=gpufacts.derive(lock, rules, load_cuda(), listings))
    doc = copy.deepcopy(pylock_document(lock))
    edit(doc["tool"]["envlock"]["gpu"])
    with pytest.raises(DataError) as err:
        parse_pylock(tomli_w.dumps(doc), "pylock.toml")
    assert problem in str(err.value)


# -- files two wheels install ------------------------------------------------------------


def test_cudnn_and_nccl_of_cuda_12_and_13_collide(rules: cudawheels.CudaWheels) -> None:
    rows = [
        ("tensorflow", "2.21.0", ("nvidia-cudnn-cu12", "nvidia-nccl-cu12")),
        ("nvidia-cudnn-cu12", "9.10.2.21", ()),
        ("nvidia-nccl-cu12", "2.27.5", ()),
        ("torch", "2.15.0", ("nvidia-cudnn-cu13", "nvidia-nccl-cu13")),
        ("nvidia-cudnn-cu13", "9.26.0.51", ()),
        ("nvidia-nccl-cu13", "2.30.7", ()),
    ]
    lock = lock_of(rows, ("tensorflow[and-cuda]==2.21.0", "torch==2.15.0"))
    by = {(w.name, w.version): w for w in WHEELS}
    listings = {n: listing_of(by[(n, v)]) for n, v, _ in rows if (n, v) in by}
    # the namespace file many NVIDIA wheels carry, the same bytes in each: no collision
    for name in ("nvidia-cudnn-cu12", "nvidia-cudnn-cu13"):
        listings[name].files["nvidia/__init__.py"] = (0, 0)
    found = gpufacts.collisions(lock, listings)
    assert [c.describe() for c in found] == [
        "nvidia-cudnn-cu12 9.10.2.21 and nvidia-cudnn-cu13 9.26.0.51 both install "
        "nvidia/cudnn/lib/libcudnn.so.9",
        "nvidia-nccl-cu12 2.27.5 and nvidia-nccl-cu13 2.30.7 both install "
        "nvidia/nccl/lib/libnccl.so.2",
    ]


# -- input envlock cannot trust -------------------------------------------------------------


def test_an_unknown_cuda_major_is_a_finding_not_a_floor(rules: cudawheels.CudaWheels) -> None:
    lock = lock_of(
        [("tensorflow", "2.21.0", ()), ("cupy-cuda14x", "15.0.0", ())],
        ("tensorflow==2.21.0", "cupy-cuda14x==15.0.0"),
    )
    facts = gpufacts.derive(lock, rules, load_cuda(), {})
    assert facts.problems == (
        "cupy-cuda14x 15.0.0: CUDA 14 (from its name) is not in matrices/cuda.toml: envlock "
        "cannot state the driver it needs",
    )
    assert facts.driver_min == "525.60.13"


def test_a_cu_build_that_disagrees_with_its_pins_is_a_finding(rules: cudawheels.CudaWheels) -> None:
    lock = lock_of(
        [
            ("tensorflow", "2.21.0", ()),
            ("torch", "2.11.0+cu130", ("nvidia-cudnn-cu12",)),
            ("nvidia-cudnn-cu12", "9.10.2.21", ()),
        ],
        ("tensorflow==2.21.0", "torch==2.11.0+cu130"),
    )
    facts = gpufacts.derive(lock, rules, load_cuda(), None)
    assert facts.problems == (
        "torch 2.11.0+cu130: built for CUDA 13.0 (+cu130) but depends on nvidia-cudnn-cu12 (12)",
    )


def test_a_local_version_and_version_py_that_disagree_is_a_finding(
    rules: cudawheels.CudaWheels,
) -> None:
    lock = lock_of([("torch", "2.15.0+cu128", ())], ("tensorflow==2.21.0", "torch==2.15.0+cu128"))
    w = next(w for w in WHEELS if w.version == "2.15.0")
    facts = gpufacts.derive(lock, rules, load_cuda(), {"torch": listing_of(w)})
    assert facts.problems == (
        "torch 2.15.0+cu128: its local version says CUDA 12.8, torch/version.py says 13.2; "
        "envlock counts torch/version.py",
    )


def test_a_wheel_that_is_not_a_zip_is_exit_3_naming_it() -> None:
    junk = b"PK not a zip at all" * 100

    def fetch(start: int, end: int | None) -> tuple[bytes, int]:
        if end is None:
            return junk[start:], len(junk)
        return junk[start : end + 1], len(junk)

    with pytest.raises(EnvironmentFailure) as err:
        read_listing(fetch, "nvidia_cufft-12.2.0.57-py3-none-any.whl")
    assert "nvidia_cufft-12.2.0.57-py3-none-any.whl" in str(err.value)
    assert err.value.exit_code == 3


# -- the rules file ----------------------------------------------------------------------------


def _doc() -> dict[str, Any]:
    doc, _digest, _shown = read_toml(cudawheels.FILENAME)
    return copy.deepcopy(doc)


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (
            lambda d: d["families"][0].update(match="("),
            "families[0].match: not a regular expression",
        ),
        (
            lambda d: d["families"][0].update(match="(?P<x>t)"),
            "the only group a pattern may name is `major`",
        ),
        (
            lambda d: d["families"][0].update(cuda="name"),
            'families[0].cuda: "name" needs a group named `major`',
        ),
        (
            lambda d: d["families"][0].update(member="a.py"),
            'families[0].member: only a cuda = "local" family',
        ),
        (
            lambda d: d["families"][1].update(member="torch/../x.py"),
            "families[1].member: a member path has no .. part",
        ),
        (
            lambda d: d["families"][0].update({"from": ["nope"]}),
            "families[0].from[0]: 'nope' is not a key of [sources]",
        ),
        (
            lambda d: d["families"][1].update(id="tensorflow"),
            'families[1].id: "tensorflow" is listed twice',
        ),
        (lambda d: d["families"][0].update(cuda="guess"), "families[0].cuda: expected one of"),
    ],
)
def test_a_bad_rules_file_is_refused_naming_the_place(edit: Any, problem: str) -> None:
    doc = _doc()
    edit(doc)
    with pytest.raises(DataError) as err:
        cudawheels.parse(doc, "matrices/cuda-wheels.toml")
    assert problem in str(err.value)
    assert str(err.value).startswith("matrices/cuda-wheels.toml: ")


def test_matrix_check_reads_the_rules_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["matrix", "check"]) == 0
    assert "matrices/cuda-wheels.toml" in capsys.readouterr().out


# -- against the real index ------------------------------------------------------------------


@pytest.mark.network
def test_the_table_is_what_the_index_serves() -> None:
    """Every wheel of WHEELS read again: its file, the paths and members it shows,
    the Requires-Dist it states."""
    from envlock.index import http
    from envlock.index.config import index_url
    from envlock.index.pep691 import project_files
    from envlock.matrix.refresh import range_fetcher

    sess = http.session()
    index = index_url()
    for w in WHEELS:
        if not w.filename:
            continue  # PyTorch's own index: not reachable here
        files = {f.filename: f for f in project_files(sess, index, w.name) or []}
        assert w.filename in files, w.filename
        f = files[w.filename]
        dist = w.filename.split("-")[0] + "-" + w.version + ".dist-info/METADATA"
        wanted = (dist, "torch/version.py") if w.member else (dist,)
        got = read_listing(range_fetcher(sess, f.url, index, f.size), f.filename, wanted)
        for path in w.files:
            assert path in got.files, (w.filename, path)
        if w.member:
            assert got.members["torch/version.py"].decode().startswith(w.member)
        metadata = got.members[dist].decode()
        for line in w.requires:
            assert f"Requires-Dist: {line}" in metadata, (w.filename, line)


@pytest.mark.network
def test_tensorflow_with_torch_locks_with_torchs_floor_everywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "tf-torch"
    at = index_now()  # lock and check read the index as of one instant (index_support)
    argv = ["lock", "tensorflow==2.21.0", "--with", "torch==2.15.0", "--exclude-newer", at]
    assert main([*argv, "-o", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    gpu = data["gpu"]
    assert (gpu["driver_min"], gpu["set_by"]) == (
        "580",
        "torch 2.15.0 (CUDA 13.2, cuda-toolkit 13.2.2)",
    )
    assert gpu["problems"] == [] and gpu["files_read"] is True
    line = "Needs an NVIDIA driver >= 580: torch 2.15.0 (CUDA 13.2, cuda-toolkit 13.2.2)"
    assert line in (out / "pylock.toml").read_text()
    assert line in (out / "requirements.txt").read_text()
    assert line.replace(">= 580:", ">= 580 on the host:") in (out / "Dockerfile").read_text()
    assert (
        "| NVIDIA driver on the host | >= 580 (torch 2.15.0 (CUDA 13.2"
        in (out / "README.md").read_text()
    )
    # the base image's NVIDIA_REQUIRE_CUDA admits a driver at the floor
    from envlock.matrix.require import parse_require

    image = next(
        im for im in load_cuda().images if im.version == data["resolution"]["cuda_image_version"]
    )
    require = parse_require(image.require_cuda or f"cuda>={image.cuda}")
    from packaging.version import Version

    from envlock.resolve.floors import driver_cuda_of

    supported = driver_cuda_of(load_cuda(), Version("580.65.06"))
    assert supported is not None and Version(supported) >= Version(require.cuda)
    assert main(["lock", "--check", str(out)]) == 0


@pytest.mark.network
def test_cuda_12_and_13_wheels_that_collide_are_refused_with_ways_out_that_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "both"
    code = main(
        [
            "lock",
            "tensorflow[and-cuda]==2.21.0",
            "--with",
            "torch==2.15.0",
            "--python",
            "3.12",
            "-o",
            str(out),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert (
        "nvidia-cudnn-cu12 " in err
        and "nvidia-cudnn-cu13 9.26.0.51 both install nvidia/cudnn/lib/libcudnn.so.9" in err
    )
    assert "nvidia-nccl-cu12 " in err and "nvidia/nccl/lib/libnccl.so.2" in err
    way = next(line for line in err.splitlines() if "envlock lock " in line)
    command = way.split(": ", 1)[1]
    import shlex

    argv = shlex.split(command)
    assert argv[:2] == ["envlock", "lock"] and argv[-2:] == ["-o", "DIR"]
    fixed = tmp_path / "DIR"
    assert main([*argv[1:-1], str(fixed)]) == 0, capsys.readouterr().err
    assert parse_pylock((fixed / "pylock.toml").read_text(), "pylock.toml").gpu is not None


@pytest.mark.network
def test_the_cuda_part_of_a_colab_image_locks_with_every_frameworks_facts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CUDA-carrying lines of a real Colab image's pip freeze (TensorFlow, JAX's
    CUDA 12 plugin, CuPy, RAPIDS, cuda-toolkit; tests/fixtures/platforms/ says what
    was left out and why): each package's CUDA is listed, and the floor follows
    from all of them."""
    freeze = REPO / "tests" / "fixtures" / "platforms" / "colab-2026-04-24-cuda.txt"
    out = tmp_path / "colab"
    code = main(["capture", "-r", str(freeze), "-o", str(out), "--python", "3.12", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    gpu = data["gpu"]
    facts = {p["name"]: p for p in gpu["packages"]}
    assert facts["tensorflow"]["cuda"] == "12.5"
    assert (facts["jax-cuda12-plugin"]["cuda"], facts["jax-cuda12-plugin"]["cuda_from"]) == (
        "12",
        "its name",
    )
    assert facts["cupy-cuda12x"]["cuda"] == "12" and facts["cudf-cu12"]["cuda"] == "12"
    assert facts["cuda-toolkit"]["cuda"] == "12.8"
    assert facts["nvidia-cudnn-cu12"]["cudnn"] == facts["nvidia-cudnn-cu12"]["version"]
    # every CUDA-carrying distribution of the lock has its CUDA known, none above 12
    locked = {p["name"] for p in data["packages"]}
    rules = cudawheels.load()
    assert {n for n in locked if rules.family_of(n)} == set(facts)
    assert {p["cuda"].split(".")[0] for p in facts.values()} == {"12"}
    assert gpu["driver_min"] == "525.60.13" and gpu["problems"] == []
    assert gpu["set_by"].startswith("tensorflow 2.20.0 (CUDA 12.5")


def test_only_the_wheels_a_fact_or_a_collision_needs_are_read(
    rules: cudawheels.CudaWheels,
) -> None:
    cu12 = [
        ("tensorflow", "2.21.0", ()),
        ("nvidia-cudnn-cu12", "9.10.2.21", ()),
        ("nvidia-nccl-cu12", "2.27.5", ()),
        ("nvidia-cuda-runtime-cu12", "12.5.82", ()),
    ]
    one_major = lock_of(cu12, ("tensorflow[and-cuda]==2.21.0",))
    assert gpufacts.to_read(one_major, rules) == []  # NVIDIA's own set: nothing to read
    lock, _ = tf_torch_lock()  # CUDA 13 only beside a system-CUDA tensorflow
    assert [p.name for p, _f in gpufacts.to_read(lock, rules)] == ["torch"]  # version.py
    mixed = lock_of(
        [*cu12, ("torch", "2.15.0", ()), ("nvidia-cudnn-cu13", "9.26.0.51", ())],
        ("tensorflow[and-cuda]==2.21.0", "torch==2.15.0"),
    )
    assert [p.name for p, _f in gpufacts.to_read(mixed, rules)] == [
        "nvidia-cuda-runtime-cu12",
        "nvidia-cudnn-cu12",
        "nvidia-cudnn-cu13",
        "nvidia-nccl-cu12",
        "torch",
    ]
    no_toolkit = lock_of([("nvidia-cufft", "12.2.0.57", ())], ("nvidia-cufft==12.2.0.57",))
    assert [p.name for p, _f in gpufacts.to_read(no_toolkit, rules)] == ["nvidia-cufft"]


def test_the_floor_names_the_packages_that_carry_cuda_not_those_that_reach_it() -> None:
    """A capture pins every installed distribution as a top requirement: of the GPU
    machine's 195 (docs/gpu-run/issue40-43/lock-43), accelerate and botorch reach
    cuda-toolkit only through torch, and cuda-toolkit itself is torch's; the floor's
    sources are the packages that carry CUDA themselves: torch, CuPy and the JAX plugin
    (the lock there recorded the older reading, 'torch ...; accelerate ...; botorch ...;
    29 more of the requirements')."""
    from envlock.lock import read_lock
    from envlock.lock.gpufacts import _set_by

    lk = read_lock(REPO / "docs/gpu-run/issue40-43/lock-43")
    assert lk.gpu is not None
    at = [f for f in lk.gpu.packages if f.driver_min == lk.gpu.driver_min]
    assert _set_by(lk, lk.gpu.packages, at) == (
        "torch 2.11.0 (CUDA 13.0, cuda-toolkit 13.0.2); cupy-cuda13x 14.2.0 (CUDA 13); "
        "jax-cuda13-plugin 0.11.2 (CUDA 13, jax-cuda13-pjrt 0.11.2)"
    )
    assert "accelerate" in lk.gpu.set_by  # what the machine's lock recorded
