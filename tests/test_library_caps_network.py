"""Per-GPU library caps (issue 26) against the real package index: a lock of
tensorflow[and-cuda]==2.21.0 for a V100 pins a cuDNN that libraries.toml says
runs on Volta, with the source in the why line; the same lock without --gpu
warns and names the GPUs. The index comes from this machine's pip/uv
configuration; nothing here names an index host.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from envlock.cli import main
from envlock.lock import read_lock
from envlock.matrix import libraries

pytestmark = pytest.mark.network

SPEC = "tensorflow[and-cuda]==2.21.0"


def _cudnn(folder: Path) -> str:
    return {p.name: p.version for p in read_lock(folder).packages}["nvidia-cudnn-cu12"]


def test_lock_for_v100_caps_cudnn_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "v100"
    assert main(["lock", SPEC, "--gpu", "V100", "-o", str(out)]) == 0
    stdout, stderr = capsys.readouterr()
    got = _cudnn(out)
    volta = next(c for c in libraries.load().caps if c.versions == ">=9.11")
    assert volta.on_gpu("7.0") and not volta.affects(got), got
    assert Version(got) >= Version("9.3.0.75")  # still inside the release's and-cuda range
    assert not got.startswith("9.5.")  # nor in the XLA range of 2.21.0
    why = libraries.cap_reasons(read_lock(out).resolution.reasons)
    assert why[0].startswith("nvidia-cudnn-cu12<9.11 for V100 (compute capability 7.0): ")
    assert "https://github.com/conda-forge/tensorflow-feedstock/pull/457" in why[0]
    assert f"why: {why[0]}\n" in stdout
    # the verified 9.24.0.43 is above the Volta cap: the lock says its result is unverified
    assert f"envlock: warning: unverified: nvidia-cudnn-cu12 {got} " in stderr
    # --check derives the caps again from the recorded GPU
    assert main(["lock", "--check", str(out)]) == 0
    assert "the lock is current" in capsys.readouterr().out


def test_lock_without_gpu_warns_naming_the_gpus(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "any"
    assert main(["lock", SPEC, "-o", str(out)]) == 0
    _stdout, stderr = capsys.readouterr()
    got = _cudnn(out)
    assert Version(got) >= Version("9.11")  # the newest cuDNN 9: no device code for Volta
    assert f"envlock: warning: nvidia-cudnn-cu12 {got} is in >=9.11, which does not work on " in (
        stderr
    )
    assert "V100" in stderr and "P100" in stderr
    assert any(w.startswith("nvidia-cudnn-cu12 ") for w in read_lock(out).resolution.warnings)
