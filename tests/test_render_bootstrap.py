"""The rendered bootstrap.sh, run for real: TF 2.15 from the real index into a
fresh venv on this CPU-only machine, twice, then without --allow-cpu; the
bundle's envlock_runtime.apply() against the TensorFlow it installed; and drift
(numpy removed, protobuf moved) that envlock doctor names and a rerun repairs.
The tests share one venv (bundle/venv): each makes it when run alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from report_support import run_cli
from test_bootstrap_drift import installed

from envlock.cli import main

REPO = Path(__file__).resolve().parent.parent
CASE = REPO / "tests" / "golden" / "render" / "tf2.15-system"
SMOKE_OUTPUTS = {"envlock-smoke.json", "envlock-smoke.log"}

pytestmark = [pytest.mark.network, pytest.mark.slow]


def snapshot(venv: Path) -> dict[str, tuple[int, int]]:
    """Every file of the venv with size and mtime, except the smoke run's own outputs."""
    out = {}
    for path in venv.rglob("*"):
        rel = path.relative_to(venv).as_posix()
        if path.is_file() and rel not in SMOKE_OUTPUTS:
            st = path.lstat()
            out[rel] = (st.st_size, st.st_mtime_ns)
    return out


def bootstrap(bundle: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    return subprocess.run(
        ["bash", str(bundle / "bootstrap.sh"), *args],
        capture_output=True,
        text=True,
        timeout=1200,
        env=env,
        cwd=bundle,
    )


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not shutil.which("python3.11"):
        pytest.skip("no python3.11 on this machine")
    folder = tmp_path_factory.mktemp("tf215")
    for name in ("pylock.toml", "requirements.txt"):
        shutil.copy(CASE / name, folder / name)
    assert main(["render", str(folder)]) == 0
    assert (folder / "bootstrap.sh").read_text() == (CASE / "expected" / "bootstrap.sh").read_text()
    return folder


def test_bootstrap_twice_then_without_allow_cpu(bundle: Path) -> None:
    venv = bundle / "venv"
    first = bootstrap(bundle, "--allow-cpu", "--venv", str(venv))
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    said = [line for line in first.stdout.splitlines() if line.startswith("bootstrap: ")]
    assert re.fullmatch(
        rf"bootstrap: created the venv {re.escape(str(venv))} with \S+ \(Python 3\.11\.\d+\)",
        said[0],
    ), said[0]
    assert "bootstrap: installing 42 locked packages: pip install --require-hashes --no-deps" in (
        first.stdout
    )
    assert "Successfully installed" in first.stdout and "tensorflow-2.15.1" in first.stdout
    assert "bootstrap: smoke test WARNED" in said
    assert said[-1].startswith(f"bootstrap: done: {venv} is ready")
    report = json.loads((venv / "envlock-smoke.json").read_text())
    assert report["status"] == "WARNED" and report["version"] == "2.15.1"
    checks = {c["name"]: c["status"] for c in report["checks"]}
    assert checks["framework_version"] == "PASS" and checks["build_cuda"] == "PASS"
    assert checks["gpu_visible"] == "WARN"
    assert report["settings"]["runtime_config"] == str(bundle / "runtime.json")
    stamp = (venv / ".envlock-requirements.sha256").read_text().strip()
    assert stamp == hashlib.sha256((bundle / "requirements.txt").read_bytes()).hexdigest()
    before = snapshot(venv)

    second = bootstrap(bundle, "--allow-cpu", "--venv", str(venv))
    assert second.returncode == 0, second.stdout + second.stderr
    lines = second.stdout.splitlines()
    assert re.fullmatch(
        rf"bootstrap: using the existing venv {re.escape(str(venv))} \(Python 3\.11\.\d+\)",
        lines[0],
    ), lines[0]
    assert lines[1] == (
        f"bootstrap: requirements.txt unchanged since the last install (sha256 {stamp[:16]}...) "
        "and every locked package installed as locked: nothing to install"
    )
    assert "installing" not in second.stdout and "Successfully installed" not in second.stdout
    assert "bootstrap: smoke test WARNED" in lines
    assert snapshot(venv) == before, "the second run changed the venv"

    strict = bootstrap(bundle, "--venv", str(venv))
    assert strict.returncode == 1, strict.stdout + strict.stderr
    assert "bootstrap: smoke test FAILED" in strict.stdout
    assert "  FAIL  gpu_visible: " in strict.stdout
    assert snapshot(venv) == before


def bootstrapped(bundle: Path) -> Path:
    """bundle/venv, made by bootstrap.sh unless an earlier test made it."""
    venv = bundle / "venv"
    if not (venv / ".envlock-requirements.sha256").is_file():
        result = bootstrap(bundle, "--allow-cpu", "--no-smoke", "--venv", str(venv))
        assert result.returncode == 0, result.stdout + result.stderr
    return venv


def test_runtime_settings_apply_in_the_bootstrapped_venv(bundle: Path) -> None:
    venv = bootstrapped(bundle)
    config = bundle / "mine.json"
    config.write_text(
        json.dumps(
            {
                "schema": "envlock.runtime/v1",
                "visible_devices": "",
                "memory_growth": True,
                "mixed_precision": "mixed_float16",
                "determinism": True,
                "seed": 7,
            }
        )
    )
    code = (
        "import json, envlock_runtime\n"
        "done = envlock_runtime.apply()\n"
        "import tensorflow as tf\n"
        "a = tf.random.uniform([3]).numpy().tolist()\n"
        "print(json.dumps({'done': done, 'active': envlock_runtime.active(), 'a': a}))\n"
    )
    env = dict(os.environ, ENVLOCK_RUNTIME_CONFIG=str(config), TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    runs = []
    for _ in range(2):
        out = subprocess.run(
            [str(venv / "bin" / "python"), "-c", code],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            cwd="/",
        )
        assert out.returncode == 0, out.stderr[-3000:]
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    first = runs[0]
    assert first["done"]["source"] == str(config)
    assert first["done"]["applied"] == {
        "visible_devices": "",
        "memory_growth": [],
        "mixed_precision": "mixed_float16",
        "determinism": True,
        "seed": 7,
    }
    assert first["done"]["errors"] == []
    active = first["active"]
    assert active["cuda_visible_devices"] == ""
    assert active["mixed_precision"] == "mixed_float16"
    assert active["determinism"] is True
    assert active["gpus"] == []
    # the seed makes TensorFlow's random numbers repeat from one process to the next
    assert runs[0]["a"] == runs[1]["a"]


def locked_versions(bundle: Path) -> dict[str, str]:
    return {
        line.split("==")[0]: line.split("==")[1].split()[0]
        for line in (bundle / "requirements.txt").read_text(encoding="utf-8").splitlines()
        if "==" in line and not line.startswith("#")
    }


def doctor(bundle: Path, venv: Path) -> tuple[int, dict[str, dict[str, str]]]:
    """envlock doctor --lock BUNDLE --venv VENV --allow-cpu: (exit, findings by check)."""
    code, out, err = run_cli(
        "doctor", "--lock", str(bundle), "--venv", str(venv), "--allow-cpu", "--json"
    )
    assert "Traceback" not in err, err
    return code, {f["check"]: f for f in json.loads(out)["findings"]}


def test_drift_doctor_names_it_a_rerun_repairs_it_doctor_passes(bundle: Path) -> None:
    """numpy removed and protobuf moved: doctor names both (exit 1); bootstrap.sh run
    again reinstalls the locked versions (smoke test included); doctor passes (exit 0)."""
    venv = bootstrapped(bundle)
    locked = locked_versions(bundle)
    assert installed(venv, skip=("pip",)) == locked
    code, checks = doctor(bundle, venv)
    assert checks["packages"]["status"] == "PASS" and code == 0, checks

    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    other = "4.25.0" if locked["protobuf"] != "4.25.0" else "4.24.4"
    subprocess.run([*pip, "uninstall", "-y", "numpy"], check=True, timeout=300)
    subprocess.run([*pip, "install", "--no-deps", f"protobuf=={other}"], check=True, timeout=600)

    code, checks = doctor(bundle, venv)
    assert code == 1, checks
    assert checks["package numpy"]["status"] == "FAIL"
    assert checks["package numpy"]["cause"] == (
        f"numpy {locked['numpy']} is locked but not installed"
    )
    assert checks["package protobuf"]["status"] == "FAIL"
    assert checks["package protobuf"]["cause"] == (
        f"protobuf {other} is installed; the lock has {locked['protobuf']}"
    )
    assert checks["tensorflow import"]["status"] == "FAIL"  # numpy is gone

    repair = bootstrap(bundle, "--allow-cpu", "--venv", str(venv))
    assert repair.returncode == 0, repair.stdout + repair.stderr
    lines = repair.stdout.splitlines()
    at = lines.index(
        "bootstrap: the venv differs from the lock (2 packages); "
        "installing the locked versions again:"
    )
    assert lines[at + 1 : at + 3] == [
        f"  numpy {locked['numpy']}: missing",
        f"  protobuf {locked['protobuf']}: {other} installed",
    ]
    assert "bootstrap: smoke test WARNED" in lines  # CPU only: no GPU is a warning
    assert installed(venv, skip=("pip",)) == locked

    code, checks = doctor(bundle, venv)
    assert "package numpy" not in checks and "package protobuf" not in checks
    assert checks["packages"] == {
        "check": "packages",
        "status": "PASS",
        "cause": f"all {len(locked)} locked distributions at their versions",
        "fix": "",
        "manual": False,
    }
    assert checks["tensorflow version"]["cause"] == "tensorflow 2.15.1 imports"
    assert code == 0, checks
