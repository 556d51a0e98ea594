"""The smoke harness's logic: checks, verdicts, statuses, benchmark arithmetic.

A fake adapter stands in for a framework on a GPU (no GPU here); the real
frameworks run in tests/test_smoke_tf.py (TensorFlow on this CPU), the Docker
tests and docs/gpu-run.md (torch and jax on an H200). The subprocess tests at
the end run the harness file itself, as images do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envlock.smoke import HARNESS_PATH
from envlock.smoke import harness as h

H200_PEAK = {
    "name": "NVIDIA H200",
    "compute_capability": "9.0",
    "tflops": {"fp32": 67, "tf32": 495, "fp16": 989, "bf16": 989},
}
N = 8192
FLOPS = 2.0 * N**3


class FakeAdapter(h.Adapter):
    """A framework on one GPU, its answers set by the test."""

    name = "torch"

    def __init__(self, **conf: Any) -> None:
        super().__init__()
        self.conf = {
            "version": "2.3.1+cu121",
            "cuda": "12.1",
            "cudnn": "8.9.2",
            "caps": ["sm_70", "sm_80", "sm_90"],
            "gpus": [
                {"name": "NVIDIA H200", "compute_capability": "9.0", "memory_total_mb": 143771}
            ],
            "runtime_cudnn": ("8.9.2", "/usr/lib/libcudnn.so.8"),
            "device": "cuda:0",
            "err": 1e-5,
            "memory": {"in_use_mb": 32.0, "reserved_mb": 40.0},
            "tflops": {"fp32": 51.0, "tf32": 51.0, "fp16": 700.0, "bf16": 720.0},
            "crash": set(),
        }
        self.conf.update(conf)
        self.memory_growth_asked: bool | None = None

    def _maybe_crash(self, what: str) -> None:
        if what in self.conf["crash"]:
            raise RuntimeError(f"CUDA error: an illegal memory access was encountered ({what})")

    def load(self) -> None:
        self._maybe_crash("load")

    def version(self) -> str:
        return str(self.conf["version"])

    def build_info(self) -> dict[str, Any]:
        self._maybe_crash("build_info")
        return {
            "cuda": self.conf["cuda"],
            "cudnn": self.conf["cudnn"],
            "compute_capabilities": self.conf["caps"],
        }

    def set_memory_growth(self, enabled: bool) -> str:
        self.memory_growth_asked = enabled
        self._maybe_crash("set_memory_growth")
        return f"memory growth {'on' if enabled else 'off'}"

    def gpus(self) -> list[dict[str, Any]]:
        self._maybe_crash("gpus")
        return [dict(g) for g in self.conf["gpus"]]

    def runtime_cudnn(self) -> tuple[str | None, str]:
        self._maybe_crash("runtime_cudnn")
        return self.conf["runtime_cudnn"]  # type: ignore[no-any-return]

    def op_on_gpu(self) -> tuple[str, float]:
        self._maybe_crash("op_on_gpu")
        return self.conf["device"], self.conf["err"]

    def memory_in_use(self) -> dict[str, float]:
        return dict(self.conf["memory"])

    def matmul_timer(self, dtype: str, n: int, on_gpu: bool) -> tuple[Any, str]:
        self._maybe_crash("matmul_" + dtype)
        seconds = 2.0 * n**3 / (self.conf["tflops"][dtype] * 1e12)

        def run(k: int) -> float:
            return seconds * k

        return run, dtype


class Fake:
    def __init__(self) -> None:
        self.conf: dict[str, Any] = {}
        self.adapter: FakeAdapter | None = None


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[Fake]:
    """Register a FakeAdapter as 'torch'; each run sets its answers.

    The harness writes runtime settings into os.environ (as it must, before a
    framework is imported); the environment is put back afterwards.
    """
    saved = dict(os.environ)
    f = Fake()

    def factory() -> FakeAdapter:
        f.adapter = FakeAdapter(**f.conf)
        return f.adapter

    monkeypatch.setitem(h.ADAPTERS, "torch", factory)
    monkeypatch.setattr(h, "nvidia_smi", lambda: [])
    monkeypatch.setattr(h, "gpu_state", lambda index=0: None)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("ENVLOCK_RUNTIME_CONFIG", raising=False)
    monkeypatch.setattr(h, "DEFAULT_RUNTIME_FILES", ())
    yield f
    os.environ.clear()
    os.environ.update(saved)


def smoke(
    fake: Fake, tmp_path: Path, *args: str, expect: dict[str, Any] | None = None, **conf: Any
) -> dict[str, Any]:
    fake.conf = dict(conf)
    argv = ["--framework", "torch", "--warmup-seconds", "0", *args]
    if expect is not None:
        path = tmp_path / "expect.json"
        path.write_text(json.dumps(expect))
        argv += ["--expect", str(path)]
    result: dict[str, Any] = h.smoke(h.parse_args(argv), 0.0)
    return result


def checks(result: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["name"]: (c["status"], c["reason"]) for c in result["checks"]}


EXPECT = {
    "framework": "torch",
    "version": "2.3.1",
    "cuda": "12.1",
    "cudnn": "8.9",
    "compute_capabilities": ["sm_80"],
    "gpu_peaks": [H200_PEAK],
}


def test_gpu_run_that_matches_the_lock_passes(fake: Fake, tmp_path: Path) -> None:
    result = smoke(fake, tmp_path, expect=EXPECT)
    got = checks(result)
    assert result["status"] == "PASSED", got
    assert got["framework_version"] == ("PASS", "PyTorch 2.3.1+cu121 as locked")
    assert got["build_cuda"] == ("PASS", "built with CUDA 12.1 as locked")
    assert got["build_cudnn"][0] == "PASS"
    assert got["gpu_visible"] == ("PASS", "1 GPU(s) visible: NVIDIA H200 (9.0)")
    assert got["compute_capability"] == (
        "PASS",
        "compute capability 9.0 has machine code (sm_90) in the build",
    )
    assert got["cudnn_runtime"] == ("PASS", "cuDNN 8.9.2 loaded, major 8 as expected")
    assert got["op_on_gpu"][0] == "PASS" and "cuda:0" in got["op_on_gpu"][1]
    assert got["memory_held"][0] == "PASS"
    assert got["matmul_speed"] == (
        "PASS",
        "bf16 matmul 720.0 TFLOP/s = 73% of the NVIDIA H200 peak 989 TFLOP/s",
    )
    assert result["expected"] == EXPECT
    assert result["gpus"][0]["name"] == "NVIDIA H200"
    bench = {r["dtype"]: r for r in result["benchmark"]["results"]}
    assert sorted(bench) == ["bf16", "fp16", "fp32"]
    assert bench["bf16"]["tflops"] == pytest.approx(720.0, rel=1e-3)
    assert bench["bf16"]["fraction_of_peak"] == pytest.approx(720 / 989, abs=1e-4)
    assert bench["fp32"]["fraction_of_peak"] == pytest.approx(51 / 67, abs=1e-4)
    assert bench["bf16"]["n"] == N and bench["bf16"]["repeats"] == 7
    assert len(bench["bf16"]["samples_s"]) == 7
    assert result["benchmark"]["peak_source"] == "NVIDIA H200"


def test_no_gpu_fails_and_allow_cpu_warns(fake: Fake, tmp_path: Path) -> None:
    result = smoke(fake, tmp_path, expect=EXPECT, gpus=[])
    got = checks(result)
    assert result["status"] == "FAILED"
    assert got["gpu_visible"] == ("FAIL", "no GPU visible: PyTorch runs on the CPU")
    for name in ("compute_capability", "cudnn_runtime", "op_on_gpu"):
        assert got[name] == ("SKIP", "no GPU visible")
    assert [r["device"] for r in result["benchmark"]["results"]] == ["cpu"]
    assert result["benchmark"]["results"][0]["n"] == 512

    result = smoke(fake, tmp_path, "--allow-cpu", expect=EXPECT, gpus=[])
    assert result["status"] == "WARNED"
    assert checks(result)["gpu_visible"][0] == "WARN"
    assert result["benchmark"]["results"][0]["dtype"] == "fp32"


def test_mismatches_fail_with_both_values(fake: Fake, tmp_path: Path) -> None:
    result = smoke(
        fake,
        tmp_path,
        expect=EXPECT,
        version="2.4.0",
        cuda="11.8",
        runtime_cudnn=("9.1.0", "/x/libcudnn.so.9"),
    )
    got = checks(result)
    assert result["status"] == "FAILED"
    assert got["framework_version"] == ("FAIL", "PyTorch 2.4.0 is installed, the lock says 2.3.1")
    assert got["build_cuda"] == ("FAIL", "built with CUDA 11.8, the lock says 12.1")
    assert got["cudnn_runtime"] == ("FAIL", "cuDNN 9.1.0 loaded, but PyTorch needs major 8")


def test_op_elsewhere_or_wrong_answer_fails(fake: Fake, tmp_path: Path) -> None:
    got = checks(smoke(fake, tmp_path, "--no-benchmark", device="cpu:0"))
    assert got["op_on_gpu"] == ("FAIL", "a matmul placed on GPU 0 ran on cpu:0")
    got = checks(smoke(fake, tmp_path, "--no-benchmark", err=3.5))
    assert got["op_on_gpu"] == ("FAIL", "a matmul on cuda:0 differs from the CPU by 3.5")


def test_without_expectations_the_comparisons_skip(fake: Fake, tmp_path: Path) -> None:
    result = smoke(fake, tmp_path, "--no-benchmark")
    got = checks(result)
    assert got["framework_version"] == ("SKIP", "PyTorch 2.3.1+cu121 (no version expected)")
    assert got["build_cuda"] == ("SKIP", "built with CUDA 12.1 (nothing expected)")
    assert result["status"] == "PASSED"
    assert result["benchmark"] == {}


def test_a_crash_halfway_is_a_fail_naming_check_and_error(fake: Fake, tmp_path: Path) -> None:
    result = smoke(fake, tmp_path, expect=EXPECT, crash={"op_on_gpu", "matmul_fp16"})
    got = checks(result)
    assert result["status"] == "FAILED"
    assert got["op_on_gpu"] == (
        "FAIL",
        "op_on_gpu crashed: RuntimeError: CUDA error: an illegal memory access was "
        "encountered (op_on_gpu)",
    )
    entry = next(c for c in result["checks"] if c["name"] == "op_on_gpu")
    assert entry["error"]["type"] == "RuntimeError"
    assert entry["error"]["where"].endswith("in _maybe_crash")
    # the checks after the crash still ran
    assert got["memory_held"][0] == "PASS"
    assert got["benchmark_fp16"][0] == "FAIL"
    assert [r["dtype"] for r in result["benchmark"]["results"]] == ["fp32", "bf16"]


def test_import_failure_stops_early(fake: Fake, tmp_path: Path) -> None:
    result = smoke(fake, tmp_path, crash={"load"})
    assert result["status"] == "FAILED"
    assert [c["name"] for c in result["checks"]] == ["import"]
    assert result["checks"][0]["reason"].startswith("cannot import torch: RuntimeError: CUDA error")


def test_slow_half_precision_warns(fake: Fake, tmp_path: Path) -> None:
    result = smoke(fake, tmp_path, expect=EXPECT, tflops={"fp32": 20, "fp16": 150, "bf16": 160})
    got = checks(result)
    assert result["status"] == "WARNED"
    assert got["matmul_speed"] == (
        "WARN",
        "bf16 matmul 160.0 TFLOP/s = 16% of the NVIDIA H200 peak 989 TFLOP/s (below 50%)",
    )


def test_unknown_gpu_has_no_fraction(fake: Fake, tmp_path: Path) -> None:
    gpus = [{"name": "NVIDIA GeForce RTX 4090", "compute_capability": "8.9"}]
    result = smoke(fake, tmp_path, expect=EXPECT, gpus=gpus)
    got = checks(result)
    assert got["matmul_speed"] == (
        "SKIP",
        "bf16 matmul 720.0 TFLOP/s; no datasheet peak known for NVIDIA GeForce RTX 4090",
    )
    assert all("fraction_of_peak" not in r for r in result["benchmark"]["results"])
    # sm_80 machine code runs on 8.9 (same major)
    assert got["compute_capability"][0] == "PASS"


def test_old_gpu_gets_fp16_only(fake: Fake, tmp_path: Path) -> None:
    gpus = [{"name": "Tesla V100-SXM2-16GB", "compute_capability": "7.0"}]
    result = smoke(fake, tmp_path, "--size", "256", gpus=gpus)
    assert [r["dtype"] for r in result["benchmark"]["results"]] == ["fp32", "fp16"]
    assert {r["n"] for r in result["benchmark"]["results"]} == {256}


def test_training_benchmark_is_tensorflow_only(fake: Fake, tmp_path: Path) -> None:
    result = smoke(fake, tmp_path, "--training", "--size", "64")
    assert checks(result)["benchmark_training"] == (
        "SKIP",
        "the training benchmark exists for TensorFlow only, not PyTorch",
    )
    assert "training" not in result["benchmark"]


def test_bad_expect_and_peaks_files(fake: Fake, tmp_path: Path) -> None:
    bad = tmp_path / "expect.json"
    bad.write_text("{not json")
    result = h.smoke(h.parse_args(["--framework", "torch", "--expect", str(bad)]), 0.0)
    assert result["status"] == "FAILED"
    assert result["checks"][0]["reason"].startswith(f"cannot read {bad}: JSONDecodeError")
    bad.write_text("[1, 2]")
    result = h.smoke(h.parse_args(["--framework", "torch", "--expect", str(bad)]), 0.0)
    assert "expected a JSON object" in result["checks"][0]["reason"]
    peaks = tmp_path / "peaks.json"
    peaks.write_text(json.dumps({"gpu_peaks": [H200_PEAK]}))
    result = smoke(fake, tmp_path, "--peaks", str(peaks))
    assert result["benchmark"]["peak_source"] == "NVIDIA H200"


def test_unknown_or_missing_framework(fake: Fake, tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(h, "detect_framework", lambda: None)
    result = h.smoke(h.parse_args([]), 0.0)
    assert checks(result)["framework"] == (
        "FAIL",
        "no framework to test: pass --framework (tensorflow, torch, jax) or install one",
    )
    path = tmp_path / "expect.json"
    path.write_text(json.dumps({"framework": "mxnet"}))
    result = h.smoke(h.parse_args(["--expect", str(path)]), 0.0)
    assert (
        checks(result)["framework"][1]
        == "unknown framework 'mxnet' (known: tensorflow, torch, jax)"
    )


def test_runtime_config_is_read_and_applied(fake: Fake, tmp_path: Path) -> None:
    runtime = {
        "schema": "envlock.runtime/v1",
        "visible_devices": "",
        "memory_growth": False,
        "mixed_precision": "mixed_bfloat16",
        "determinism": False,
        "seed": 1,
    }
    (tmp_path / "runtime.json").write_text(json.dumps(runtime))
    result = smoke(fake, tmp_path, "--no-benchmark", expect=EXPECT)
    assert os.environ["CUDA_VISIBLE_DEVICES"] == ""
    settings = result["settings"]
    assert settings["runtime_config"] == str(tmp_path / "runtime.json")
    assert settings["runtime"] == runtime
    assert settings["applied_environment"] == {"CUDA_VISIBLE_DEVICES": ""}
    assert settings["memory_growth"] is False
    assert fake.adapter is not None and fake.adapter.memory_growth_asked is False
    assert checks(result)["precision_policy"][0] == "SKIP"
    assert "mixed_bfloat16" in checks(result)["precision_policy"][1]


def test_environment_wins_over_runtime_json(fake: Fake, tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    config = tmp_path / "elsewhere.json"
    config.write_text(json.dumps({"visible_devices": "0", "memory_growth": True}))
    monkeypatch.setenv("ENVLOCK_RUNTIME_CONFIG", str(config))
    result = smoke(fake, tmp_path, "--no-benchmark")
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "1"
    assert result["settings"]["runtime_config"] == str(config)
    assert result["settings"]["applied_environment"] == {}
    assert result["settings"]["CUDA_VISIBLE_DEVICES"] == "1"


# ---------------------------------------------------------------- pure functions


@pytest.mark.parametrize(
    ("capability", "compiled", "status", "words"),
    [
        ("9.0", ["sm_80", "sm_90"], "PASS", "machine code (sm_90)"),
        ("8.6", ["sm_70", "sm_80"], "PASS", "runs the sm_80 machine code"),
        # TensorFlow 2.15's targets on an H100/H200: no sm_9x, PTX for 8.0
        (
            "9.0",
            ["sm_50", "sm_60", "sm_70", "sm_75", "compute_80"],
            "WARN",
            "JIT-compiled from PTX (compute_80), slow first start",
        ),
        ("7.0", ["sm_80", "compute_80"], "FAIL", "unsupported: the build targets only sm_80"),
        ("8.0", ["sm_86"], "FAIL", "unsupported"),
    ],
)
def test_capability_verdict(capability: str, compiled: list[str], status: str, words: str) -> None:
    got, reason = h.capability_verdict(capability, compiled)
    assert got == status
    assert words in reason


@given(
    major=st.integers(3, 12),
    minor=st.integers(0, 9),
    sass=st.lists(st.integers(30, 129), max_size=6),
    ptx=st.lists(st.integers(30, 129), max_size=3),
)
def test_capability_verdict_properties(
    major: int, minor: int, sass: list[int], ptx: list[int]
) -> None:
    compiled = [f"sm_{s}" for s in sass] + [f"compute_{p}" for p in ptx]
    gpu = major * 10 + minor
    status, reason = h.capability_verdict(f"{major}.{minor}", compiled)
    runs_binary = any(s // 10 == major and s <= gpu for s in sass)
    if runs_binary:
        assert status == "PASS"
    elif any(p <= gpu for p in ptx):
        assert status == "WARN" and "PTX" in reason
    else:
        assert status == "FAIL" and "unsupported" in reason


@pytest.mark.parametrize(
    ("value", "text"), [(8906, "8.9.6"), (8100, "8.1.0"), (91002, "9.10.2"), (90100, "9.1.0")]
)
def test_cudnn_version_numbers(value: int, text: str) -> None:
    assert h.cudnn_from_int(value) == text


@pytest.mark.parametrize(
    ("expected", "actual", "same"),
    [
        ("12.2", "12.2", True),
        ("12.2", "12.2.140", True),
        ("8.9", "8", True),
        ("12.2", "12.3", False),
        ("8.9", "9", False),
        ("12.2", "", False),
        ("12.2", "unknown", False),
    ],
)
def test_prefix_match(expected: str, actual: str, same: bool) -> None:
    assert h.prefix_match(expected, actual) is same


@given(st.text(max_size=20), st.text(max_size=20))
def test_version_helpers_never_raise(a: str, b: str) -> None:
    assert isinstance(h.prefix_match(a, b), bool)
    assert isinstance(h.same_release(a, b), bool)
    assert all(isinstance(p, int) for p in h._parts(a))


def test_same_release_ignores_local_labels() -> None:
    assert h.same_release("2.11.0", "2.11.0+cu130")
    assert not h.same_release("2.15.0", "2.15.1")


@pytest.mark.parametrize(
    ("reported", "row"),
    [
        ("NVIDIA H200", "NVIDIA H200"),
        ("nvidia h200", "NVIDIA H200"),
        ("Tesla V100-SXM2-16GB", "Tesla V100-SXM2"),
        ("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"),
        ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe"),
        ("NVIDIA H1000", None),
        ("NVIDIA GeForce RTX 4090", None),
        ("", None),
    ],
)
def test_find_peak(reported: str, row: str | None) -> None:
    peaks = [
        {"name": "NVIDIA H200 (SXM)"},
        {"name": "NVIDIA H100 80GB HBM3"},
        {"name": "NVIDIA H100 PCIe"},
        {"name": "Tesla V100-SXM2"},
        {"name": "Tesla V100"},
        "not a row",
    ]
    found = h.find_peak(peaks, reported)
    assert (found["name"].split(" (")[0] if found else None) == row


def test_overall_status() -> None:
    assert h.overall([]) == "PASSED"
    assert h.overall([{"status": "PASS"}, {"status": "SKIP"}]) == "PASSED"
    assert h.overall([{"status": "PASS"}, {"status": "WARN"}]) == "WARNED"
    assert h.overall([{"status": "WARN"}, {"status": "FAIL"}]) == "FAILED"


# ---------------------------------------------------------------- the file itself


FAKE_JAX = """
import os, sys
print("chatter from python on stdout")
os.write(1, b"chatter from C on fd 1\\n")
__version__ = "0.4.30"
def devices(*a):
    raise RuntimeError("Unable to initialize backend 'cuda': no CUDA-capable device is detected")
"""


def run_file(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(HARNESS_PATH), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        cwd=tmp_path,
    )


def test_stdout_holds_only_the_json_and_crashes_are_reported(tmp_path: Path) -> None:
    (tmp_path / "jax").mkdir()
    (tmp_path / "jax" / "__init__.py").write_text(FAKE_JAX)
    out = run_file(tmp_path, "--framework", "jax", env={"PYTHONPATH": str(tmp_path)})
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)  # nothing but the document
    assert doc["schema"] == "envlock.smoke/v1"
    assert doc["status"] == "FAILED"
    assert doc["version"] == "0.4.30"
    gpu = next(c for c in doc["checks"] if c["name"] == "gpu_visible")
    assert gpu["status"] == "FAIL"
    assert gpu["reason"].startswith("gpu_visible crashed: RuntimeError: Unable to initialize")
    assert "chatter from python on stdout" in out.stderr
    assert "chatter from C on fd 1" in out.stderr
    assert "Traceback" not in out.stderr


def test_harness_runs_without_the_framework_installed(tmp_path: Path) -> None:
    out = run_file(tmp_path, "--framework", "tensorflow", "--allow-cpu", env={"PYTHONPATH": ""})
    doc = json.loads(out.stdout)
    assert out.returncode == 1
    assert doc["checks"][-1]["name"] == "import"
    assert doc["checks"][-1]["reason"] == (
        "cannot import tensorflow: ModuleNotFoundError: No module named 'tensorflow'"
    )


def test_harness_is_standard_library_only() -> None:
    import ast

    tree = ast.parse(HARNESS_PATH.read_text(), feature_version=(3, 8))
    stdlib = set(sys.stdlib_module_names)
    frameworks = {"tensorflow", "torch", "jax", "jaxlib"}
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            top = name.split(".")[0]
            assert top in stdlib or top in frameworks or top == "__future__", name
