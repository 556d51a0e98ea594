"""The harness on a real GPU, with every framework this interpreter has.

Skipped without an NVIDIA GPU (nvidia-smi). On a GPU host each importable
framework must see the GPU, run an op on GPU 0 and give a benchmark as a
fraction of the datasheet peak (from the gpus matrix) when the GPU is listed
there, and compile a small function with its compiler (the xla check).
docs/gpu-run.md records such a run on an H200.
"""

from __future__ import annotations

import importlib.util
import subprocess
from typing import Any

import pytest

from envlock.smoke import runner

pytestmark = pytest.mark.gpu

FRAMEWORKS = [f for f in ("tensorflow", "torch", "jax") if importlib.util.find_spec(f) is not None]


def smi_names() -> list[str]:
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def checks(result: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["name"]: (c["status"], c["reason"]) for c in result["checks"]}


NONE = pytest.param(None, marks=pytest.mark.skip(reason="no tensorflow, torch or jax here"))


@pytest.mark.parametrize("framework", FRAMEWORKS or [NONE])
def test_framework_uses_the_gpu(framework: str) -> None:
    result = runner.run_on_host(framework, None, False, size=4096)
    got = checks(result)
    assert result["status"] in ("PASSED", "WARNED"), got
    assert got["gpu_visible"][0] == "PASS"
    assert got["op_on_gpu"][0] == "PASS"
    assert got["cudnn_runtime"][0] in ("PASS", "WARN")
    # XLA (jax.jit, tf.function(jit_compile=True)) must work on the GPU; torch.compile
    # may warn (no Triton, no C++ compiler) but never crash the run
    xla = next(c for c in result["checks"] if c["name"] == "xla")
    assert xla["status"] in (("PASS", "WARN") if framework == "torch" else ("PASS",)), xla
    if xla["status"] == "PASS":
        assert "0" in xla["xla"]["device"] and "cpu" not in xla["xla"]["device"].lower()
        assert xla["xla"]["max_difference"] <= xla["xla"]["tolerance"]
    gpu = result["gpus"][0]
    assert gpu["name"] in smi_names()
    assert gpu["driver"]
    bench = {r["dtype"]: r for r in result["benchmark"]["results"]}
    assert "fp32" in bench and bench["fp32"]["device"] == "gpu:0"
    assert all(r["tflops"] > 0 for r in bench.values())
    peaks = runner.gpu_peaks() or []
    if any(p["name"] == gpu["name"] for p in peaks):
        assert all("fraction_of_peak" in r for r in bench.values())
        assert 0 < bench["fp32"]["fraction_of_peak"] < 1.2
