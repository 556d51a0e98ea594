"""The lock installs for real: TensorFlow 2.15 (system CUDA source) on this machine.

One bundle and one pip venv for the whole module (TensorFlow takes ~30 s to
install here): pip installs requirements.txt with --require-hashes --no-deps,
TensorFlow imports and its build_info says CUDA 12.2; one changed hash makes
pip refuse; uv installs pylock.toml into a second venv with exactly the
locked versions.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from venv_support import seeded_venv

from envlock.cli import main
from envlock.lock import read_lock
from envlock.lock.uv import uv_bin

pytestmark = [pytest.mark.network, pytest.mark.slow]

HERE_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


def run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=1200, **kw)  # type: ignore[call-overload, no-any-return]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if HERE_PYTHON not in ("3.9", "3.10", "3.11"):  # TensorFlow 2.15's wheels
        pytest.skip(f"TensorFlow 2.15 has no wheel for this interpreter's Python {HERE_PYTHON}")
    out = tmp_path_factory.mktemp("bundle")
    # the lock is for this interpreter's Python (resolve's default is the image Ubuntu's)
    argv = ["lock", "tensorflow==2.15", "--cuda-source", "system", "--python", HERE_PYTHON]
    assert main([*argv, "-o", str(out), "--json"]) == 0
    assert read_lock(out).resolution.python == HERE_PYTHON
    return out


@pytest.fixture(scope="module")
def pip_venv(bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("pip-venv") / "venv"
    seeded_venv(venv)  # python -m venv's pip, seeded in a fraction of ensurepip's time
    py = venv / "bin" / "python"
    inst = run(
        [
            str(py),
            "-m",
            "pip",
            "install",
            "--require-hashes",
            "--no-deps",
            "-r",
            str(bundle / "requirements.txt"),
        ]
    )
    assert inst.returncode == 0, inst.stdout[-3000:] + inst.stderr[-3000:]
    return venv


def test_pip_installs_the_hashed_requirements_and_tensorflow_runs(
    bundle: Path, pip_venv: Path
) -> None:
    probe = (
        "import json, tensorflow as tf; "
        "print(json.dumps({'version': tf.__version__, "
        "'cuda': tf.sysconfig.get_build_info()['cuda_version'], "
        "'sum': float(tf.reduce_sum(tf.ones([3, 3])))}))"
    )
    out = run(
        [str(pip_venv / "bin" / "python"), "-c", probe],
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    info = json.loads(out.stdout.strip().splitlines()[-1])
    assert info == {"version": "2.15.1", "cuda": "12.2", "sum": 9.0}
    # exactly the locked versions, nothing more
    frozen = run([str(pip_venv / "bin" / "python"), "-m", "pip", "freeze", "--all"])
    got = {
        line.split("==")[0].lower().replace("_", "-"): line.split("==")[1]
        for line in frozen.stdout.splitlines()
        if "==" in line
    }
    locked = {p.name: p.version for p in read_lock(bundle).packages}
    assert {k: v for k, v in got.items() if k not in ("pip", "setuptools")} == {
        k: v for k, v in locked.items() if k not in ("pip", "setuptools")
    }


def test_pip_refuses_a_changed_hash(bundle: Path, pip_venv: Path, tmp_path: Path) -> None:
    """requirements.txt cut to its six entry, with a changed hash: pip refuses it
    as it would in the whole file (with the whole file pip first fetched and
    hashed TensorFlow's ~500 MB: 21 s of the module in a suite run)."""
    text = (bundle / "requirements.txt").read_text(encoding="utf-8")
    m = re.search(r"^six==\S+ \\\n    --hash=sha256:([0-9a-f]{64})\n", text, re.MULTILINE)
    assert m, "six is in the TensorFlow closure"
    good = m.group(1)
    bad = good[:-1] + ("0" if good[-1] != "0" else "1")
    tampered = tmp_path / "requirements.txt"
    tampered.write_text(m.group(0).replace(good, bad), encoding="utf-8")
    out = run(
        [
            str(pip_venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--require-hashes",
            "--no-deps",
            "--target",
            str(tmp_path / "t"),
            "-r",
            str(tampered),
        ]
    )
    assert out.returncode != 0
    assert "DO NOT MATCH THE HASHES" in out.stderr
    assert re.search(rf"six==\S+ from .*\n\s+Expected sha256 {bad}\n\s+Got\s+{good}", out.stderr)


def test_uv_installs_the_pylock(bundle: Path, tmp_path: Path, shared_uv_cache: Path) -> None:
    """uv installs pylock.toml, through the run's shared uv cache (what is tested is
    the lock, not the cache: a cache of its own unpacked TensorFlow once more)."""
    uv = uv_bin()
    venv = tmp_path / "uv-venv"
    made = run([uv, "venv", "--no-config", "--python", sys.executable, str(venv)])
    assert made.returncode == 0, made.stderr
    py = str(venv / "bin" / "python")
    inst = run(
        [
            uv,
            "pip",
            "install",
            "--no-config",
            "--system-certs",
            "--python",
            py,
            "-r",
            str(bundle / "pylock.toml"),
        ],
        env={**os.environ, "UV_CACHE_DIR": str(shared_uv_cache)},
    )
    assert inst.returncode == 0, inst.stderr[-3000:]
    frozen = run([uv, "pip", "freeze", "--python", py])
    got = dict(line.split("==") for line in frozen.stdout.splitlines() if "==" in line)
    assert got == {p.name: p.version for p in read_lock(bundle).packages}
