"""The harness's jax adapter against real JAX on this machine's CPU.

A venv with jax (CPU wheels, from the index in this machine's configuration)
is made once for the module. No GPU here: the XLA check compiles with
jax.jit on the CPU and compares with the same function under
jax.disable_jit(); docs/gpu-run.md records the GPU run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from envlock.index.config import index_url
from envlock.smoke import HARNESS_PATH

pytestmark = [pytest.mark.slow, pytest.mark.network]


@pytest.fixture(scope="module")
def jax_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    uv = str(Path(sys.executable).parent / "uv")
    venv = tmp_path_factory.mktemp("jax") / "venv"
    env = {
        **os.environ,
        "SSL_CERT_FILE": os.environ.get("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt"),
    }
    subprocess.run(
        [uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True, env=env, timeout=120
    )
    python = str(venv / "bin" / "python")
    subprocess.run(
        [uv, "pip", "install", "-q", "--native-tls", "--python", python]
        + ["--default-index", index_url(), "jax"],
        check=True,
        env=env,
        timeout=600,
    )
    return python


def test_jax_jit_matches_the_unjitted_function_on_the_cpu(jax_python: str) -> None:
    out = subprocess.run(
        [jax_python, str(HARNESS_PATH), "--framework", "jax", "--allow-cpu", "--no-benchmark"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    entry = next(c for c in result["checks"] if c["name"] == "xla")
    assert entry["status"] == "PASS", entry
    assert re.fullmatch(
        r"jax\.jit compiled in \d+\.\d\d s, ran on (TFRT_CPU_0|cpu:0); max difference to the "
        r"same function under jax\.disable_jit\(\) \S+",
        entry["reason"],
    )
    xla = entry["xla"]
    assert xla["compiled_with"] == "jax.jit"
    assert xla["max_difference"] <= xla["tolerance"] == 2e-3
    assert 0 < xla["steady_call_s"] < xla["first_call_s"]
    assert result["status"] == "WARNED"  # gpu_visible under --allow-cpu, nothing else
    assert [c["name"] for c in result["checks"] if c["status"] == "WARN"] == ["gpu_visible"]
    # the training checks, on by default: a conv net trained un-jitted and with jax.jit
    train = {c["name"]: c for c in result["checks"] if c["name"].startswith("train")}
    assert {n: c["status"] for n, c in train.items()} == {
        "train_eager": "PASS",
        "train_jit": "PASS",
        "train_jit_bfloat16": "SKIP",  # on a GPU only
    }
    runs = {r["variant"]: r for r in result["benchmark"]["training"]["runs"]}
    assert list(runs) == ["eager", "jit"]
    for run in runs.values():
        assert run["loss_last"] < run["loss_first"] and run["steps"] == 8
    assert runs["jit"]["seconds_per_step"] < runs["eager"]["seconds_per_step"]  # 200x here
