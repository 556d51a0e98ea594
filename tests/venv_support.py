"""Real TensorFlow venvs for the tests that need one but do not test pip."""

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
    from ``uv_cache``. Files are copied, not linked, out of the cache: tests
    edit files in the venv."""
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(uv_bin()), "pip", "install", "-q", "--python", str(python), "--link-mode", "copy"]
        + ["--index-url", index_url(None), "tensorflow==2.15.1", *also],
        env={**os.environ, "UV_CACHE_DIR": str(uv_cache), "UV_SYSTEM_CERTS": "1"},
        check=True,
        timeout=1200,
    )
    return venv
