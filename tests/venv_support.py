"""Venvs for the tests: real TensorFlow ones for tests that need one but do not
test pip, and venvs holding a tool (pipenv, tox, pipx, PDM, a newer pip).

Each is seeded as ``python -m venv`` seeds one (the interpreter's own pip, and
setuptools before 3.12) by envlock.venv.restore.create_venv, which takes
~0.6 s where ensurepip takes ~5 s; what goes in after is installed by uv from
the index of the user's configuration (envlock.index.config.index_url), not by
pip (~10x the CPU here), unless pip is what a test checks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from envlock.index.config import index_url
from envlock.lock.uv import uv_bin


def make_tf215_venv(venv: Path, uv_cache: Path, *also: str) -> Path:
    """A venv with tensorflow==2.15.1 (and ``also``) from the index of the user's
    configuration: ``python -m venv`` unless ``venv`` is already one (so pip is
    there: doctor's fixes and the tests run pip in it), then ``uv pip install``
    from ``uv_cache``. Files are hard links into the cache (uv's default where both
    lie on one file system; copying the 1.7 GB took ~18 s a venv under load): a
    test may remove, add or replace files in the venv (pip does), never write into
    one in place (test_doctor_cli's edit renames a new file over the old)."""
    if not (venv / "bin" / "python").exists():
        seeded_venv(venv)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(uv_bin()), "pip", "install", "-q", "--python", str(python), "--link-mode", "hardlink"]
        + ["--index-url", index_url(None), "tensorflow==2.15.1", *also],
        env={**os.environ, "UV_CACHE_DIR": str(uv_cache), "UV_SYSTEM_CERTS": "1"},
        check=True,
        timeout=1200,
    )
    return venv


def seeded_venv(venv: Path, python: str = sys.executable) -> Path:
    """``python -m venv VENV``, the same pip in it (envlock restore's way)."""
    from envlock.venv.restore import create_venv

    create_venv(python, venv)
    return venv


def tool_venv(venv: Path, *requirements: str) -> Path:
    """A seeded venv with ``requirements`` installed by uv from the configured index;
    returns its bin/ folder."""
    seeded_venv(venv)
    subprocess.run(
        [str(uv_bin()), "pip", "install", "-q", "--python", str(venv / "bin" / "python")]
        + ["--index-url", index_url(None), *requirements],
        env={**os.environ, "UV_SYSTEM_CERTS": "1"},
        check=True,
        capture_output=True,
        timeout=1200,
    )
    return venv / "bin"
