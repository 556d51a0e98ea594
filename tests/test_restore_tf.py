"""envlock restore of real TensorFlow 2.15.1 (CPU), from a wheelhouse: numpy
removed and protobuf moved in the venv are put back, the real smoke harness
runs, and a restore killed (SIGKILL) while it installs or smoke-tests leaves
the working venv in place.

A module of its own (it was test_restore.py's last test): with --dist loadfile
a module runs on one worker, and this test (79-275 s in full suite runs here)
at the end of test_restore.py's other restores left that worker running alone
for the last four minutes of the suite.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_bootstrap_drift import installed

from envlock.cli import main


def tf_version(py: str) -> str:
    """tf.__version__ as the venv's interpreter imports it (fails if it cannot)."""
    ok = subprocess.run(
        [py, "-c", "import tensorflow as tf; print(tf.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    return ok.stdout.strip()


@pytest.mark.slow
@pytest.mark.network
def test_restore_of_real_tensorflow_repairs_numpy_removed_and_protobuf_moved(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """TensorFlow 2.15.1 locked against the configured index, restored from a
    wheelhouse; numpy removed and protobuf moved in the venv; restore (the real
    smoke harness, CPU) gives back the locked versions and TF imports."""
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    bundle = tmp_path / "tf215"
    assert main(["lock", "tensorflow==2.15", "--python", "3.11", "-o", str(bundle)]) == 0
    wh = tmp_path / "wh"
    assert main(["wheelhouse", str(bundle), "-o", str(wh)]) == 0
    venv = tmp_path / "venv"
    base = ["restore", str(bundle), "--venv", str(venv), "--wheelhouse", str(wh), "--allow-cpu"]
    assert main(base) == 0
    capsys.readouterr()
    locked = {
        line.split("==")[0]: line.split("==")[1].split()[0]
        for line in (bundle / "requirements.txt").read_text(encoding="utf-8").splitlines()
        if "==" in line and not line.startswith("#")
    }
    py = str(venv / "bin" / "python")
    subprocess.run([py, "-m", "pip", "uninstall", "-y", "-q", "numpy"], check=True)
    other = "4.25.0" if locked["protobuf"] != "4.25.0" else "4.24.4"
    subprocess.run(
        [py, "-m", "pip", "install", "-q", "--no-deps", f"protobuf=={other}"], check=True
    )
    broken = subprocess.run([py, "-c", "import tensorflow"], capture_output=True, text=True)
    assert broken.returncode != 0
    assert main([*base, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["added"] == [["numpy", locked["numpy"]]]
    assert doc["changed"] == [["protobuf", other, locked["protobuf"]]]
    assert doc["removed"] == [] and doc["smoke"] in ("PASSED", "WARNED")
    got = installed(venv)
    assert got["numpy"] == locked["numpy"] and got["protobuf"] == locked["protobuf"]
    assert tf_version(py) == locked["tensorflow"]
    # kill -9 while the next restore installs, and while it runs the smoke test
    before = os.readlink(venv)
    argv = [sys.executable, "-m", "envlock", *base]
    for stage in ("installing the lock", "running the smoke test"):
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        assert proc.stderr is not None
        for line in proc.stderr:
            if stage in line:
                break
        time.sleep(1.5)
        assert proc.poll() is None, f"restore ended before the kill ({stage})"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()
        proc.stderr.close()
        assert os.readlink(venv) == before
        assert tf_version(py) == locked["tensorflow"]
