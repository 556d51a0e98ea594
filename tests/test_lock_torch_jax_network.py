"""Issue 43 against the real package index: torch and JAX locked and checked, and
their matrices current.

The index comes from this machine's pip/uv configuration; nothing here names an
index host. ``lock`` resolves from the index's metadata and hashes what the
index states: the torch wheels (hundreds of MB each) are never downloaded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from envlock.cli import main

pytestmark = pytest.mark.network


def _lock(capsys: pytest.CaptureFixture[str], spec: str, out: Path) -> dict[str, Any]:
    assert main(["lock", spec, "-o", str(out), "--json"]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


def _versions(data: dict[str, Any]) -> dict[str, str]:
    return {p["name"]: p["version"] for p in data["packages"]}


def test_lock_torch_2_11_and_check(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = _lock(capsys, "torch==2.11", tmp_path)
    assert data["top_requirements"] == ["torch==2.11.0"]  # no extra: the wheel names its CUDA
    res = data["resolution"]
    assert (res["framework"], res["version"], res["cuda"], res["cuda_source"]) == (
        "torch",
        "2.11.0",
        "13.0",
        "pip",
    )
    versions = _versions(data)
    # the pins torch 2.11.0's Requires-Dist names, as matrices/torch.toml recorded them
    assert versions["torch"] == "2.11.0"
    assert versions["nvidia-cudnn-cu13"] == "9.19.0.56"
    assert versions["nvidia-nccl-cu13"] == "2.28.9"
    assert not any(name.endswith("-cu12") for name in versions)
    text = (tmp_path / "requirements.txt").read_text(encoding="utf-8")
    assert "torch==2.11.0 \\\n" in text and "--hash=sha256:" in text

    assert main(["lock", "--check", str(tmp_path)]) == 0
    assert "the lock is current" in capsys.readouterr().out


def test_lock_jax_cuda12_and_check(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = _lock(capsys, "jax[cuda12]==0.11.2", tmp_path)
    assert data["top_requirements"] == ["jax[cuda12]", "jax-cuda12-plugin[with-cuda]==0.11.2"]
    versions = _versions(data)
    assert versions["jax"] == "0.11.2"
    assert versions["jax-cuda12-plugin"] == "0.11.2"
    assert versions["jax-cuda12-pjrt"] == "0.11.2"
    assert versions["nvidia-cudnn-cu12"].startswith("9.")
    assert main(["lock", "--check", str(tmp_path)]) == 0
    assert "the lock is current" in capsys.readouterr().out


@pytest.mark.parametrize("project", ["torch", "jax"])
def test_matrix_refresh_check_is_current(project: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["matrix", "refresh", "--project", project, "--check"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.startswith("current: ") and f"every {project} release and CUDA build" in out
