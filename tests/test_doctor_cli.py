"""envlock doctor end to end: which interpreter, a fake nvidia-smi against a TF 2.15
lock, and a real TensorFlow 2.15.1 venv (CPU) with numpy removed and protobuf moved."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from venv_support import make_tf215_venv

from envlock.cli import main
from envlock.venv import interpreter

LOCK_DIR = Path(__file__).parent / "golden" / "render" / "tf2.15-system"
FAKE_SMI = """#!/bin/sh
case "$*" in
  *--query-gpu=*) echo "470.57.02, Tesla T4, 7.5" ;;
  *) echo "NVIDIA-SMI 470.57.02" ;;
esac
"""


def doctor(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(["doctor", *argv, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out)


def by_check(doc: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {f["check"]: f for f in doc["findings"]}


@pytest.fixture
def fake_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """nvidia-smi on PATH printing driver 470.57.02 and a T4; NVML made unloadable."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(FAKE_SMI)
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr("envlock.driver.NVML_LIBRARY", "libnvidia-ml-absent.so.1")


def test_old_driver_against_tf215_lock_names_the_release_that_fits(
    fake_smi: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code, doc = doctor(["--lock", str(LOCK_DIR), "--venv", sys.executable], capsys)
    assert code == 1 and doc["status"] == "FAILED"
    assert doc["host"] == {
        "driver": "470.57.02",
        "source": "nvidia-smi",
        "gpus": [{"name": "Tesla T4", "compute_capability": "7.5"}],
    }
    driver = by_check(doc)["driver"]
    assert driver["status"] == "FAIL"
    assert driver["cause"] == (
        "driver 470.57.02 (nvidia-smi) is older than 525.60.13, which tensorflow 2.15.1 "
        "(CUDA 12.2) needs here: the floor of CUDA 12.2 (minor-version compatibility); "
        "tensorflow 2.14.1 (CUDA 11.8, cuDNN 8.7, driver >= 450.80.02) runs on this driver: "
        "the other fix locks it, keeping your pins"
    )
    assert driver["manual"] and driver["fix"].startswith("upgrade the NVIDIA driver to 525.60.13")
    # the lock's CUDA source and pins kept, a new bundle beside the old one
    assert driver["alternatives"] == [
        f"envlock lock tensorflow==2.14.1 --driver auto -o {LOCK_DIR}-tensorflow2.14.1"
    ]
    assert by_check(doc)["gpu 0"]["status"] == "PASS"  # sm_75 is compiled into 2.15


def test_in_the_container_the_images_forward_compatibility_counts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An A100 on 525.147.05 against the TF 2.15 lock: no compiled kernel for 8.0,
    so on a host venv the PTX JIT of CUDA 12.2 needs 535.54.03 (FAIL); inside the
    lock's 12.2.2 image (its NVIDIA_REQUIRE_CUDA in the environment, as the image
    sets it) branch 525 is excepted for data-center GPUs and the forward-compatibility
    libraries serve it. NVML is faked (no GPU here) where it hands over its answer:
    the brand the container runtime checks comes from NVML, nvidia-smi has none."""
    from envlock import driver
    from envlock.driver import HostGpu, HostInfo
    from envlock.resolve import load_matrix
    from envlock.resolve.floors import image_require

    a100 = HostGpu("NVIDIA A100-SXM4-80GB", "8.0", "nvidia")
    monkeypatch.setattr(driver, "_nvml", lambda *a: HostInfo("525.147.05", "12.0", (a100,), "NVML"))
    monkeypatch.delenv("NVIDIA_REQUIRE_CUDA", raising=False)
    argv = ["--lock", str(LOCK_DIR), "--venv", sys.executable]
    _, doc = doctor(argv, capsys)
    host = by_check(doc)["driver"]
    assert host["status"] == "FAIL" and "older than 535.54.03" in host["cause"], host
    image = next(i for i in load_matrix().cuda.images if i.version == "12.2.2")
    monkeypatch.setenv("NVIDIA_REQUIRE_CUDA", image_require(image)[0].text)
    _, doc = doctor(argv, capsys)
    inside = by_check(doc)["driver"]
    assert inside["status"] == "PASS", inside
    assert "forward-compatibility libraries JIT-compile the PTX" in inside["cause"]


def test_the_interpreter_is_chosen_and_said(tmp_path: Path) -> None:
    bundle = tmp_path / "env"
    (bundle / ".venv" / "bin").mkdir(parents=True)
    py = bundle / ".venv" / "bin" / "python"
    py.symlink_to(sys.executable)
    other = tmp_path / "active"
    (other / "bin").mkdir(parents=True)
    (other / "bin" / "python").symlink_to(sys.executable)
    env = {"VIRTUAL_ENV": str(other)}
    assert interpreter.choose(None, bundle, env).chosen_by == "bundle"
    assert interpreter.choose(None, bundle, env).reason == (
        f"the venv bootstrap.sh made for {bundle} ({bundle / '.venv'})"
    )
    assert interpreter.choose(None, tmp_path, env).chosen_by == "VIRTUAL_ENV"
    assert interpreter.choose(None, None, {}).chosen_by == "envlock"
    assert interpreter.choose(str(other), bundle, env).python == str(other / "bin" / "python")


def test_bad_venv_and_lock_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["doctor", "--venv", str(tmp_path)]) == 2
    assert "no bin/python there" in capsys.readouterr().err
    assert main(["doctor", "--lock", str(tmp_path)]) == 2
    assert "no pylock.toml there" in capsys.readouterr().err


def test_own_interpreter_is_consistent_with_itself(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = doctor(["--venv", sys.executable, "--allow-cpu"], capsys)
    checks = by_check(doc)
    assert doc["interpreter"]["chosen_by"] == "--venv"
    assert checks["requirements"]["status"] == "PASS"
    assert "tensorflow version" not in checks  # no TensorFlow here: never imported
    assert code == 0


# -- a real TensorFlow 2.15.1 venv (slow, network) ------------------------------------


def pip(venv: Path, *args: str) -> None:
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "-q", "--disable-pip-version-check", *args],
        check=True,
        timeout=900,
    )


def replace_file(path: Path, data: bytes) -> None:
    new = path.with_name(path.name + ".new")
    new.write_bytes(data)
    os.replace(new, path)


@pytest.fixture(scope="session")
def tf_venv(tmp_path_factory: pytest.TempPathFactory, shared_uv_cache: Path) -> Iterator[Path]:
    """One venv with tensorflow==2.15.1 per session (the index from pip's configuration;
    pip in it, the wheels through the run's shared uv cache)."""
    yield make_tf215_venv(tmp_path_factory.mktemp("doctor") / "tf215", shared_uv_cache)


@pytest.mark.slow
@pytest.mark.network
def test_real_tf_venv_drift_is_named(tf_venv: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = doctor(["--venv", str(tf_venv), "--allow-cpu"], capsys)
    checks = by_check(doc)
    assert checks["tensorflow version"] == {
        "check": "tensorflow version",
        "status": "PASS",
        "cause": "tensorflow 2.15.1 imports",
        "fix": "",
        "manual": False,
    }
    assert checks["requirements"]["status"] == "PASS"
    assert checks["tensorflow CUDA"]["cause"] == "built with CUDA 12.2"
    assert code == 0, doc

    pip(tf_venv, "uninstall", "-y", "numpy")
    pip(tf_venv, "install", "--no-deps", "protobuf==5.26.1")
    try:
        code, doc = doctor(["--venv", str(tf_venv), "--lock", str(LOCK_DIR), "--allow-cpu"], capsys)
        checks = by_check(doc)
        assert code == 1
        # a package installed at another version also says what the installed
        # distributions require of it (#42); a missing one is said as before
        assert checks["package numpy"]["cause"] == "numpy 1.26.4 is locked but not installed"
        assert checks["package protobuf"]["cause"].startswith(
            "protobuf 5.26.1 is installed; the lock has 4.25.9; "
        )
        assert "tensorflow 2.15.1 requires protobuf" in checks["package protobuf"]["cause"]
        assert "requirements" not in checks  # no PASS over what was unmet
        assert checks["tensorflow import"]["status"] == "FAIL"  # numpy is gone
        # without the lock, the venv against itself names both too
        code, doc = doctor(["--venv", str(tf_venv), "--allow-cpu"], capsys)
        checks = by_check(doc)
        assert code == 1
        assert "numpy is not installed" in checks["requirement numpy"]["cause"]
        assert "protobuf 5.26.1 is installed" in checks["requirement protobuf"]["cause"]
    finally:
        pip(tf_venv, "install", "--no-deps", "numpy==1.26.4", "protobuf==4.25.9")


@pytest.mark.slow
@pytest.mark.network
def test_real_tf_venv_deep_finds_an_edited_file(
    tf_venv: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = next((tf_venv / "lib").glob("python3.*/site-packages"))
    victim = site / "six.py"
    original = victim.read_bytes()
    # edited as an editor saves (a new file renamed over it): the venv's files are
    # hard links into the run's uv cache (venv_support), which an edit in place
    # would change for every other venv made from it
    replace_file(victim, original + b"\n# edited\n")
    try:
        code, doc = doctor(["--venv", str(tf_venv), "--allow-cpu", "--deep"], capsys)
    finally:
        replace_file(victim, original)
    files = by_check(doc)["files of six"]
    assert files["status"] == "FAIL" and "six.py (changed)" in files["cause"]
    assert code == 1


@pytest.fixture
def no_driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No NVIDIA driver on this machine: neither NVML nor nvidia-smi."""
    monkeypatch.setattr("envlock.driver.NVML_LIBRARY", "libnvidia-ml-absent.so.1")
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


def test_a_driver_change_is_rehearsed_with_driver_and_gpu(
    no_driver: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """#42: the platform will move the T4 host from driver 470 to 535; doctor answers
    for each driver as if the host had it, with no driver here at all, and the lock
    command it prints repeats the rehearsed driver and GPU (not --driver auto, which
    would read this machine)."""
    argv = ["--lock", str(LOCK_DIR), "--venv", sys.executable]
    code, doc = doctor([*argv, "--driver", "470.57.02", "--gpu", "T4"], capsys)
    assert code == 1
    assert doc["host"] == {
        "driver": "470.57.02",
        "source": "--driver",
        "gpus": [{"name": "T4", "compute_capability": "7.5"}],
    }
    checks = by_check(doc)
    assert checks["driver"]["status"] == "FAIL"
    assert checks["driver"]["cause"].startswith(
        "driver 470.57.02 (--driver) is older than 525.60.13, which tensorflow 2.15.1 "
        "(CUDA 12.2) needs here"
    )
    (alternative,) = checks["driver"]["alternatives"]
    assert alternative == (
        f"envlock lock tensorflow==2.14.1 --driver 470.57.02 --gpu T4 "
        f"-o {LOCK_DIR}-tensorflow2.14.1"
    )
    assert checks["rehearsal"]["status"] == "INFO"
    assert "tensorflow gpus" not in checks  # the probe ran on this machine, not the T4
    # the printed lock command's flags resolve the release doctor named, as printed
    resolve_argv = alternative.split()[2:-2]  # tensorflow==2.14.1 --driver ... --gpu T4
    assert main(["resolve", *resolve_argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["version"] == "2.14.1"
    # after the platform's upgrade to 535: the driver passes
    code, doc = doctor([*argv, "--driver", "535.104.05", "--gpu", "T4"], capsys)
    driver = by_check(doc)["driver"]
    assert driver["status"] == "PASS"
    assert driver["cause"].startswith("driver 535.104.05 (--driver) >= 525.60.13")


def test_a_rehearsed_gpu_gets_its_verdict(
    no_driver: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """An H100 (9.0) against the TF 2.15 lock: no kernels compiled for it, as resolve
    --gpu H100 says."""
    code, doc = doctor(
        ["--lock", str(LOCK_DIR), "--venv", sys.executable, "--driver", "550.54.15"]
        + ["--gpu", "H100", "--allow-cpu"],
        capsys,
    )
    gpu = by_check(doc)["gpu 0"]
    assert gpu["status"] in ("WARN", "FAIL") and "9.0" in gpu["cause"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--driver", "banana"], "--driver 'banana' is not a driver version"),
        (["--driver", "535.104.05", "--gpu", "NoSuchGPU"], "is not a GPU envlock knows"),
        (["--gpu", "T4"], "--gpu: no NVIDIA driver on this machine"),
        (["--driver", "535.104.05", "--gpu", "auto"], "--gpu auto: no NVIDIA driver"),
    ],
)
def test_bad_rehearsal_flags_exit_2_with_a_hint(
    no_driver: None, flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["doctor", "--lock", str(LOCK_DIR), "--venv", sys.executable, *flags])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and "hint" in err.lower() and "Traceback" not in err
