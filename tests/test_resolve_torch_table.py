"""Issue 43: what ``resolve torch==X --gpu G --driver D`` answers, as a table.

Three torch series x three GPUs x two drivers, each answer with the facts it
rests on and their source: ``read-index`` (the wheel on the configured index:
torch/version.py and Requires-Dist, as matrices/torch.toml records them) or
``pytorch-release-matrix`` (PyTorch's published compatibility matrix, for the
builds on PyTorch's own index). Driver 535.104.05 supports CUDA 12.2, so a
CUDA 13 build (driver >= 580, matrices/cuda.toml) is out and torch 2.11 falls
back to its cu128 build, which only PyTorch's index has; 580.65.06 takes the
default index's build of every series. The GPU does not change the build: the
torch wheels do not say which sm targets they carry, so no GPU is ruled out on
a guess (kernels and PTX JIT verdicts ``unknown``), except the one build whose
targets were read on a GPU machine (``gpu-machine-2026-12-06`` in
matrices/arch-lists.toml: torch 2.11.0's CUDA 13.0 build, sm_75 ... sm_120), where
each of these GPUs has SASS (T4 sm_75, H100 sm_90, RTX 4090 8.9 by sm_86's binary
compatibility within major 8); and the base image is the one whose container
runtime starts on the named GPU where there is one.
"""

from __future__ import annotations

import pytest

from envlock.matrix import builds
from envlock.model import Constraints, Gpu
from envlock.resolve import load_matrix, resolve
from envlock.resolve.paths import for_resolution

OLD, NEW = "535.104.05", "580.65.06"
F12 = "525.60.13"  # any CUDA 12.x (cuda.toml's minor-version compatibility floor)
DNN_9_10 = "nvidia-cudnn-cu12==9.10.2.21"
DNN_9_17 = "nvidia-cudnn-cu12==9.17.1.4"
DNN_9_19 = "nvidia-cudnn-cu13==9.19.0.56"
I128_0, I128_1, I130_1 = (
    "12.8.0-base-ubuntu24.04",
    "12.8.1-base-ubuntu24.04",
    "13.0.1-base-ubuntu24.04",
)
READ, PUB, GPU = "read-index", "pytorch-release-matrix", "gpu-machine-2026-12-06"

# (series, gpu, driver) -> (version, cuda, driver floor, cudnn pin, base image, sources)
TABLE = {
    ("2.9", "T4", OLD): ("2.9.1", "12.8", F12, DNN_9_10, I128_0, READ),
    ("2.9", "T4", NEW): ("2.9.1", "12.8", F12, DNN_9_10, I128_1, READ),
    ("2.9", "H100", OLD): ("2.9.1", "12.8", F12, DNN_9_10, I128_0, READ),
    ("2.9", "H100", NEW): ("2.9.1", "12.8", F12, DNN_9_10, I128_1, READ),
    ("2.9", "RTX 4090", OLD): ("2.9.1", "12.8", F12, DNN_9_10, I128_1, READ),
    ("2.9", "RTX 4090", NEW): ("2.9.1", "12.8", F12, DNN_9_10, I128_1, READ),
    ("2.10", "T4", OLD): ("2.10.0", "12.8", F12, DNN_9_10, I128_0, READ),
    ("2.10", "T4", NEW): ("2.10.0", "12.8", F12, DNN_9_10, I128_1, READ),
    ("2.10", "H100", OLD): ("2.10.0", "12.8", F12, DNN_9_10, I128_0, READ),
    ("2.10", "H100", NEW): ("2.10.0", "12.8", F12, DNN_9_10, I128_1, READ),
    ("2.10", "RTX 4090", OLD): ("2.10.0", "12.8", F12, DNN_9_10, I128_1, READ),
    ("2.10", "RTX 4090", NEW): ("2.10.0", "12.8", F12, DNN_9_10, I128_1, READ),
    ("2.11", "T4", OLD): ("2.11.0+cu128", "12.8", F12, DNN_9_17, I128_0, PUB),
    ("2.11", "T4", NEW): ("2.11.0", "13.0", "580", DNN_9_19, I130_1, READ, GPU),
    ("2.11", "H100", OLD): ("2.11.0+cu128", "12.8", F12, DNN_9_17, I128_0, PUB),
    ("2.11", "H100", NEW): ("2.11.0", "13.0", "580", DNN_9_19, I130_1, READ, GPU),
    ("2.11", "RTX 4090", OLD): ("2.11.0+cu128", "12.8", F12, DNN_9_17, I128_1, PUB),
    ("2.11", "RTX 4090", NEW): ("2.11.0", "13.0", "580", DNN_9_19, I130_1, READ, GPU),
}  # fmt: skip


@pytest.mark.parametrize(("series", "gpu", "driver"), sorted(TABLE))
def test_torch_answer(series: str, gpu: str, driver: str) -> None:
    version, cuda, floor, cudnn, image, *sources = TABLE[(series, gpu, driver)]
    source = sources[0]
    constraints = Constraints(spec=f"torch=={series}", gpus=(Gpu(gpu),), driver=driver)
    res = resolve(constraints)
    assert (res.framework, res.version, res.cuda, res.driver_min) == ("torch", version, cuda, floor)
    assert res.cuda_source == "pip"
    assert res.base_image == f"nvidia/cuda:{image}"
    assert cudnn in res.and_cuda
    # the facts are the matrix row's, and the answer names that row's source
    build = "cu" + cuda.replace(".", "")
    row = next(
        b
        for b in builds.load("torch").builds
        if str(b.version) == version.split("+")[0] and b.build == build
    )
    assert row.sources == tuple(sources)
    assert all(builds.load("torch").source_text(key) for key in sources)
    assert cudnn == f"nvidia-cudnn-cu{cuda.split('.')[0]}=={row.cudnn_full}"
    assert any(f"source {source}" in why for why in res.reasons)
    if row.index == "pytorch":
        assert any(
            f"torch=={version}" in why and "PyTorch's own index" in why for why in res.reasons
        )
    # no compute-capability guess: kernels and PTX JIT unknown unless the build's
    # targets were read (on a GPU machine), cuDNN judged
    (paths,) = for_resolution(res, constraints, load_matrix())
    if GPU in sources:
        assert row.compute_capabilities_from == "gpu-machine"
        assert (paths.status("kernels"), paths.status("ptx-jit")) == ("works", "unused")
    else:
        assert row.compute_capabilities == ()
        assert (paths.status("kernels"), paths.status("ptx-jit")) == ("unknown", "unknown")
    assert paths.status("cudnn") == "works"


def test_a_cuda13_build_is_left_out_for_a_cuda12_driver_with_the_reason() -> None:
    res = resolve(Constraints(spec="torch==2.11", driver=OLD))
    assert (
        "preferred torch 2.11.0+cu130 excluded by --driver 535.104.05: CUDA 13.x builds need "
        "driver >= 580"
    ) in res.reasons


def test_jax_cuda12_and_cuda13_follow_the_driver() -> None:
    assert resolve(Constraints(spec="jax[cuda]", driver=OLD)).cuda.startswith("12.")
    assert resolve(Constraints(spec="jax[cuda]", driver=NEW)).cuda.startswith("13.")
