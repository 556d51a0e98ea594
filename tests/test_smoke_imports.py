"""`envlock smoke --host` runs on GPU hosts that often lack docker,
cryptography and uv: its import path must not need them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

PROBE = r"""
import contextlib, io, json, sys
from envlock.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    code = main(["smoke", "--host", "--allow-cpu", "--json"])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def test_smoke_host_imports_neither_docker_cryptography_nor_uv() -> None:
    # all three are installed here: the test fails if the path imports any of them
    for name in ("docker", "cryptography", "uv"):
        __import__(name)
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120
    )
    result = json.loads(proc.stdout)
    assert result["code"] in (0, 1)  # the harness ran (no framework here: FAILED)
    heavy = [m for m in result["modules"] if m.split(".")[0] in ("docker", "cryptography", "uv")]
    assert heavy == []


# What a GPU host without docker, cryptography and uv runs from a checkout of the
# repository: `PYTHONPATH=. python3 -m envlock smoke --host --json`. The three are
# made unimportable (a sitecustomize on PYTHONPATH), and torch and jax are the fake
# packages of tests/test_smoke_harness_frameworks.py, which the real adapters import.
BLOCK = """\
import sys

ABSENT = ABSENT_NAMES


class Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ABSENT:
            raise ModuleNotFoundError(f"No module named {name!r} (absent on this host)")
        return None


sys.meta_path.insert(0, Absent())
"""


HEAVY = ("docker", "cryptography", "uv")


def _host_run(
    tmp_path: Path, *args: str, absent: tuple[str, ...] = HEAVY
) -> subprocess.CompletedProcess[str]:
    from test_smoke_harness_frameworks import fake_frameworks

    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCK.replace("ABSENT_NAMES", repr(absent)))
    fakes = fake_frameworks(tmp_path)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([".", str(site), str(fakes)]),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "ENVLOCK_RUNTIME_CONFIG": "",
    }
    return subprocess.run(
        [sys.executable, "-m", "envlock", "smoke", "--host", "--no-training", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=REPO,
    )


def test_smoke_host_runs_every_framework_without_docker_cryptography_or_uv(
    tmp_path: Path,
) -> None:
    proc = _host_run(tmp_path, "--json", "--allow-cpu")
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    result = json.loads(proc.stdout)
    runs = {r["framework"]: r for r in result["frameworks"]}
    assert list(runs) == ["torch", "jax"]
    for name in runs:  # the fakes have no tensors to time, and jax no jax.numpy
        bad = {c["name"]: c["status"] for c in runs[name]["checks"] if c["status"] != "PASS"}
        assert bad["gpu_visible"] == "WARN"
        assert bad["benchmark_fp32"] == "FAIL"
        assert runs[name]["status"] == "FAILED"
    assert result["status"] == "FAILED"
    assert (result["framework"], result["version"]) == ("torch", "2.5.1+cpu")


def test_smoke_host_prints_each_frameworks_verdict(tmp_path: Path) -> None:
    proc = _host_run(tmp_path, "--size", "64")
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "FAILED: torch 2.5.1+cpu, jax 0.4.35"
    assert "torch 2.5.1+cpu: FAILED" in lines and "jax 0.4.35: FAILED" in lines
    torch_at, jax_at = lines.index("torch 2.5.1+cpu: FAILED"), lines.index("jax 0.4.35: FAILED")
    torch_part, jax_part = lines[torch_at:jax_at], lines[jax_at:]
    assert any(re.match(r"FAIL\s+gpu_visible\s+no GPU visible: PyTorch", x) for x in torch_part)
    assert any(re.match(r"FAIL\s+gpu_visible\s+no GPU visible: JAX", x) for x in jax_part)
    assert any(re.match(r"FAIL\s+xla\s+xla crashed: AttributeError", x) for x in jax_part)
    assert not any("framework_jax" in x for x in lines)  # shown as jax's own section


def test_smoke_host_needs_only_the_standard_library(tmp_path: Path) -> None:
    """Without packaging (and envlock's other dependencies) the run is whole; only
    the verdicts per execution path, which need the matrices, are left out."""
    absent = (*HEAVY, "packaging", "jinja2", "requests", "rich", "tomli_w")
    proc = _host_run(tmp_path, "--json", "--allow-cpu", absent=absent)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "envlock: no verdicts per execution path (No module named 'packaging'" in proc.stderr
    result = json.loads(proc.stdout)
    assert [r["framework"] for r in result["frameworks"]] == ["torch", "jax"]
    assert "paths" not in result
