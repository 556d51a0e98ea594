"""envlock.doctor.findings with fake probe results: no TensorFlow, no GPU needed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from envlock.doctor import findings as F
from envlock.doctor import gpu_findings as G
from envlock.doctor.advice import Context, Finding
from envlock.doctor.runner import _floor
from envlock.driver import HostGpu, HostInfo
from envlock.errors import NoResolution
from envlock.lock import read_lock
from envlock.model import Constraints
from envlock.resolve import load_matrix, resolve
from envlock.resolve.floors import host_gpus
from envlock.venv.probe import sonames

LOCK_DIR = Path(__file__).parent / "golden" / "render" / "tf2.15-system"
LOCK = read_lock(LOCK_DIR)
ENV = {
    "implementation_name": "cpython",
    "implementation_version": "3.11.7",
    "os_name": "posix",
    "platform_machine": "x86_64",
    "platform_release": "6.1",
    "platform_system": "Linux",
    "platform_version": "#1",
    "python_full_version": "3.11.7",
    "platform_python_implementation": "CPython",
    "python_version": "3.11",
    "sys_platform": "linux",
}
BUILD = {"is_cuda_build": True, "cuda_version": "12.2", "cudnn_version": "8"}
T4 = HostInfo("550.54.15", "12.4", (HostGpu("Tesla T4", "7.5"),), "NVML")


def dist(name: str, version: str, requires: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"name": name, "version": version, "requires": list(requires), "location": "/v"}


def healthy_probe() -> dict[str, Any]:
    dists = [dist(p.name, p.version) for p in LOCK.packages]
    return {
        "python": {"version": "3.11.7"},
        "markers": ENV,
        "environment": {"LD_LIBRARY_PATH": None, "CUDA_VISIBLE_DEVICES": None},
        "distributions": [*dists, dist("pip", "24.0")],
        "tensorflow": {
            "imported": True,
            "version": "2.15.1",
            "build_info": BUILD,
            "gpus": ["/physical_device:GPU:0"],
        },
        "libraries": [
            {"soname": s, "loaded": True, "from": "system", "path": f"/usr/lib/{s}"}
            for s in sonames("12.2", "8.9")
        ],
    }


def context(**kw: Any) -> Context:
    base: dict[str, Any] = {
        "lock": LOCK,
        "lock_dir": "env",
        "expected": LOCK.resolution,
        "host": T4,
        "host_problem": "",
        "fits": lambda driver: resolve(Constraints(spec="tensorflow==2.14.1")),
        "venv": "/work/venv",
        "python": "/work/venv/bin/python",
        "python_fits": lambda minor: resolve(Constraints(spec="tensorflow", python=minor)),
    }
    base.update(kw)
    return Context(**base)


def statuses(found: list[Finding]) -> dict[str, str]:
    return {f.check: f.status for f in found}


def test_healthy_venv_passes_every_check() -> None:
    found = F.judge(healthy_probe(), context())
    assert F.overall(found) == "PASSED", [f for f in found if f.status != "PASS"]
    checks = statuses(found)
    assert checks["driver"] == "PASS"
    assert checks["gpu 0"] == "PASS"  # sm_75 is compiled
    assert checks["library libcudnn.so.8"] == "PASS"


def test_missing_and_moved_packages_are_named() -> None:
    probe = healthy_probe()
    probe["distributions"] = [
        dist("protobuf", "5.29.0") if d["name"] == "protobuf" else d
        for d in probe["distributions"]
        if d["name"] != "numpy"
    ]
    found = F.judge(probe, context())
    by = {f.check: f for f in found}
    assert by["package numpy"].status == "FAIL"
    assert "not installed" in by["package numpy"].cause
    assert by["package protobuf"].status == "FAIL"
    locked = next(p.version for p in LOCK.packages if p.name == "protobuf")
    assert f"protobuf 5.29.0 is installed; the lock has {locked}" == by["package protobuf"].cause
    # one command naming the bundle and the inspected venv, and pip with the lock's hashes
    assert by["package numpy"].fix == "envlock restore env --venv /work/venv"
    numpy = next(p for p in LOCK.packages if p.name == "numpy")
    assert by["package numpy"].alternatives == (
        f"printf '%s\\n' 'numpy=={numpy.version} --hash=sha256:{numpy.wheels[0].sha256}' | "
        "/work/venv/bin/python -m pip install --no-deps --require-hashes -r /dev/stdin",
    )
    assert F.overall(found) == "FAILED"


def test_extra_distributions_warn_but_pip_is_tooling() -> None:
    probe = healthy_probe()
    probe["distributions"].append(dist("Rich", "13.0"))
    found = F.judge(probe, context())
    extra = [f for f in found if f.check == "packages not in the lock"]
    assert [f.status for f in extra] == ["WARN"]
    assert "rich 13.0" in extra[0].cause and "pip" not in extra[0].cause


def test_without_lock_requires_dist_is_checked_with_markers() -> None:
    probe = healthy_probe()
    probe["distributions"] = [
        dist("app", "1.0", ("numpy>=2", "colorama; sys_platform == 'win32'", "six")),
        dist("numpy", "1.26.4"),
    ]
    found = F.judge(probe, context(lock=None, lock_dir=None))
    by = {f.check: f for f in found}
    assert by["requirement numpy"].status == "FAIL"
    assert "numpy 1.26.4 is installed" in by["requirement numpy"].cause
    assert by["requirement six"].status == "FAIL"
    assert "requirement colorama" not in by  # its marker is false on Linux


def numpy2_probe() -> dict[str, Any]:
    """A numpy 2 upgrade under TensorFlow 2.15.1, whose metadata says numpy<2."""
    probe = healthy_probe()
    probe["distributions"] = [
        dist("numpy", "2.1.3")
        if d["name"] == "numpy"
        else dist("tensorflow", "2.15.1", ("numpy<2.0.0,>=1.23.5", "six>=1.12.0"))
        if d["name"] == "tensorflow"
        else d
        for d in probe["distributions"]
    ]
    return probe


def test_an_unmet_requirement_is_said_on_the_row_of_its_package() -> None:
    """#42: the numpy row says what tensorflow requires of it, and no PASS row claims
    every Requires-Dist met."""
    found = F.judge(numpy2_probe(), context())
    by = {f.check: f for f in found}
    locked = next(p.version for p in LOCK.packages if p.name == "numpy")
    assert by["package numpy"].cause == (
        f"numpy 2.1.3 is installed; the lock has {locked}; "
        "tensorflow 2.15.1 requires numpy<2.0.0,>=1.23.5"
    )
    assert "requirements" not in by and "requirement numpy" not in by
    assert not any("every Requires-Dist" in f.cause for f in found)


def test_without_a_lock_the_unmet_requirement_is_its_own_row_and_no_pass() -> None:
    found = F.judge(numpy2_probe(), context(lock=None, lock_dir=None))
    by = {f.check: f for f in found}
    numpy = by["requirement numpy"]
    assert numpy.status == "FAIL"
    assert numpy.cause == (
        "numpy 2.1.3 is installed; tensorflow 2.15.1 requires numpy<2.0.0,>=1.23.5"
    )
    # the inspected interpreter, the requirement quoted for the shell
    assert numpy.fix == "/work/venv/bin/python -m pip install 'numpy<2.0.0,>=1.23.5'"
    assert not numpy.manual
    assert "requirements" not in by


def test_every_requirer_is_named_once_on_the_row() -> None:
    probe = healthy_probe()
    probe["distributions"] = [
        dist("a", "1.0", ("numpy>=2",)),
        dist("b", "2.0", ("numpy>=2.1; python_version >= '3'",)),
        dist("numpy", "1.26.4"),
    ]
    (row,) = [f for f in F.judge(probe, context(lock=None)) if f.check == "requirement numpy"]
    assert (
        row.cause == "numpy 1.26.4 is installed; a 1.0 requires numpy>=2, b 2.0 requires numpy>=2.1"
    )


def test_old_driver_names_the_release_that_fits() -> None:
    host = HostInfo("470.57.02", None, (HostGpu("Tesla T4", "7.5"),), "nvidia-smi")
    found = F.judge(healthy_probe(), context(host=host))
    driver = next(f for f in found if f.check == "driver")
    assert driver.status == "FAIL"
    assert "470.57.02" in driver.cause and "525.60.13" in driver.cause
    assert driver.manual and driver.fix.startswith("upgrade the NVIDIA driver to 525.60.13")
    assert driver.alternatives == (
        "envlock lock tensorflow==2.14.1 --driver auto -o env-tensorflow2.14.1",
    )
    assert "tensorflow 2.14.1 (CUDA 11.8" in driver.cause


def test_no_gpu_fails_unless_allow_cpu() -> None:
    probe = healthy_probe()
    probe["libraries"] = [{"soname": "libcudnn.so.8", "loaded": False, "tried": []}]
    found = F.judge(probe, context(host=None, host_problem="no driver"))
    assert statuses(found)["driver"] == "FAIL"
    assert statuses(found)["libraries"] == "WARN"  # no GPU: the libraries are not the point
    found = F.judge(probe, context(host=None, host_problem="no driver", allow_cpu=True))
    assert statuses(found)["driver"] == "WARN"
    assert F.overall(found) == "WARNED"


def test_silent_cpu_fallback_and_missing_libraries_fail_with_gpu() -> None:
    probe = healthy_probe()
    probe["tensorflow"]["gpus"] = []
    probe["libraries"][-1] = {
        "soname": "libcudnn.so.8",
        "loaded": False,
        "tried": [{"from": "system", "error": "libcudnn.so.8: cannot open shared object file"}],
    }
    by = {f.check: f for f in F.judge(probe, context())}
    assert by["tensorflow gpus"].status == "FAIL"
    assert by["libraries"].status == "FAIL"
    assert "libcudnn.so.8" in by["libraries"].cause
    assert "nvidia/cuda:12.2.2-cudnn8-runtime-ubuntu22.04" in by["libraries"].fix


def test_build_and_python_mismatch() -> None:
    probe = healthy_probe()
    probe["python"] = {"version": "3.12.1"}
    probe["tensorflow"]["build_info"] = {**BUILD, "cudnn_version": "9"}
    by = {f.check: f for f in F.judge(probe, context())}
    assert by["python"].status == "FAIL"
    assert by["python"].fix == "envlock restore env --venv /work/venv"
    assert "tensorflow 2.15.1 has wheels for Python 3.9, 3.10, 3.11" in by["python"].cause
    assert by["tensorflow cuDNN"].status == "FAIL"
    assert by["tensorflow CUDA"].status == "PASS"


def test_hidden_gpus_and_unsupported_capability() -> None:
    probe = healthy_probe()
    probe["environment"]["CUDA_VISIBLE_DEVICES"] = ""
    old = HostInfo("550.54.15", None, (HostGpu("Tesla K80", "3.7"),), "NVML")
    by = {f.check: f for f in F.judge(probe, context(host=old))}
    assert by["CUDA_VISIBLE_DEVICES"].status == "FAIL"
    assert by["gpu 0"].status == "FAIL"


def test_import_failure_and_changed_records() -> None:
    probe = healthy_probe()
    probe["tensorflow"] = {"imported": False, "error": {"type": "ImportError", "message": "boom"}}
    probe["distributions"][0]["changed_count"] = 1
    probe["distributions"][0]["changed_files"] = [{"path": "x.py", "problem": "changed"}]
    by = {f.check: f for f in F.judge(probe, context())}
    assert (
        by["tensorflow import"].status == "FAIL"
        and "ImportError: boom" in by["tensorflow import"].cause
    )
    name = LOCK.packages[0].name
    assert (
        by[f"files of {name}"].status == "FAIL" and "x.py (changed)" in by[f"files of {name}"].cause
    )


def test_gpu_newer_than_the_kernels_is_a_warning() -> None:
    h200 = HostInfo("550.54.15", "12.4", (HostGpu("NVIDIA H200", "9.0"),), "NVML")
    by = {f.check: f for f in F.judge(healthy_probe(), context(host=h200))}
    assert by["gpu 0"].status == "WARN"
    assert "PTX" in by["gpu 0"].cause and "CUDA_CACHE_MAXSIZE" in by["gpu 0"].fix


# --- doctor and resolve agree on the driver floor (one function: floors.host_floor)

DRIVERS = (
    "450.80.02",
    "470.57.02",
    "520.61.05",
    "525.60.13",
    "530.30.02",
    "535.54.03",
    "545.23.06",
    "550.54.15",
    "560.28.03",
    "570.86.10",
)
GPUS = (
    HostGpu("Tesla T4", "7.5", "nvidia"),
    HostGpu("NVIDIA A100-SXM4-80GB", "8.0", "nvidia"),
    HostGpu("NVIDIA H100 80GB HBM3", "9.0", "nvidia"),
    HostGpu("Tesla V100-SXM2-16GB", "7.0", "nvidia"),
    HostGpu("NVIDIA GeForce RTX 4090", "8.9", "geforce"),
    HostGpu("NVIDIA GeForce RTX 3090", "8.6", "geforce"),
    HostGpu("NVIDIA L4", "8.9", "nvidia"),
)
RELEASES = (
    "2.11.1",
    "2.12.1",
    "2.13.1",
    "2.14.1",
    "2.15.1",
    "2.16.2",
    "2.17.1",
    "2.18.1",
    "2.21.0",
)


@settings(max_examples=120, deadline=None)
@given(st.sampled_from(DRIVERS), st.sampled_from(GPUS), st.sampled_from(RELEASES))
def test_doctor_and_resolve_agree_on_the_driver(driver: str, gpu: HostGpu, version: str) -> None:
    """For a (driver, GPU, lock) triple, doctor's driver check passes exactly when
    resolve, asked for that release with that driver and GPU, says a host venv runs."""
    expected = resolve(Constraints(spec=f"tensorflow=={version}"))
    host = HostInfo(driver, None, (gpu,), "NVML")
    ctx = context(expected=expected, host=host, floor=_floor(expected, host, {}), fits=None)
    doctor = G.check_driver(ctx)[0].status
    asked = Constraints(
        spec=f"tensorflow=={version}",
        python=expected.python,
        cuda_source=expected.cuda_source,
        driver=driver,
        gpus=host_gpus(host),
    )
    try:
        answer = resolve(asked)
    except NoResolution:
        runs = False
    else:
        runs = any("host venv: runs" in r for r in answer.reasons)
    assert (doctor == "PASS") == runs, (driver, gpu.name, version, doctor)


def test_an_a100_on_530_fails_the_ptx_jit_floor_as_resolve_says() -> None:
    """The issue's case: doctor said PASS (>= 525.60.13, CUDA 12.2's floor) where
    resolve said the PTX JIT of CUDA 12.2 on that GPU needs >= 535.54.03."""
    host = HostInfo("530.30.02", None, (GPUS[1],), "nvidia-smi")
    ctx = context(host=host, floor=_floor(LOCK.resolution, host, {}))
    found = G.check_driver(ctx)[0]
    assert found.status == "FAIL"
    assert "older than 535.54.03" in found.cause and "PTX JIT" in found.cause


def image_require_cuda(expected: Any) -> str:
    """The NVIDIA_REQUIRE_CUDA of the image resolve chose (as the container sees it)."""
    from envlock.resolve.floors import image_require

    matrix = load_matrix()
    image = next(i for i in matrix.cuda.images if i.version == expected.cuda_image_version)
    return image_require(image)[0].text


@settings(max_examples=120, deadline=None)
@given(st.sampled_from(DRIVERS), st.sampled_from(GPUS), st.sampled_from(RELEASES))
def test_doctor_in_a_container_agrees_with_resolves_container_verdict(
    driver: str, gpu: HostGpu, version: str
) -> None:
    """doctor run inside the image (its NVIDIA_REQUIRE_CUDA in the environment)
    passes the driver exactly when resolve says the container on that GPU starts
    and runs (forward-compatibility libraries included); a container the runtime
    refuses to start has no doctor inside it to ask."""
    from hypothesis import assume

    expected = resolve(Constraints(spec=f"tensorflow=={version}"))
    host = HostInfo(driver, None, (gpu,), "NVML")
    asked = Constraints(
        spec=f"tensorflow=={version}",
        python=expected.python,
        cuda_source=expected.cuda_source,
        driver=driver,
        gpus=host_gpus(host),
    )
    try:
        answer = resolve(asked)
    except NoResolution:
        assume(False)  # no image of this release for this driver
        return
    # doctor inside the image resolve chose for this driver (the release is the same)
    environ = {"NVIDIA_REQUIRE_CUDA": image_require_cuda(answer)}
    floor = _floor(expected, host, environ)
    doctor = G.check_driver(context(expected=expected, host=host, floor=floor, fits=None))[0]
    verdict = next(
        part.split(": ", 1)[1]
        for r in answer.reasons
        for part in r.split("; ")
        if part.startswith("container on ")
    )
    assume(not verdict.startswith("refused"))
    runs = verdict.startswith("starts") and "but the PTX JIT" not in verdict
    assert (doctor.status == "PASS") == runs, (driver, gpu.name, version, doctor, verdict)


def test_an_a100_on_an_excepted_branch_passes_in_the_container_only() -> None:
    """TF 2.15.1 has no compiled kernel for the A100 (8.0): on a host venv 525.147.05
    is too old for the PTX JIT of CUDA 12.2; inside the 12.2.2 image its
    forward-compatibility libraries JIT-compile it (branch 525 is excepted)."""
    host = HostInfo("525.147.05", None, (GPUS[1],), "NVML")
    on_host = G.check_driver(context(host=host, floor=_floor(LOCK.resolution, host, {})))[0]
    assert on_host.status == "FAIL" and "older than 535.54.03" in on_host.cause
    environ = {"NVIDIA_REQUIRE_CUDA": image_require_cuda(LOCK.resolution)}
    inside = G.check_driver(context(host=host, floor=_floor(LOCK.resolution, host, environ)))[0]
    assert inside.status == "PASS", inside.cause
    assert inside.cause == (
        "driver 525.147.05 (NVML) >= 525.60.13, the floor of CUDA 12.2 (minor-version "
        "compatibility); in this container the image's forward-compatibility libraries "
        "JIT-compile the PTX for NVIDIA A100-SXM4-80GB (8.0) (its NVIDIA_REQUIRE_CUDA excepts "
        "this driver branch)"
    )
    # a GeForce gets no forward compatibility: the same floor as on the host
    geforce = HostInfo("525.147.05", None, (GPUS[4],), "NVML")
    in_geforce = G.check_driver(
        context(host=geforce, floor=_floor(LOCK.resolution, geforce, environ))
    )[0]
    assert in_geforce.status == "FAIL" and "older than 535.54.03" in in_geforce.cause


def test_a_changed_python_is_one_finding_with_the_package_rows_folded() -> None:
    """The platform moved the venv to Python 3.12 and nothing of the lock is there:
    the first finding is the cause, with the release that fits the new Python."""
    probe = healthy_probe()
    probe["python"] = {"version": "3.12.3"}
    probe["distributions"] = [dist("pip", "24.0")]
    found = F.judge(probe, context())
    assert found[0].check == "python" and found[0].status == "FAIL"
    assert len(found[0].folded) == len(LOCK.packages)
    assert not [f for f in found if f.check.startswith("package ")]
    newest = resolve(Constraints(spec="tensorflow", python="3.12"))
    assert f"for Python 3.12, tensorflow {newest.version} fits" in found[0].cause
    assert found[0].alternatives == (
        f"envlock lock tensorflow=={newest.version} --python 3.12 "
        f"-o env-tensorflow{newest.version}",
    )


def test_a_keras_major_jump_is_flagged_with_the_way_out() -> None:
    probe = healthy_probe()
    probe["tensorflow"]["version"] = "2.17.0"
    by = {f.check: f for f in F.judge(probe, context())}
    assert by["tensorflow version"].status == "FAIL"
    keras = by["keras"]
    assert keras.status == "WARN" and "Keras 3" in keras.cause
    # two ways out, as alternatives: back to the lock, or stay with tf-keras (#42)
    back, stay = keras.ways
    assert (back.label, back.steps) == (
        "back to tensorflow 2.15.1, the lock's",
        (("run", "envlock restore env --venv /work/venv"),),
    )
    assert stay.label.startswith("stay on tensorflow 2.17.0 with Keras 2 (tf-keras;")
    assert stay.steps == (
        ("run", "/work/venv/bin/python -m pip install 'tf-keras~=2.17.0'"),
        ("run", "export TF_USE_LEGACY_KERAS=1"),
    )
    assert keras.to_dict()["ways"][1]["steps"][1] == {
        "kind": "run",
        "text": "export TF_USE_LEGACY_KERAS=1",
    }
    # the version row's fix is the first way: the fix list says both under one heading
    assert by["tensorflow version"].ways == (back,) or by["tensorflow version"].fix == back.text
    probe["tensorflow"]["version"] = "2.15.0"  # same Keras: no finding
    assert "keras" not in {f.check for f in F.judge(probe, context())}


def test_doctor_holds_the_driver_to_the_floor_the_locks_other_packages_set() -> None:
    """A lock whose torch brings CUDA 13 wheels needs driver >= 580 whatever its
    TensorFlow needs: doctor states that floor with the package that sets it, and
    offers no other TensorFlow release (it would not lower the floor)."""
    from dataclasses import replace

    from envlock.model import GpuFacts

    gpu = GpuFacts(
        packages=(),
        driver_min="580",
        set_by="torch 2.15.0 (CUDA 13.2, cuda-toolkit 13.2.2)",
        framework_driver_min="525.60.13",
        toolkit_driver=None,
        toolkit_set_by="",
        files_read=True,
    )
    lock = replace(LOCK, gpu=gpu)
    old = HostInfo("570.86.15", None, (GPUS[0],), "nvidia-smi")
    found = G.check_driver(context(lock=lock, host=old, floor=_floor(LOCK.resolution, old, {})))[0]
    assert (found.status, found.cause, found.fix, found.alternatives) == (
        "FAIL",
        "driver 570.86.15 (nvidia-smi) is older than 580: the lock's packages need it: "
        "torch 2.15.0 (CUDA 13.2, cuda-toolkit 13.2.2)",
        "upgrade the NVIDIA driver to 580 or newer (the host's, outside this environment)",
        (),
    )
    new = HostInfo("580.95.05", None, (GPUS[0],), "nvidia-smi")
    found = G.check_driver(context(lock=lock, host=new, floor=_floor(LOCK.resolution, new, {})))[0]
    assert (found.status, found.cause) == (
        "PASS",
        "driver 580.95.05 (nvidia-smi) >= 580, the lock's packages need it: "
        "torch 2.15.0 (CUDA 13.2, cuda-toolkit 13.2.2)",
    )


def test_every_cuda_carrying_package_installed_is_rated_against_the_driver() -> None:
    """torch 2.15.0 from the default index brings CUDA 13 wheels: on driver 570 doctor
    names them and the floor; JAX's CUDA 12 plugin and CuPy beside them are fine."""
    probe = healthy_probe()
    probe["distributions"] += [
        {**dist("torch", "2.15.0"), "cuda": "13.2"},  # the probe read torch/version.py
        dist("cuda-toolkit", "13.2.2"),
        dist("nvidia-cublas", "13.4.1.3"),
        dist("nvidia-cudnn-cu13", "9.26.0.51"),
        dist("jax-cuda12-plugin", "0.7.2"),
        dist("cupy-cuda12x", "14.0.1"),
    ]
    old = HostInfo("570.86.15", None, (GPUS[0],), "nvidia-smi")
    found = G.check_cuda_packages(probe, context(host=old))
    assert [(f.check, f.status, f.cause, f.fix) for f in found] == [
        (
            "cuda packages >= 580",
            "FAIL",
            "driver 570.86.15 (nvidia-smi) is older than 580, which cuda-toolkit 13.2.2, "
            "nvidia-cublas 13.4.1.3, nvidia-cudnn-cu13 9.26.0.51, torch 2.15.0 need (the CUDA "
            "they bring: CUDA 13, CUDA 13.2)",
            "upgrade the NVIDIA driver to 580 or newer (the host's, outside this environment)",
        )
    ]
    new = HostInfo("580.95.05", None, (GPUS[0],), "nvidia-smi")
    (ok,) = G.check_cuda_packages(probe, context(host=new))
    assert (ok.status, ok.cause) == (
        "PASS",
        "6 CUDA-carrying packages installed; the highest floor, >= 580 (cuda-toolkit 13.2.2, "
        "...), is met by driver 580.95.05",
    )


def test_the_probe_reads_the_cuda_an_installed_torch_and_cuda13_wheel_state(
    tmp_path: Path,
) -> None:
    """torch/version.py (read, never imported) and the nvidia/cuNN/ folder of the CUDA
    13 wheels without a suffix (their RECORD): what doctor rates them by."""
    from envlock.venv import probe

    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "version.py").write_text(
        "__version__ = '2.15.0+cu132'\ncuda: Optional[str] = '13.2'\n"
    )

    class Installed:
        def __init__(self, files: list[str]) -> None:
            self.files = files

        def locate_file(self, path: str) -> Path:
            return tmp_path / path

    assert probe.cuda_stated(Installed([]), "torch") == "13.2"
    cufft = Installed(["nvidia/cu13/lib/libcufft.so.12", "nvidia_cufft-12.2.0.57.dist-info/RECORD"])
    assert probe.cuda_stated(cufft, "nvidia-cufft") == "13"
    assert (
        probe.cuda_stated(Installed(["nvidia/cudnn/lib/libcudnn.so.9"]), "nvidia-cudnn-cu12")
        is None
    )
    assert probe.cuda_stated(Installed(["pynvml.py"]), "nvidia-ml-py") is None
    (tmp_path / "torch" / "version.py").write_text("cuda = None\n")  # a CPU build
    assert probe.cuda_stated(Installed([]), "torch") is None
