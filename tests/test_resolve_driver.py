"""Host driver detection for `--driver auto`: NVML, else nvidia-smi.

This machine has no NVIDIA driver, so both paths are exercised with stand-ins:
small executables that print what nvidia-smi prints, and a C library built
here that answers the NVML calls envlock makes. The real driver is checked by
the gpu-marked test on a GPU host (NVML and nvidia-smi must agree).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
from pathlib import Path

import pytest

from envlock.commands.resolve import add_resolve_arguments, constraints_from_args
from envlock.driver import NVML_BRANDS, HostGpu, HostInfo, detect, parse_smi
from envlock.errors import EnvironmentFailure, UsageError
from envlock.matrix import load
from envlock.resolve import resolve

MISSING_NVML = "/nonexistent/libnvidia-ml.so.1"


def _smi(tmp_path: Path, body: str) -> str:
    path = tmp_path / "nvidia-smi"
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(0o755)
    return str(path)


def test_parse_smi_lines() -> None:
    text = "550.54.15, NVIDIA H200, 9.0\n550.54.15, NVIDIA H200, 9.0\n"
    assert parse_smi(text) == (
        "550.54.15",
        (HostGpu("NVIDIA H200", "9.0"), HostGpu("NVIDIA H200", "9.0")),
    )
    assert parse_smi("470.82.01, Tesla T4\n") == ("470.82.01", (HostGpu("Tesla T4", None),))
    assert parse_smi("535.104.05, Tesla V100-SXM2-16GB, [N/A]\n")[1][0].compute_capability is None
    with pytest.raises(EnvironmentFailure, match="unexpected line"):
        parse_smi("NVIDIA-SMI has failed because it couldn't communicate with the driver\n")
    with pytest.raises(EnvironmentFailure, match="listed no GPU"):
        parse_smi("\n")


def test_nvidia_smi_when_nvml_does_not_load(tmp_path: Path) -> None:
    smi = _smi(
        tmp_path,
        'case "$1" in --query-gpu=driver_version,name,compute_cap) '
        'echo "535.104.05, NVIDIA A100-SXM4-80GB, 8.0";; *) exit 2;; esac\n',
    )
    info = detect(library=MISSING_NVML, smi=smi)
    assert info == HostInfo(
        driver="535.104.05",
        cuda_driver=None,
        gpus=(HostGpu("NVIDIA A100-SXM4-80GB", "8.0"),),
        source="nvidia-smi",
    )


def test_old_nvidia_smi_without_compute_cap(tmp_path: Path) -> None:
    smi = _smi(
        tmp_path,
        'case "$1" in\n'
        "  *compute_cap*) echo 'Field \"compute_cap\" is not a valid field to query.'; exit 2;;\n"
        '  --query-gpu=driver_version,name) echo "470.82.01, Tesla T4";;\n'
        "esac\n",
    )
    info = detect(library=MISSING_NVML, smi=smi)
    assert (info.driver, info.gpus) == ("470.82.01", (HostGpu("Tesla T4", None),))


def test_nvidia_smi_failing_is_an_environment_failure(tmp_path: Path) -> None:
    smi = _smi(
        tmp_path, "echo 'Failed to initialize NVML: Driver/library version mismatch'\nexit 18\n"
    )
    with pytest.raises(EnvironmentFailure) as err:
        detect(library=MISSING_NVML, smi=smi)
    assert err.value.exit_code == 3
    assert "nvidia-smi failed (exit 18): Failed to initialize NVML" in err.value.message


def test_no_driver_at_all_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UsageError) as err:
        detect(library=MISSING_NVML)
    assert err.value.exit_code == 2
    assert "no NVIDIA driver found" in err.value.message
    assert err.value.hint == "pass the driver version instead, e.g. --driver 535.104.05"


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_resolve_arguments(parser)
    return parser.parse_args(list(argv))


def test_driver_auto_feeds_driver_and_gpus_into_resolve(tmp_path: Path) -> None:
    smi = _smi(tmp_path, 'echo "470.82.01, NVIDIA A100-PCIE-40GB, 8.0"\n')
    c = constraints_from_args(
        _args("tensorflow", "--driver", "auto"), detect=lambda: detect(MISSING_NVML, smi)
    )
    assert (c.driver, c.driver_from) == ("470.82.01", "nvidia-smi")
    assert [g.name for g in c.gpus] == ["NVIDIA A100-PCIE-40GB"]
    res = resolve(c, load())
    assert (res.version, res.cuda) == ("2.14.1", "11.8")  # 12.x builds need >= 525.60.13
    # 470 is too old for CUDA 11.8's PTX on a host venv; in the 11.8.0 image the data-center
    # exception for branch 470 lets the forward-compatibility libraries JIT it
    assert (
        "driver 470.82.01 (read by nvidia-smi), which supports CUDA 11.4: host venv: too old "
        "for the PTX JIT of NVIDIA A100-PCIE-40GB (8.0) (needs >= 520.61.05); container on "
        "NVIDIA A100-PCIE-40GB (8.0), data-center: starts, and the image's "
        "forward-compatibility libraries JIT-compile the PTX (branch 470 is excepted)"
    ) in res.reasons
    assert res.driver_min == "520.61.05"
    # 2.14.1 ships sm_35..sm_75 and compute_80 PTX: an A100 JIT-compiles from that PTX
    assert res.compute_capabilities[-1] == "compute_80"
    assert any(
        w.startswith("GPU NVIDIA A100-PCIE-40GB (compute capability 8.0) has no compiled kernels")
        for w in res.warnings
    )


def test_gpu_flag_by_name_and_by_capability() -> None:
    c = constraints_from_args(_args("tensorflow==2.15", "--gpu", "9.0", "--gpu", "Tesla T4"))
    assert [(g.name, g.compute_capability) for g in c.gpus] == [("", "9.0"), ("Tesla T4", None)]
    res = resolve(c, load())
    assert any("a GPU (compute capability 9.0)" in w for w in res.warnings)
    assert not any("Tesla T4" in w for w in res.warnings)  # sm_75 is compiled in 2.15


@pytest.mark.gpu
def test_real_host_driver_matches_nvidia_smi() -> None:
    smi = shutil.which("nvidia-smi")
    assert smi
    info = detect()
    assert info.source == "NVML"
    out = subprocess.run(
        [smi, "--query-gpu=driver_version,name,compute_cap", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    driver, gpus = parse_smi(out)
    assert info.driver == driver
    # envlock reads no brand from nvidia-smi; NVML's is the container runtime's token
    assert [(g.name, g.compute_capability) for g in info.gpus] == [
        (g.name, g.compute_capability) for g in gpus
    ]
    assert all(g.brand in NVML_BRANDS[1:] for g in info.gpus), info.gpus
    assert info.cuda_driver is not None
    assert detect(library=MISSING_NVML) == HostInfo(driver, None, gpus, "nvidia-smi")


def test_driver_auto_passes_the_drivers_cuda_version() -> None:
    host = HostInfo("580.159.04", "13.0", (HostGpu("NVIDIA H200", "9.0"),), "NVML")
    c = constraints_from_args(_args("tensorflow==2.18", "--driver", "auto"), detect=lambda: host)
    assert (c.driver, c.driver_cuda, c.driver_from) == ("580.159.04", "13.0", "NVML")
    res = resolve(c, load())
    assert not any("NVIDIA_DISABLE_REQUIRE" in w for w in res.warnings)
    assert any(
        r.startswith("driver 580.159.04 (read by NVML), which supports CUDA 13.0: host venv: runs")
        for r in res.reasons
    )
    assert any("GPU NVIDIA H200 (compute capability 9.0)" in w for w in res.warnings)


NVML_STUB = r"""
/* A stand-in for libnvidia-ml.so.1 (no GPU driver on this machine): the calls
   envlock makes, answering like an H200 host, or failing nvmlInit like a
   container that has the library but no driver. */
#include <string.h>
static int fail_init = FAIL_INIT;
int nvmlInit_v2(void) { return fail_init ? 9 : 0; }
int nvmlShutdown(void) { return 0; }
const char *nvmlErrorString(int r) { return r == 9 ? "Driver Not Loaded" : "Unknown Error"; }
int nvmlSystemGetDriverVersion(char *buf, unsigned n) { strncpy(buf, "580.159.04", n); return 0; }
int nvmlSystemGetCudaDriverVersion_v2(int *v) { *v = 13000; return 0; }
int nvmlDeviceGetCount_v2(unsigned *n) { *n = 2; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **h) { *h = (void *)(long)(i + 1); return 0; }
int nvmlDeviceGetName(void *h, char *buf, unsigned n) { strncpy(buf, "NVIDIA H200", n); return 0; }
int nvmlDeviceGetCudaComputeCapability(void *h, int *major, int *minor) {
  *major = 9; *minor = 0; return 0;
}
int nvmlDeviceGetBrand(void *h, int *brand) { *brand = 14; return 0; } /* NVML_BRAND_NVIDIA */
"""


def _nvml_stub(tmp_path: Path, *, fail_init: bool) -> str:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the NVML stand-in")
    src = tmp_path / "nvml.c"
    src.write_text(NVML_STUB.replace("FAIL_INIT", "1" if fail_init else "0"), encoding="utf-8")
    lib = tmp_path / "libnvidia-ml.so.1"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    return str(lib)


def test_nvml_through_ctypes(tmp_path: Path) -> None:
    info = detect(library=_nvml_stub(tmp_path, fail_init=False), smi="")
    assert info == HostInfo(
        driver="580.159.04",
        cuda_driver="13.0",
        gpus=(HostGpu("NVIDIA H200", "9.0", "nvidia"), HostGpu("NVIDIA H200", "9.0", "nvidia")),
        source="NVML",
    )


def test_gpu_auto_takes_the_market_from_nvmls_brand() -> None:
    # a GPU matrices/gpus.toml does not name: NVML's brand says what the container
    # runtime will compare with the image's NVIDIA_REQUIRE_CUDA
    host = HostInfo(
        "535.104.05", "12.2", (HostGpu("NVIDIA GeForce RTX 4090 D", "8.9", "geforce"),), "NVML"
    )
    c = constraints_from_args(_args("tensorflow==2.18", "--driver", "auto"), detect=lambda: host)
    assert [(g.name, g.market) for g in c.gpus] == [("NVIDIA GeForce RTX 4090 D", "geforce")]
    res = resolve(c, load())
    verdict = next(r for r in res.reasons if r.startswith("driver 535.104.05 (read by NVML)"))
    assert "container on NVIDIA GeForce RTX 4090 D (8.9), GeForce: refused" in verdict, verdict
    # the same GPU with a data-center brand: branch 535 is excepted there
    host = HostInfo("535.104.05", "12.2", (HostGpu("NVIDIA L40S-X", "8.9", "nvidia"),), "NVML")
    c = constraints_from_args(_args("tensorflow==2.18", "--driver", "auto"), detect=lambda: host)
    res = resolve(c, load())
    verdict = next(r for r in res.reasons if r.startswith("driver 535.104.05 (read by NVML)"))
    assert "container on NVIDIA L40S-X (8.9), data-center: starts" in verdict, verdict


def test_nvml_without_a_loaded_driver_falls_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lib = _nvml_stub(tmp_path, fail_init=True)
    smi = _smi(tmp_path, 'echo "550.54.15, NVIDIA L4, 8.9"\n')
    assert detect(library=lib, smi=smi).source == "nvidia-smi"
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(UsageError) as err:
        detect(library=lib)
    assert "NVML nvmlInit failed: Driver Not Loaded" in err.value.message
