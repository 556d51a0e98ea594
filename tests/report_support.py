"""Shared helpers for the report tests (tests/test_report*.py)."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

from envlock.cli import main
from envlock.report import keys

# A smoke result shaped as docs/contracts.md says the harness prints it. It is
# input to the signer, not an expected output.
SMOKE_RESULT: dict[str, Any] = {
    "schema": "envlock.smoke/v1",
    "status": "PASSED",
    "framework": "tensorflow",
    "version": "2.15.1",
    "expected": {"framework": "tensorflow", "version": "2.15.1", "cuda": "12.2", "cudnn": "8.9"},
    "build_info": {"cuda_version": "12.2", "cudnn_version": "8"},
    "gpus": [
        {
            "name": "NVIDIA H100 80GB HBM3",
            "compute_capability": "9.0",
            "memory_total_mb": 81559,
            "driver": "550.54.15",
        }
    ],
    "checks": [
        {"name": "framework_version", "status": "PASS", "reason": "2.15.1"},
        {"name": "build_cuda", "status": "PASS", "reason": "12.2"},
        {"name": "gpu_visible", "status": "PASS", "reason": "1 GPU"},
        {"name": "op_on_gpu", "status": "PASS", "reason": "MatMul on /GPU:0"},
    ],
    "benchmark": {"matmul": {"fp32_tflops": 48.1, "fp16_tflops": 610.0}},
    "settings": {},
    "host": {"hostname": "gpu-1"},
    "duration_s": 12.5,
}


def smoke_result(status: str = "PASSED", **failing: str) -> dict[str, Any]:
    """A copy of SMOKE_RESULT with ``status``; ``failing`` maps check -> FAIL/WARN."""
    result = copy.deepcopy(SMOKE_RESULT)
    result["status"] = status
    for check in result["checks"]:
        if check["name"] in failing:
            check["status"] = failing[check["name"]]
    return result


def make_keys(tmp: Path, name: str = "key", key_type: str = "ecdsa-p256") -> tuple[Path, Path]:
    pair = keys.write_keypair(tmp / name, key_type)
    return pair.private_path, pair.public_path


def make_bundle(tmp: Path, name: str = "bundle") -> Path:
    """A bundle folder with the three files a report pins (content varies by name)."""
    d = tmp / name
    d.mkdir()
    (d / "pylock.toml").write_text(f'lock-version = "1.0"\n# {name}\n')
    (d / "requirements.txt").write_text(f"tensorflow==2.15.1 \\\n    --hash=sha256:{'0' * 64}\n")
    (d / "Dockerfile").write_text("ARG BASE_IMAGE=scratch\nFROM ${BASE_IMAGE}\n")
    return d


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def decode(envelope: dict[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(base64.b64decode(envelope["payload"]))
    return doc


def cli(capsys: Any, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err
