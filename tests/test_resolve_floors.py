"""Issue 14: GPUs by their usual names, --gpu auto, and driver floors that hold
(PTX JIT needs the toolkit's driver; the image's NVIDIA_REQUIRE_CUDA decides
whether the container starts), said once for the why lines and the warnings."""

from __future__ import annotations

import argparse
from dataclasses import replace

import pytest

from envlock.cli import main
from envlock.commands.resolve import add_resolve_arguments, constraints_from_args
from envlock.driver import HostGpu, HostInfo, detect
from envlock.errors import EnvironmentFailure, UsageError
from envlock.matrix import Matrix, load
from envlock.matrix.require import MARKET_BRANDS, parse_require
from envlock.model import Resolution
from envlock.resolve import Constraints, Gpu, resolve

MISSING_NVML = "libnvidia-ml-missing-for-envlock-tests.so.1"


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    return load()


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_resolve_arguments(parser)
    return parser.parse_args(list(argv))


def _gpus(*names: str) -> tuple[Gpu, ...]:
    return tuple(Gpu(name=n) for n in names)


# ---------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("value", "capability"),
    [("A100", "8.0"), ("a10g", "8.6"), ("T4", "7.5"), ("H100", "9.0"), ("RTX 4090", "8.9")],
)
def test_short_names_give_a_compute_capability(matrix: Matrix, value: str, capability: str) -> None:
    res = resolve(constraints_from_args(_args("tensorflow==2.15", "--gpu", value)), matrix)
    assert not any("compute capability unknown" in w for w in res.warnings)
    jit = [w for w in res.warnings if "JIT-compiled" in w]
    # 2.15 compiles up to sm_75 and compute_80 PTX: a T4 has kernels, the others JIT
    if capability == "7.5":
        assert jit == []
    else:
        assert jit and f"(compute capability {capability})" in jit[0]


@pytest.mark.parametrize(
    ("value", "capability"),
    [
        ("8.0", "8.0"),
        ("sm_80", "8.0"),
        ("compute_90", "9.0"),
        ("sm_90a", "9.0"),
        ("sm_100", "10.0"),
    ],
)
def test_capabilities_in_every_spelling(value: str, capability: str) -> None:
    c = constraints_from_args(_args("tensorflow", "--gpu", value))
    assert c.gpus == (Gpu(name="", compute_capability=capability),)


def test_an_unknown_name_exits_2_with_the_nearest_names(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["resolve", "tensorflow==2.15", "--gpu", "A1000"]) == 2
    err = capsys.readouterr().err
    assert "--gpu 'A1000' is not a GPU envlock knows (matrices/gpus.toml)" in err
    assert "did you mean A100 or A10 or V100?" in err


def test_auto_is_the_host_not_a_name() -> None:
    host = HostInfo("550.54.15", "12.4", (HostGpu("NVIDIA H200", "9.0"),), "NVML")
    c = constraints_from_args(_args("tensorflow", "--gpu", "auto"), detect=lambda: host)
    assert c.gpus == (Gpu(name="NVIDIA H200", compute_capability="9.0"),)
    assert c.driver is None  # --gpu auto reads the GPUs only


def test_auto_without_a_driver_is_exit_2_as_driver_auto_and_a_driver_without_gpus_3() -> None:
    """No driver at all: the same cause and exit code for --gpu auto as for --driver
    auto (2, with the hint to name the GPU; #42 asked for one code per cause, it was
    3 here and 2 there); a driver that lists no GPU is a broken environment (3)."""
    with pytest.raises(UsageError) as err:
        constraints_from_args(
            _args("tensorflow", "--gpu", "auto"),
            detect=lambda: detect(MISSING_NVML, ""),  # no NVML, no nvidia-smi
        )
    assert err.value.exit_code == 2
    assert err.value.message.startswith("--gpu auto: no NVIDIA driver found")
    assert err.value.hint == "name the GPU instead, e.g. --gpu A100 or --gpu 8.0"
    empty = HostInfo("550.54.15", "12.4", (), "NVML")
    with pytest.raises(EnvironmentFailure, match="the NVIDIA driver lists no GPU"):
        constraints_from_args(_args("tensorflow", "--gpu", "auto"), detect=lambda: empty)


def test_auto_on_a_machine_without_nvml_or_nvidia_smi(capsys: pytest.CaptureFixture[str]) -> None:
    # this machine has no NVIDIA driver: a message, no traceback, and the exit code
    # --driver auto gives for the same cause (2: #42, "same cause, same exit code")
    import shutil

    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has nvidia-smi")
    assert main(["resolve", "tensorflow", "--gpu", "auto"]) == 2
    err = capsys.readouterr().err
    assert "--gpu auto: no NVIDIA driver found" in err and "Traceback" not in err
    assert main(["resolve", "tensorflow", "--driver", "auto"]) == 2
    err = capsys.readouterr().err
    assert "--driver auto: no NVIDIA driver found" in err and "Traceback" not in err


# ---------------------------------------------------------------- the PTX JIT floor


def test_ptx_jit_raises_the_host_floor_to_the_toolkit_driver(matrix: Matrix) -> None:
    res = resolve(Constraints(spec="tensorflow==2.15", gpus=_gpus("H100")), matrix)
    assert res.driver_min == "535.54.03"  # CUDA 12.2's toolkit, not 525.60.13
    assert any(
        r.startswith("driver >= 535.54.03 for H100 (9.0): no compiled kernels for it")
        and "minor-version compatibility does not cover PTX JIT" in r
        for r in res.reasons
    )
    # a GPU with compiled kernels keeps the minor-version floor
    res = resolve(Constraints(spec="tensorflow==2.15", gpus=_gpus("T4")), matrix)
    assert res.driver_min == "525.60.13"
    # 2.18 compiles sm_89: an L4 needs no JIT there; an H100 does (compute_90 PTX, CUDA 12.5)
    assert resolve(Constraints(spec="tensorflow==2.18", gpus=_gpus("L4")), matrix).driver_min == (
        "525.60.13"
    )
    res = resolve(Constraints(spec="tensorflow==2.18", gpus=_gpus("H100")), matrix)
    assert res.driver_min == "555.42.02"


def test_without_gpu_resolve_says_which_gpus_jit(matrix: Matrix) -> None:
    res = resolve(Constraints(spec="tensorflow==2.15"), matrix)
    assert any(
        r.startswith(
            "GPUs without compiled kernels in tensorflow 2.15.1 (compute capability 8.0 "
            "and up, e.g. A100,"
        )
        and "need driver >= 535.54.03" in r
        for r in res.reasons
    )
    res = resolve(Constraints(spec="tensorflow==2.18"), matrix)
    assert any("(compute capability 9.0 and up, e.g. H200, H100" in r for r in res.reasons)


# ---------------------------------------------------------------- the image's requirement


def _verdict(res: Resolution) -> str:
    return next(r for r in res.reasons if r.startswith("driver 535.104.05, which supports"))


def test_tf218_on_535_depends_on_the_gpu(matrix: Matrix) -> None:
    """The issue's case: one consistent answer per GPU, no 'new enough' then a warning.
    (The base image's CUDA, asked for: with GPUs named and no source asked, resolve
    takes the placement on which every path works, test_gpu_paths.py.)"""
    base = Constraints(spec="tensorflow==2.18", driver="535.104.05", cuda_source="system")
    dc = resolve(replace(base, gpus=_gpus("A100")), matrix)
    gf = resolve(replace(base, gpus=_gpus("RTX 4090")), matrix)
    assert dc.base_image == gf.base_image == "nvidia/cuda:12.6.3-cudnn-runtime-ubuntu24.04"
    assert _verdict(dc) == (
        "driver 535.104.05, which supports CUDA 12.2: host venv: runs; container on A100 "
        "(8.0), data-center: starts (branch 535 is excepted)"
    )
    assert not any("535.104.05" in w for w in dc.warnings)
    assert _verdict(gf) == (
        "driver 535.104.05, which supports CUDA 12.2: host venv: runs; container on RTX 4090 "
        "(8.9), GeForce: refused by the container runtime (needs CUDA 12.6, driver >= 560.28.03)"
    )
    (warning,) = [w for w in gf.warnings if "535.104.05" in w]
    assert warning.startswith(
        "driver 535.104.05, which supports CUDA 12.2: container on RTX 4090 (8.9), GeForce: "
        "refused by the container runtime"
    )
    assert "ways out: a driver >= 560.28.03; or the host venv" in warning
    assert "NVIDIA_DISABLE_REQUIRE=1" in warning
    # no GPU named: both answers, and the warning names the GeForce case only
    both = resolve(base, matrix)
    assert "container on a data-center GPU: starts (branch 535 is excepted)" in _verdict(both)
    assert "container on a GeForce GPU: refused" in _verdict(both)
    assert not any("new enough" in r for r in both.reasons)


def test_hopper_on_535_runs_in_the_container_only(matrix: Matrix) -> None:
    res = resolve(
        Constraints(
            spec="tensorflow==2.18", driver="535.104.05", gpus=_gpus("H100"), cuda_source="system"
        ),
        matrix,
    )
    verdict = _verdict(res)
    assert "host venv: too old for the PTX JIT of H100 (9.0) (needs >= 555.42.02)" in verdict
    assert "forward-compatibility libraries JIT-compile the PTX (branch 535 is excepted)" in verdict
    (warning,) = [w for w in res.warnings if "535.104.05" in w]
    assert "or the container nvidia/cuda:12.6.3-cudnn-runtime-ubuntu24.04" in warning
    assert "NVIDIA_DISABLE_REQUIRE" not in warning  # it would not help the JIT


def test_why_lines_and_warnings_agree(matrix: Matrix) -> None:
    for gpus in ((), _gpus("A100"), _gpus("RTX 4090"), _gpus("H100"), _gpus("T4", "RTX 3090")):
        for driver in ("535.104.05", "550.54.15", "560.35.05", "580.65.06"):
            res = resolve(Constraints(spec="tensorflow==2.18", driver=driver, gpus=gpus), matrix)
            why = next(r for r in res.reasons if r.startswith(f"driver {driver}, which"))
            warned = [w for w in res.warnings if w.startswith(f"driver {driver}, which")]
            refused = "refused" in why or "too old" in why or "needs driver" in why
            assert bool(warned) == refused, (gpus, driver, why, warned)
            for w in warned:  # each problem warned about is the one the why line states
                for problem in w.split(": ", 1)[1].split("; ways out")[0].split("; "):
                    assert problem in why


def test_an_image_that_starts_is_preferred(matrix: Matrix) -> None:
    """With --driver and --gpu, an image whose NVIDIA_REQUIRE_CUDA admits the host wins
    over a newer patch that the runtime would refuse."""
    assert matrix.cuda is not None
    relaxed = "cuda>=12.6 brand=geforce,driver>=535,driver<536"
    images = tuple(
        replace(im, require_cuda=relaxed, require_cuda_from="require-12-6-3")
        if im.version == "12.6.2"
        else im
        for im in matrix.cuda.images
    )
    m = replace(matrix, cuda=replace(matrix.cuda, images=images))
    system = "system"  # the base image's CUDA, where the image's own check applies
    plain = resolve(
        Constraints(spec="tensorflow==2.18", gpus=_gpus("RTX 4090"), cuda_source=system), m
    )
    assert plain.cuda_image_version == "12.6.3"
    there = resolve(
        Constraints(
            spec="tensorflow==2.18",
            driver="535.104.05",
            gpus=_gpus("RTX 4090"),
            cuda_source=system,
        ),
        m,
    )
    assert there.cuda_image_version == "12.6.2"
    assert "GeForce: starts (branch 535 is excepted)" in _verdict(there)
    assert not any("535.104.05" in w for w in there.warnings)


def test_require_strings_evaluate_like_the_container_toolkit() -> None:
    from packaging.version import Version

    require = parse_require("cuda>=12.6 brand=tesla,driver>=535,driver<536")
    dc, gf = MARKET_BRANDS["datacenter"], MARKET_BRANDS["geforce"]
    assert require.admits(Version("560.28.03"), Version("12.6"), gf)
    assert require.admits(Version("535.104.05"), Version("12.2"), dc)
    assert not require.admits(Version("535.104.05"), Version("12.2"), gf)
    assert not require.admits(Version("550.54.15"), Version("12.4"), dc)
    assert require.branches(dc) == (535,)
    with pytest.raises(ValueError, match="is not a condition"):
        parse_require("cuda>=12.6 brand")
