"""Issue 43: doctor --lock of a torch or JAX lock judges the framework's CUDA build,
its nvidia-* wheels and the driver floor, as it judges TensorFlow's.

The locks are the render goldens' (tests/golden/render/torch2.11-pip: `envlock lock
torch==2.11`, jax0.11-cuda13: `envlock lock 'jax[cuda13]==0.11.2'`, both against the
real index); the probes are what envlock.venv.probe reports of a venv that holds the
lock's distributions (torch's CUDA as the probe reads it from torch/version.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_doctor_findings import ENV, context, dist

from envlock.doctor import findings as F
from envlock.doctor.runner import _fits
from envlock.driver import HostGpu, HostInfo
from envlock.lock import read_lock

GOLDEN = Path(__file__).parent / "golden" / "render"
TORCH = GOLDEN / "torch2.11-pip"
JAX = GOLDEN / "jax0.11-cuda13"
H100 = (HostGpu("NVIDIA H100 80GB HBM3", "9.0"),)
NEW = HostInfo("580.95.05", None, H100, "nvidia-smi")
OLD = HostInfo("570.86.15", None, H100, "nvidia-smi")


def probe_of(folder: Path, **changed: dict[str, Any]) -> dict[str, Any]:
    """The probe of a venv holding the lock's distributions (``changed``: by name,
    what differs; an empty dict drops the distribution)."""
    lock = read_lock(folder)
    dists = []
    for p in lock.packages:
        d = {**dist(p.name, p.version), **({"cuda": "13.0"} if p.name == "torch" else {})}
        change = changed.pop(p.name, None)
        if change == {}:
            continue
        dists.append({**d, **(change or {})})
    dists += [dist(name, "0") | extra for name, extra in changed.items()]
    return {
        "python": {"version": "3.12.3"},
        "markers": {**ENV, "python_version": "3.12", "python_full_version": "3.12.3"},
        "environment": {"LD_LIBRARY_PATH": None, "CUDA_VISIBLE_DEVICES": None},
        "distributions": dists,
        "libraries": [],
    }


def judge(folder: Path, probe: dict[str, Any], host: HostInfo, spec: str) -> dict[str, Any]:
    lock = read_lock(folder)
    ctx = context(
        lock=lock,
        lock_dir="env",
        expected=lock.resolution,
        host=host,
        fits=_fits("3.12", host, spec),
        floor=None,
        venv="/v",
        python="/v/bin/python",
    )
    return {f.check: f for f in F.judge(probe, ctx)}


def test_a_torch_venv_as_locked_passes_its_build_and_driver() -> None:
    by = judge(TORCH, probe_of(TORCH), NEW, "torch")
    assert (by["torch build"].status, by["torch build"].cause) == (
        "PASS",
        "torch 2.11.0: the CUDA 13.0 build, read from torch/version.py (installed), as locked",
    )
    assert (by["driver"].status, by["driver"].cause) == (
        "PASS",
        "driver 580.95.05 (nvidia-smi) >= 580, the floor of CUDA 13.0",
    )
    assert by["cuda packages"].status == "PASS"
    assert {f.status for f in by.values()} == {"PASS"}


def test_another_cuda_build_of_torch_is_named_with_the_restore() -> None:
    """torch 2.11.0+cu128 (PyTorch's own index) where the lock has the cu130 build."""
    probe = probe_of(TORCH, torch={"version": "2.11.0+cu128", "cuda": "12.8"})
    by = judge(TORCH, probe, NEW, "torch")
    build = by["torch build"]
    assert (build.status, build.cause) == (
        "FAIL",
        "torch 2.11.0+cu128 is installed: the CUDA 12.8 build, read from torch/version.py "
        "(installed); the lock has torch 2.11.0, the CUDA 13.0 build (its nvidia-* wheels "
        "differ with it)",
    )
    assert build.fix == by["package torch"].fix  # the restore of the bundle
    assert build.fix.startswith("envlock restore env ")
    # a CPU build names no CUDA
    probe = probe_of(TORCH, torch={"version": "2.11.0+cpu", "cuda": None})
    cpu = judge(TORCH, probe, NEW, "torch")["torch build"]
    assert cpu.status == "FAIL" and "names no CUDA (a CPU build" in cpu.cause


def test_a_driver_below_the_torch_locks_floor_names_torch_and_the_build_that_runs() -> None:
    by = judge(TORCH, probe_of(TORCH), OLD, "torch")
    driver = by["driver"]
    assert driver.status == "FAIL"
    assert driver.cause.startswith(
        "driver 570.86.15 (nvidia-smi) is older than 580, which torch 2.11.0 (CUDA 13.0) "
        "needs here: the floor of CUDA 13.0; torch 2.11.0+cu128 (CUDA 12.8, "
    )
    # the SPEC lock takes: a build of PyTorch's own index by its CUDA, no local label
    assert driver.alternatives == (
        "envlock lock torch==2.11.0 --cuda 12.8 --driver auto --cuda-source pip "
        "-o env-torch2.11.0+cu128",
    )
    wheels = by["cuda packages >= 580"]
    assert wheels.status == "FAIL"
    assert wheels.cause.startswith(
        "driver 570.86.15 (nvidia-smi) is older than 580, which cuda-bindings 13.5.0, "
        "cuda-toolkit 13.0.2, nvidia-cublas 13.1.0.3, nvidia-cuda-cupti 13.0.85 and 14 more need"
    )


def test_a_jax_venv_is_judged_by_its_cuda_plugin() -> None:
    by = judge(JAX, probe_of(JAX), NEW, "jax[cuda]")
    assert (by["jax plugin"].status, by["jax plugin"].cause) == (
        "PASS",
        "jax-cuda13-plugin 0.11.2 installed, as locked",
    )
    assert {f.status for f in by.values()} == {"PASS"}
    probe = probe_of(JAX, **{"jax-cuda13-plugin": {}, "jax-cuda12-plugin": {"version": "0.11.2"}})
    plugin = judge(JAX, probe, NEW, "jax[cuda]")["jax plugin"]
    assert (plugin.status, plugin.cause) == (
        "FAIL",
        "jax's CUDA comes with its plugin: jax-cuda12-plugin 0.11.2 installed; the lock has "
        "jax-cuda13-plugin 0.11.2",
    )
    driver = judge(JAX, probe_of(JAX), OLD, "jax[cuda]")["driver"]
    assert driver.status == "FAIL" and "which jax 0.11.2 (CUDA 13.0) needs here" in driver.cause
    assert driver.alternatives == (
        "envlock lock 'jax[cuda12]==0.12.0.1' --driver auto --cuda-source pip -o env-jax0.12.0.1",
    )


def test_torch_labelled_by_pytorchs_index_is_the_locked_build_when_its_cuda_is() -> None:
    """The GPU machine's torch 2.11.0+cu130 (PyTorch's own index labels its builds) is
    the lock's torch 2.11.0, the configured index's CUDA 13.0 build: no package
    difference; the torch build finding says which build it is."""
    probe = probe_of(TORCH, torch={"version": "2.11.0+cu130", "cuda": "13.0"})
    by = judge(TORCH, probe, NEW, "torch")
    assert "package torch" not in by
    assert (by["packages"].status, by["torch build"].status) == ("PASS", "PASS")
    assert by["torch build"].cause == (
        "torch 2.11.0+cu130: the CUDA 13.0 build, read from torch/version.py (installed), as locked"
    )


def test_another_python_offers_the_lock_of_the_same_torch_build() -> None:
    probe = probe_of(TORCH)
    probe["python"] = {"version": "3.11.9"}
    probe["markers"] = {**ENV, "python_version": "3.11", "python_full_version": "3.11.9"}
    python = judge(TORCH, probe, NEW, "torch")["python"]
    assert python.status == "FAIL"
    assert "torch 2.11.0 has wheels for Python 3.10, 3.11, 3.12, 3.13, 3.14" in python.cause
    assert python.alternatives == (
        "envlock lock torch==2.11.0 --cuda 13.0 --python 3.11 --cuda-source pip -o env-py3.11",
    )


def test_doctor_reads_a_lock_without_the_toml_writer() -> None:
    """doctor --lock on a GPU server's bare python3 (packaging alone beside the standard
    library): reading pylock.toml imports no tomli_w, which only writing needs."""
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['tomli_w'] = None\n"
        "from envlock.lock import read_lock\n"
        f"print(read_lock({str(TORCH)!r}).resolution.framework)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).parent.parent,
    )
    assert (out.returncode, out.stdout) == (0, "torch\n"), out.stderr


def test_the_gpu_check_script_takes_the_lock_folder(tmp_path: Path) -> None:
    """scripts/gpu-check-43.sh (the lead runs it on the GPU machine) refuses to run
    without a bundle folder, before writing anything; shellcheck finds nothing."""
    import shutil
    import subprocess

    script = Path(__file__).parent.parent / "scripts" / "gpu-check-43.sh"
    for argv in ([], [str(tmp_path)]):
        out = subprocess.run(
            ["bash", str(script), *argv],
            capture_output=True,
            text=True,
            timeout=60,
            env={"PATH": "/usr/bin:/bin", "OUT": str(tmp_path / "out")},
        )
        assert out.returncode == 2 and out.stderr.startswith("usage: bash scripts/gpu-check-43.sh")
        assert not (tmp_path / "out").exists()
    shellcheck = shutil.which("shellcheck")
    if shellcheck:
        checked = subprocess.run(
            [shellcheck, "--severity=style", str(script)], capture_output=True, text=True
        )
        assert checked.returncode == 0, checked.stdout
