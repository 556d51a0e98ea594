"""capture of a real TensorFlow 2.15 venv, and ``lock -r`` of its ``pip freeze``.

The venv is made once per session from the configured index (pip in it, the
wheels through the run's shared uv cache); ENVLOCK_TF215_VENV names an
existing one to reuse.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from report_support import run_cli
from venv_support import make_tf215_venv

pytestmark = [pytest.mark.network, pytest.mark.slow]


@pytest.fixture(scope="session")
def tf_venv(tmp_path_factory: pytest.TempPathFactory, shared_uv_cache: Path) -> Path:
    given = os.environ.get("ENVLOCK_TF215_VENV")
    if given:
        return Path(given)
    return make_tf215_venv(tmp_path_factory.mktemp("tf215") / "venv", shared_uv_cache)


def _pip_list(venv: Path) -> str:
    return subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "list", "--format=json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def installed(venv: Path) -> dict[str, str]:
    out = _pip_list(venv)
    skip = {"pip", "setuptools", "wheel"}
    return {
        d["name"].lower().replace("_", "-"): d["version"]
        for d in json.loads(out)
        if d["name"].lower() not in skip
    }


def test_capture_locks_the_same_versions(tf_venv: Path, tmp_path: Path) -> None:
    out = tmp_path / "env"
    code, stdout, err = run_cli("capture", "--venv", str(tf_venv), "-o", str(out), "--json")
    assert code == 0, err
    data = json.loads(stdout)
    locked = {p["name"]: p["version"] for p in data["packages"]}
    have = installed(tf_venv)
    assert have["tensorflow"] == "2.15.1"
    assert {name: locked.get(name) for name in have} == have
    assert data["differs"] == []
    assert data["captured"]["build_info"]["is_cuda_build"] is True
    assert data["captured"]["build_info"]["cuda_version"] == "12.2"
    assert (out / "requirements.txt").is_file() and (out / "bootstrap.sh").is_file()
    # the venv's tools are locked as installed, and doctor passes the untouched venv
    tools = {d["name"]: d["version"] for d in json.loads(_pip_list(tf_venv))}
    assert locked["setuptools"] == tools["setuptools"] and locked["pip"] == tools["pip"]
    code, stdout, err = run_cli(
        "doctor", "--venv", str(tf_venv), "--lock", str(out), "--allow-cpu", "--json"
    )
    failing = [f for f in json.loads(stdout)["findings"] if f["status"] == "FAIL"]
    assert code == 0 and failing == [], failing


def test_lock_r_of_the_venvs_pip_freeze(tf_venv: Path, tmp_path: Path) -> None:
    freeze = tmp_path / "freeze.txt"
    frozen = subprocess.run(
        [str(tf_venv / "bin" / "python"), "-m", "pip", "freeze"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    freeze.write_text(frozen, encoding="utf-8")
    assert "tensorflow==2.15.1" in frozen.splitlines()
    out = tmp_path / "env"
    # a freeze does not say which Python it came from: give the venv's, as the hint of
    # a lock at resolve's default Python says when a pin needs a newer one
    ask = "import sys; print('%d.%d' % sys.version_info[:2])"
    minor = subprocess.run(
        [str(tf_venv / "bin" / "python"), "-c", ask],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    code, stdout, err = run_cli(
        "lock", "tensorflow==2.15.1", "-r", str(freeze), "-o", str(out), "--json",
        "--python", minor,
    )  # fmt: skip
    assert code == 0, err
    assert "tensorflow==2.15.1 agrees with SPEC (tensorflow 2.15.1)" in err
    locked = {p["name"]: p["version"] for p in json.loads(stdout)["packages"]}
    have = installed(tf_venv)
    assert {name: locked.get(name) for name in have} == have
    # a freeze naming another release: the conflict is named, exit 2
    freeze.write_text(frozen.replace("tensorflow==2.15.1", "tensorflow==2.14.1"), encoding="utf-8")
    code, _, err = run_cli("lock", "tensorflow==2.15.1", "-r", str(freeze), "-o", str(out))
    assert code == 2
    assert f"-r {freeze}: 'tensorflow==2.14.1' conflicts with SPEC, which resolved to " in err
    assert "tensorflow 2.15.1" in err and "Traceback" not in err
