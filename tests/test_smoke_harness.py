"""The smoke harness's logic: checks, verdicts, statuses, benchmark arithmetic.

A fake adapter stands in for a framework on a GPU (no GPU here); the real
frameworks run in tests/test_smoke_tf.py (TensorFlow on this CPU), the Docker
tests and docs/gpu-run.md (torch and jax on an H200). The subprocess tests at
the end run the harness file itself, as images do.

This module also runs under CPython 3.8, the oldest Python the harness
supports, with pytest alone: it loads the harness file by its path (not
through the envlock package, which needs a newer Python) and imports nothing
but the standard library and pytest. Property tests that need hypothesis live
in test_smoke_harness_properties.py.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HARNESS_PATH = Path(__file__).resolve().parent.parent / "envlock" / "smoke" / "harness.py"


def _load_harness() -> Any:
    """The harness as a module of its own, the way a bundle's envlock_smoke.py is one."""
    spec = importlib.util.spec_from_file_location("envlock_smoke", HARNESS_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up while making classes
    spec.loader.exec_module(module)
    return module


h = _load_harness()

H200_PEAK = {
    "name": "NVIDIA H200",
    "compute_capability": "9.0",
    "tflops": {"fp32": 67, "tf32": 495, "fp16": 989, "bf16": 989},
}
N = 8192
PTXAS = {
    "path": "/venv/nvidia/cuda_nvcc/bin/ptxas",
    "version": "12.2.140",
    "source": "nvidia-cuda-nvcc wheel",
    "xla_finds": True,
}
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
        self.xla_calls = 0
        self.xla_failure = self.conf.get("xla_failure", h.FAIL)
        self.xla_needs_ptxas = self.conf.get("xla_needs_ptxas", False)

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

    def xla_program(self, on_gpu: bool) -> Any:
        """Compiles in conf['xla']['compile_s'] on the first call; answers
        conf['xla']['err'] away from the reference, on conf['xla']['device']."""
        xla = {"compile_s": 0.03, "err": 3e-7, "device": "cuda:0" if on_gpu else "cpu"}
        xla.update(self.conf.get("xla", {}))
        if "unavailable" in xla:
            raise h.XlaUnavailable(xla["unavailable"])

        def compiled() -> str:
            self.xla_calls += 1
            if "error" in xla:
                raise xla["error"]
            if self.xla_calls == 1:
                time.sleep(xla["compile_s"])
            return "compiled result"

        return h.XlaProgram(
            what="fake.compile",
            reference_what="eager execution",
            compiled=compiled,
            reference=lambda: "eager result",
            difference=lambda a, r: xla["err"],
            device_of=lambda out: xla["device"],
        )

    train_model = "fake conv net"

    def train_variants(self, on_gpu: bool) -> list[Any]:
        """conf['train'][name] overrides a variant's answers: 'losses', 'device',
        'seconds_per_step', 'error' (raised), 'skip'."""
        train = self.conf.get("train", {})
        return [
            h.TrainVariant("eager", "the fake eager loop", plain=True),
            h.TrainVariant("mixed", "the fake loop under autocast"),
            h.TrainVariant(
                "compiled",
                "fake.compile",
                compiled=True,
                skip=train.get("compiled", {}).get("skip"),
            ),
        ]

    def train(
        self, variant: str, on_gpu: bool, steps: int, shape: dict[str, int]
    ) -> dict[str, Any]:
        self.trained = getattr(self, "trained", []) + [(variant, on_gpu, steps, shape)]
        found: dict[str, Any] = {
            "losses": [2.3 / (1 + i) for i in range(steps)],
            "device": "cuda:0" if on_gpu else "cpu",
            "first_step_s": 0.5,
            "seconds_per_step": {"eager": 0.004, "mixed": 0.002, "compiled": 0.001}[variant],
            "compute_dtype": "float16" if variant == "mixed" else "float32",
        }
        found.update(self.conf.get("train", {}).get(variant, {}))
        if "error" in found:
            raise found["error"]
        return found

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
    monkeypatch.setattr(h, "find_ptxas", lambda cuda=None: dict(PTXAS))
    monkeypatch.delenv("XLA_FLAGS", raising=False)
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
    result = smoke(fake, tmp_path, "--no-benchmark", "--no-training")
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


TRAIN_CHECKS = ["train_eager", "train_mixed", "train_compiled"]


def test_training_runs_by_default_each_variant_timed_against_the_plain_loop(
    fake: Fake, tmp_path: Path
) -> None:
    result = smoke(fake, tmp_path, "--size", "64", expect=EXPECT)
    assert result["status"] == "PASSED", checks(result)
    got = checks(result)
    assert [c["name"] for c in result["checks"]][-3:] == TRAIN_CHECKS  # after the matmuls
    assert got["train_eager"] == (
        "PASS",
        "the fake eager loop: loss 2.3 -> 0.115 in 20 steps on cuda:0, 4.00 ms a step "
        "(first 0.50 s)",
    )
    assert got["train_mixed"] == (
        "PASS",
        "the fake loop under autocast: loss 2.3 -> 0.115 in 20 steps on cuda:0, 2.00 ms a step "
        "(first 0.50 s), 2.00x the plain loop's speed",
    )
    assert got["train_compiled"][1].endswith(
        "1.00 ms a step (first 0.50 s), 4.00x the plain loop's speed"
    )
    training = result["benchmark"]["training"]
    assert training["model"] == "fake conv net"
    assert (training["device"], training["batch"], training["input"]) == ("gpu:0", 64, "32x32x3")
    assert training["memory_growth"] is True
    assert 0 <= training["seconds"] < result["duration_s"]
    assert [r["variant"] for r in training["runs"]] == ["eager", "mixed", "compiled"]
    assert training["runs"][0]["plain"] is True and "speedup_vs_plain" not in training["runs"][0]
    assert [r.get("speedup_vs_plain") for r in training["runs"][1:]] == [2.0, 4.0]
    assert training["runs"][1]["compute_dtype"] == "float16"
    # beside the matmul figure of the same run
    fp32 = next(r for r in result["benchmark"]["results"] if r["dtype"] == "fp32")
    assert training["matmul_fp32_s"] == fp32["seconds_per_op"]["median"]
    assert fake.adapter is not None
    assert [t[:3] for t in fake.adapter.trained] == [
        ("eager", True, 20),
        ("mixed", True, 20),
        ("compiled", True, 20),
    ]


def test_no_training_leaves_the_checks_out_and_training_is_an_accepted_no_op(
    fake: Fake, tmp_path: Path
) -> None:
    off = smoke(fake, tmp_path, "--size", "64", "--no-training")
    assert not [n for n in checks(off) if n.startswith("train")]
    assert "training" not in off["benchmark"]
    on = smoke(fake, tmp_path, "--no-benchmark", "--training", "--training-steps", "5")
    assert [n for n in checks(on) if n.startswith("train")] == TRAIN_CHECKS
    assert "results" not in on["benchmark"] and "matmul_fp32_s" not in on["benchmark"]["training"]
    assert fake.adapter is not None
    assert {t[2] for t in fake.adapter.trained} == {5}
    tiny = smoke(fake, tmp_path, "--no-benchmark", "--training-steps", "1")
    assert {t[2] for t in fake.adapter.trained} == {3}  # a loss needs steps to fall over
    assert tiny["status"] == "PASSED"


def test_training_on_the_cpu_uses_the_small_shape(fake: Fake, tmp_path: Path) -> None:
    result = smoke(fake, tmp_path, "--no-benchmark", "--allow-cpu", gpus=[])
    assert [checks(result)[n][0] for n in TRAIN_CHECKS] == ["PASS"] * 3
    assert fake.adapter is not None
    assert fake.adapter.trained[0] == ("eager", False, 8, {"batch": 16, "image": 8, "channels": 8})
    assert result["benchmark"]["training"]["device"] == "cpu"


def test_a_loss_that_does_not_fall_fails(fake: Fake, tmp_path: Path) -> None:
    result = smoke(
        fake,
        tmp_path,
        "--no-benchmark",
        train={"mixed": {"losses": [2.3, 2.4, 2.31]}, "compiled": {"losses": [2.3, float("nan")]}},
    )
    got = checks(result)
    assert result["status"] == "FAILED"
    assert got["train_eager"][0] == "PASS"
    assert got["train_mixed"] == (
        "FAIL",
        "training with the fake loop under autocast on cuda:0: the loss did not fall "
        "(2.3 -> 2.31 over 3 steps)",
    )
    assert got["train_compiled"] == (
        "FAIL",
        "training with fake.compile on cuda:0: the loss did not fall (2.3 -> nan over 2 steps)",
    )


def test_training_off_the_gpu_fails(fake: Fake, tmp_path: Path) -> None:
    result = smoke(fake, tmp_path, "--no-benchmark", train={"mixed": {"device": "cpu"}})
    assert checks(result)["train_mixed"] == (
        "FAIL",
        "training with the fake loop under autocast was asked for GPU 0 and ran on cpu",
    )


@pytest.mark.parametrize(
    ("message", "path"),
    [
        ("cuDNN error: CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED", "cuDNN"),
        ("Failed to get convolution algorithm. This is probably because cuDNN failed", "cuDNN"),
        ("DNN library is not found.", "cuDNN"),
        (
            "CUDA error: no kernel image is available for execution on the device",
            "precompiled kernels",
        ),
        ("CUDA_ERROR_INVALID_PTX: a PTX JIT compilation failed", "PTX"),
        ("ptxas fatal: Value 'sm_120' is not defined for option 'gpu-name'", "PTX"),
        ("XlaRuntimeError: INTERNAL: Failed to compile the HLO module", "XLA"),
        ("BackendCompilerFailed: backend='inductor' raised: triton error", "TorchInductor"),
        ("CUBLAS_STATUS_NOT_INITIALIZED when calling cublasCreate(handle)", "cuBLAS"),
        ("CUDA error: an illegal memory access was encountered", None),
    ],
)
def test_broken_path_is_named_from_the_error(message: str, path: str | None) -> None:
    assert h.broken_path(message) == path


def test_a_training_failure_names_the_path_that_broke(fake: Fake, tmp_path: Path) -> None:
    cudnn = RuntimeError(
        "CUDNN_BACKEND_TENSOR_DESCRIPTOR cudnnFinalize failed cudnn_status: "
        "CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED"
    )
    ptx = RuntimeError("CUDA_ERROR_INVALID_PTX: PTX version 8.5 does not support target sm_120")
    result = smoke(
        fake,
        tmp_path,
        "--no-benchmark",
        xla_failure="WARN",
        train={"eager": {"error": cudnn}, "compiled": {"error": ptx}},
    )
    got = checks(result)
    assert got["train_eager"] == (
        "FAIL",
        "training with the fake eager loop failed on GPU 0 (cuDNN broke): RuntimeError: "
        "CUDNN_BACKEND_TENSOR_DESCRIPTOR cudnnFinalize failed cudnn_status: "
        "CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED",
    )
    # a compiler the adapter calls optional (torch.compile) fails as a warning
    assert got["train_compiled"][0] == "WARN"
    assert got["train_compiled"][1].startswith(
        "training with fake.compile failed on GPU 0 (PTX broke)"
    )
    entry = next(c for c in result["checks"] if c["name"] == "train_eager")
    assert entry["broken_path"] == "cuDNN"
    assert entry["error"]["type"] == "RuntimeError"
    # the mixed variant, no plain loop to compare with, still passes without a ratio
    assert got["train_mixed"][0] == "PASS" and "plain loop" not in got["train_mixed"][1]
    assert result["status"] == "FAILED"


def test_a_compiled_train_step_is_not_tried_where_xla_would_abort(
    fake: Fake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(h, "find_ptxas", lambda cuda=None: {"path": None, "searched": []})
    result = smoke(fake, tmp_path, "--no-benchmark", xla_needs_ptxas=True)
    status, reason = checks(result)["train_compiled"]
    assert status == "WARN"
    assert reason.startswith("fake.compile not run on the GPU: no ptxas on PATH")
    assert fake.adapter is not None
    assert [t[0] for t in fake.adapter.trained] == ["eager", "mixed"]


def test_a_variant_the_adapter_skips_and_an_adapter_without_training(
    fake: Fake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = smoke(fake, tmp_path, "--no-benchmark", train={"compiled": {"skip": "not here"}})
    assert checks(result)["train_compiled"] == ("SKIP", "not here")
    monkeypatch.setattr(FakeAdapter, "train_api", ("nn", "optim"))
    monkeypatch.setattr(FakeAdapter, "load", lambda self: setattr(self, "module", fake_torch()))
    result = smoke(fake, tmp_path, "--no-benchmark")
    assert checks(result)["train"] == ("SKIP", "PyTorch 2.4.0 here has no torch.nn to train with")
    assert result["status"] == "PASSED" and "train_eager" not in checks(result)
    monkeypatch.setattr(FakeAdapter, "train_variants", h.Adapter.train_variants)
    result = smoke(fake, tmp_path, "--no-benchmark")
    assert checks(result)["train"] == ("SKIP", "no training step for PyTorch")


def test_died_in_names_the_check_and_the_path() -> None:
    log = (
        "envlock-smoke: running gpu_visible\n"
        "envlock-smoke: PASS gpu_visible: 1 GPU(s) visible\n"
        "envlock-smoke: running cudnn_runtime\n"
    )
    assert h.died_in(log) == ("cudnn_runtime", "cuDNN")  # the path that check exercises
    assert h.died_in(log + "Could not load symbol cudnnGetVersion\n") == ("cudnn_runtime", "cuDNN")
    train = log + "envlock-smoke: running train_jit\nptxas fatal: unknown sm_120\n"
    assert h.died_in(train) == ("train_jit", "PTX")
    # words printed before the dying check started do not count for it
    assert h.died_in("cudnn warning\nenvlock-smoke: running op_on_gpu\n") == ("op_on_gpu", None)
    assert h.died_in("Could not load symbol cudnnGetVersion") == (None, "cuDNN")
    assert h.died_in("") == (None, None)
    # a silent death after a check that failed naming a path (jax on the H200)
    earlier = (
        "envlock-smoke: running cudnn_runtime\n"
        "envlock-smoke: FAIL cudnn_runtime: cudnn_runtime crashed: RuntimeError: "
        "cudnn_status: CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED\n"
        "envlock-smoke: running op_on_gpu\n"
    )
    assert h.died_in(earlier) == ("op_on_gpu", "cuDNN")


def test_logged_checks_are_read_back_from_the_log() -> None:
    log = (
        "envlock-smoke: running import\n"
        "envlock-smoke: PASS import: imported jax\n"
        "2026-12-02 I external/xla: some chatter: with colons\n"
        "envlock-smoke: WARN gpu_visible: no GPU visible: JAX runs on the CPU (--allow-cpu)\n"
        "envlock-smoke: FAIL cudnn_runtime: cudnn_runtime crashed: RuntimeError: x\n"
    )
    assert h.logged_checks(log) == [
        {"name": "import", "status": "PASS", "reason": "imported jax"},
        {
            "name": "gpu_visible",
            "status": "WARN",
            "reason": "no GPU visible: JAX runs on the CPU (--allow-cpu)",
        },
        {
            "name": "cudnn_runtime",
            "status": "FAIL",
            "reason": "cudnn_runtime crashed: RuntimeError: x",
        },
    ]


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


# ---------------------------------------------------------------- one check at a time


def context(expect: dict[str, Any] | None = None, **conf: Any) -> Any:
    """A Context past 'import': torch's FakeAdapter loaded, one H200 visible."""
    ctx = h.Context(h.parse_args(["--framework", "torch"]))
    ctx.framework = "torch"
    ctx.loaded = FakeAdapter(**conf)
    ctx.expect = dict(expect or {})
    ctx.gpus = [dict(g) for g in ctx.loaded.conf["gpus"]]
    return ctx


def test_run_check_records_a_verdict_nothing_or_a_crash() -> None:
    ctx = context()

    def finds(c: Any) -> Any:
        return h.Verdict(h.WARN, "slow", {"seconds": 3})

    def reads(c: Any) -> None:
        c.version = "read"

    def breaks(c: Any) -> None:
        raise OSError("disk on fire")

    h.run_check(ctx, "finds", finds)
    h.run_check(ctx, "reads", reads)
    h.run_check(ctx, "breaks", breaks, failing="cannot read the disk")
    assert ctx.version == "read"
    assert ctx.failed == {"breaks"}
    first, second = ctx.checks
    assert first == {"name": "finds", "status": "WARN", "reason": "slow", "seconds": 3}
    assert second["reason"] == "cannot read the disk: OSError: disk on fire"
    assert second["error"]["type"] == "OSError"
    assert second["error"]["where"].endswith("in breaks")


def test_context_without_a_framework_says_so() -> None:
    ctx = h.Context(h.parse_args([]))
    with pytest.raises(RuntimeError, match="no framework has been imported yet"):
        h.check_framework_version(ctx)
    doc = ctx.document(0.5)
    assert list(doc) == [
        "schema",
        "status",
        "framework",
        "version",
        "expected",
        "build_info",
        "gpus",
        "checks",
        "benchmark",
        "settings",
        "host",
        "environment",
        "duration_s",
        "frameworks",
    ]
    assert (doc["status"], doc["framework"], doc["duration_s"]) == ("PASSED", None, 0.5)
    assert doc["frameworks"] == []  # none was chosen


def test_cudnn_not_loaded_warns_when_the_library_loads_by_name(monkeypatch: Any) -> None:
    asked: list[Any] = []

    def loadable(major: Any) -> tuple[bool, str]:
        asked.append(major)
        return True, "libcudnn.so.8 loads by name: cuDNN 8.9.7"

    monkeypatch.setattr(h, "cudnn_loadable", loadable)
    ctx = context({"cudnn": "8.9"}, runtime_cudnn=(None, "no libcudnn after a convolution"))
    verdict = h.check_cudnn_runtime(ctx)
    assert (verdict.status, verdict.reason) == (
        "WARN",
        "PyTorch did not load cuDNN for a convolution (no libcudnn after a convolution); "
        "libcudnn.so.8 loads by name: cuDNN 8.9.7",
    )
    assert asked == [8]
    monkeypatch.setattr(h, "cudnn_loadable", lambda major: (False, "libcudnn.so.8: not found"))
    verdict = h.check_cudnn_runtime(ctx)
    assert (verdict.status, verdict.reason) == (
        "FAIL",
        "cuDNN did not load: no libcudnn after a convolution; libcudnn.so.8: not found",
    )


def test_memory_held_warns_when_most_of_the_gpu_is_taken() -> None:
    ctx = context(memory={"in_use_mb": 120000.0, "reserved_mb": 130000.0})
    ctx.memory_growth_reason = "memory growth on"
    verdict = h.check_memory_held(ctx)
    assert (verdict.status, verdict.reason) == (
        "WARN",
        "memory growth on; yet PyTorch holds 130000 of 143771 MB after small ops",
    )
    assert ctx.settings["gpu_memory"] == {"in_use_mb": 120000.0, "reserved_mb": 130000.0}
    ctx.memory_growth_reason = None  # the adapter had nothing to set: no verdict
    assert h.check_memory_held(ctx) is None


def test_benchmark_plan_follows_the_gpu_and_the_options() -> None:
    ctx = context()
    ctx.peaks = [H200_PEAK]
    plan = h.plan_benchmark(ctx)
    assert (plan.on_gpu, plan.n, plan.dtypes) == (True, 8192, ("fp32", "fp16", "bf16"))
    assert (plan.warmup_s, plan.per_repeat, plan.peak) == (1.0, None, H200_PEAK)
    ctx.gpus = []
    plan = h.plan_benchmark(ctx)
    assert (plan.on_gpu, plan.n, plan.dtypes, plan.warmup_s) == (False, 512, ("fp32",), 0.0)
    assert (plan.per_repeat, plan.peak) == (2, None)


# ---------------------------------------------------------------- XLA


def xla_entry(result: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = next(c for c in result["checks"] if c["name"] == "xla")
    return entry


def test_xla_compiles_on_the_gpu_and_matches_eager(fake: Fake, tmp_path: Path) -> None:
    result = smoke(fake, tmp_path, "--no-benchmark", expect=EXPECT)
    entry = xla_entry(result)
    assert result["status"] == "PASSED"
    assert entry["status"] == "PASS"
    # the compile time is the fake's, as measured (0.10 s on a loaded machine)
    assert re.fullmatch(
        r"fake\.compile compiled in \d+\.\d\d s, ran on cuda:0; max difference to eager "
        r"execution 3e-07 \(ptxas 12\.2\.140 from nvidia-cuda-nvcc wheel\)",
        entry["reason"],
    ), entry["reason"]
    xla = entry["xla"]
    assert xla["compiled_with"] == "fake.compile" and xla["reference"] == "eager execution"
    assert xla["device"] == "cuda:0"
    assert xla["first_call_s"] >= 0.03
    assert xla["compile_s"] == pytest.approx(xla["first_call_s"] - xla["steady_call_s"], abs=1e-3)
    assert xla["steady_call_s"] < 0.03
    assert (xla["max_difference"], xla["tolerance"]) == (3e-7, 2e-3)
    assert xla["ptxas"] == PTXAS
    assert fake.adapter is not None and fake.adapter.xla_calls == 2
    names = [c["name"] for c in result["checks"]]
    assert names.index("xla") == names.index("memory_held") + 1


def test_xla_runs_on_the_cpu_without_a_gpu(fake: Fake, tmp_path: Path) -> None:
    result = smoke(fake, tmp_path, "--allow-cpu", "--no-benchmark", gpus=[])
    entry = xla_entry(result)
    assert result["status"] == "WARNED"  # gpu_visible, not xla
    assert entry["status"] == "PASS"
    assert ", ran on cpu; max difference to eager execution 3e-07" in entry["reason"]
    assert "ptxas" not in entry["reason"]  # the CPU needs none
    # without --allow-cpu the run fails on gpu_visible; XLA still ran on the CPU
    result = smoke(fake, tmp_path, "--no-benchmark", gpus=[])
    assert result["status"] == "FAILED"
    assert xla_entry(result)["status"] == "PASS"


@pytest.mark.parametrize(
    ("xla", "reason"),
    [
        (
            {"err": 0.25},
            "fake.compile on cuda:0 differs from eager execution by 0.25 (tolerance 0.002)",
        ),
        (
            {"err": float("nan")},
            "fake.compile on cuda:0 differs from eager execution by nan (tolerance 0.002)",
        ),
        (
            {"device": "/job:localhost/replica:0/task:0/device:CPU:0"},
            "fake.compile was asked for GPU 0 and ran on CPU:0",
        ),
    ],
)
def test_xla_wrong_answer_or_device_fails(
    fake: Fake, tmp_path: Path, xla: dict[str, Any], reason: str
) -> None:
    result = smoke(fake, tmp_path, "--no-benchmark", xla=xla)
    assert result["status"] == "FAILED"
    assert (xla_entry(result)["status"], xla_entry(result)["reason"]) == ("FAIL", reason)


def test_xla_compile_error_fails_or_warns_as_the_adapter_says(fake: Fake, tmp_path: Path) -> None:
    error = RuntimeError("BackendCompilerFailed: backend='inductor' raised: no C++ compiler")
    result = smoke(fake, tmp_path, "--no-benchmark", xla={"error": error})
    entry = xla_entry(result)
    assert (entry["status"], entry["reason"]) == (
        "FAIL",
        "fake.compile failed on GPU 0: RuntimeError: BackendCompilerFailed: backend='inductor' "
        "raised: no C++ compiler",
    )
    assert entry["error"]["type"] == "RuntimeError"
    assert entry["xla"]["ptxas"] == PTXAS
    result = smoke(fake, tmp_path, "--no-benchmark", xla={"error": error}, xla_failure=h.WARN)
    assert result["status"] == "WARNED"
    assert xla_entry(result)["status"] == "WARN"


def test_xla_unavailable_skips_with_the_reason(fake: Fake, tmp_path: Path) -> None:
    why = "PyTorch 1.13.1 has no torch.compile (it came with 2.0)"
    result = smoke(fake, tmp_path, "--no-benchmark", xla={"unavailable": why})
    assert (xla_entry(result)["status"], xla_entry(result)["reason"]) == ("SKIP", why)
    assert result["status"] == "PASSED"


def test_xla_without_ptxas_is_not_tried_where_xla_would_abort(
    fake: Fake, tmp_path: Path, monkeypatch: Any
) -> None:
    missing = {"path": None, "searched": ["PATH", "/usr/local/cuda/bin"]}
    monkeypatch.setattr(h, "find_ptxas", lambda cuda=None: dict(missing))
    expect = {**EXPECT, "cuda": "12.2.1"}  # the pin names the minor: 12.2.140 matches
    result = smoke(
        fake, tmp_path, "--no-benchmark", expect=expect, cuda="12.2", xla_needs_ptxas=True
    )
    entry = xla_entry(result)
    assert fake.adapter is not None and fake.adapter.xla_calls == 0
    assert result["status"] == "WARNED"
    assert entry["status"] == "WARN"
    assert entry["reason"] == (
        "fake.compile not run on the GPU: no ptxas on PATH, in /usr/local/cuda or an "
        'nvidia-cuda-nvcc wheel; XLA would abort the process ("Can\'t find ptxas binary"). '
        "Add it: pip install nvidia-cuda-nvcc-cu12==12.2.* and put its nvidia/cuda_nvcc/bin "
        "on PATH (the [and-cuda] extra and envlock's pip CUDA source do both)"
    )
    assert entry["xla"] == {"compiled_with": "fake.compile", "device": None, "ptxas": missing}
    assert "--xla_gpu_unsafe_fallback_to_driver_on_ptxas_not_found" in entry["hint"]

    # ptxas under CUDA_HOME only: XLA does not look there
    home = {"path": "/opt/cuda/bin/ptxas", "version": "12.2.140", "source": "CUDA_HOME"}
    monkeypatch.setattr(h, "find_ptxas", lambda cuda=None: dict(home, xla_finds=False))
    entry = xla_entry(smoke(fake, tmp_path, "--no-benchmark", xla_needs_ptxas=True))
    assert entry["reason"].startswith(
        "fake.compile not run on the GPU: ptxas is only at /opt/cuda/bin/ptxas (CUDA_HOME), "
        "where XLA does not look;"
    )

    # the driver-fallback flag: XLA compiles through the driver, which is worth a warning
    monkeypatch.setattr(h, "find_ptxas", lambda cuda=None: dict(missing))
    monkeypatch.setenv("XLA_FLAGS", "--xla_gpu_unsafe_fallback_to_driver_on_ptxas_not_found")
    entry = xla_entry(smoke(fake, tmp_path, "--no-benchmark", xla_needs_ptxas=True))
    assert entry["status"] == "WARN"
    assert entry["reason"].endswith(
        "; no ptxas: the driver compiled the PTX "
        "(--xla_gpu_unsafe_fallback_to_driver_on_ptxas_not_found)"
    )
    # the CPU needs no ptxas
    monkeypatch.delenv("XLA_FLAGS")
    result = smoke(fake, tmp_path, "--no-benchmark", "--allow-cpu", gpus=[], xla_needs_ptxas=True)
    assert xla_entry(result)["status"] == "PASS"


def _fake_ptxas(folder: Path, version: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    tool = folder / "ptxas"
    tool.write_text(
        "#!/bin/sh\necho 'ptxas: NVIDIA (R) Ptx optimizing assembler'\n"
        f"echo 'Cuda compilation tools, release {version[:4]}, V{version}'\n"
    )
    tool.chmod(0o755)
    return tool


def test_find_ptxas_looks_where_xla_looks(tmp_path: Path, monkeypatch: Any) -> None:
    site = tmp_path / "site-packages"
    wheel = _fake_ptxas(site / "nvidia" / "cuda_nvcc" / "bin", "12.2.140")
    home = _fake_ptxas(tmp_path / "cuda-home" / "bin", "12.4.131")
    on_path = _fake_ptxas(tmp_path / "tools", "12.3.107")
    monkeypatch.setattr(sys, "path", [str(site)])
    monkeypatch.setattr(h, "CUDA_ROOT", str(tmp_path / "cuda"))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda-home"))
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    monkeypatch.setenv("PATH", f"{tmp_path / 'empty'}:{tmp_path / 'tools'}")
    assert h.find_ptxas() == {
        "path": str(on_path),
        "version": "12.3.107",
        "source": "PATH",
        "xla_finds": True,
    }
    # --xla_gpu_cuda_data_dir comes first
    monkeypatch.setenv("XLA_FLAGS", f"--xla_gpu_cuda_data_dir={tmp_path / 'cuda-home'}")
    assert h.find_ptxas()["path"] == str(home)
    assert h.find_ptxas()["source"] == "XLA_FLAGS"
    monkeypatch.delenv("XLA_FLAGS")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert h.find_ptxas() == {
        "path": str(wheel),
        "version": "12.2.140",
        "source": "nvidia-cuda-nvcc wheel",
        "xla_finds": True,
    }
    wheel.unlink()
    assert h.find_ptxas() == {
        "path": str(home),
        "version": "12.4.131",
        "source": "CUDA_HOME",
        "xla_finds": False,
    }
    monkeypatch.delenv("CUDA_HOME")
    assert h.find_ptxas("12.2") == {
        "path": None,
        "searched": [
            "PATH",
            f"{tmp_path}/cuda-12.2/bin",
            f"{tmp_path}/cuda/bin",
            f"{site}/nvidia/cuda_nvcc/bin",
        ],
    }
    toolkit = _fake_ptxas(tmp_path / "cuda-12.2" / "bin", "12.2.140")
    assert h.find_ptxas("12.2")["path"] == str(toolkit)
    assert h.find_ptxas("12.2")["source"] == "CUDA toolkit"


@pytest.mark.parametrize(
    ("cuda", "wheel"),
    [
        ("11.8", "nvidia-cuda-nvcc-cu11"),
        ("12.2", "nvidia-cuda-nvcc-cu12"),
        ("13.0", "nvidia-cuda-nvcc"),
        (None, "nvidia-cuda-nvcc"),
    ],
)
def test_nvcc_wheel_names(cuda: Any, wheel: str) -> None:
    assert h.nvcc_wheel(cuda) == wheel


class FakeTensor:
    """Enough of a tensor for TorchAdapter.xla_program to build its inputs."""

    def __init__(self, *shape: int) -> None:
        self.shape = shape

    def _same(self, *args: Any, **kwargs: Any) -> FakeTensor:
        return self

    __mul__ = __rmul__ = __sub__ = __add__ = __matmul__ = _same
    to = mean = abs = max = _same


def fake_torch(**attrs: Any) -> Any:
    import types

    torch = types.SimpleNamespace(
        __version__="2.4.0",
        rand=lambda *shape, generator=None: FakeTensor(*shape),
        tanh=lambda t: t,
        Generator=lambda: types.SimpleNamespace(manual_seed=lambda seed: None),
    )
    for name, value in attrs.items():
        setattr(torch, name, value)
    return torch


@pytest.mark.parametrize(
    ("adapter", "module", "on_gpu", "names", "skipped"),
    [
        (
            h.TensorFlowAdapter,
            None,
            True,
            ["eager", "fit_float32", "fit_mixed_float16", "fit_jit_compile"],
            {},
        ),
        (h.TorchAdapter, {"compile": print}, True, ["eager", "autocast", "compile"], {}),
        (
            h.TorchAdapter,
            {"compile": print},
            False,
            ["eager", "autocast", "compile"],
            {
                "compile": "torch.compile training runs on the GPU only "
                "(the xla check covers the CPU)"
            },
        ),
        (
            h.TorchAdapter,
            {"__version__": "1.13.1"},
            True,
            ["eager", "autocast", "compile"],
            {"compile": "PyTorch 1.13.1 has no torch.compile (it came with 2.0)"},
        ),
        (h.JaxAdapter, None, True, ["eager", "jit", "jit_bfloat16"], {}),
        (
            h.JaxAdapter,
            None,
            False,
            ["eager", "jit", "jit_bfloat16"],
            {"jit_bfloat16": "bfloat16 compute is trained on the GPU only"},
        ),
    ],
)
def test_each_adapter_trains_a_plain_loop_first_and_its_variants(
    adapter: Any, module: Any, on_gpu: bool, names: list[str], skipped: dict[str, str]
) -> None:
    a = adapter()
    if module is not None:
        a.module = fake_torch(**module)
    variants = a.train_variants(on_gpu)
    assert [v.name for v in variants] == names
    assert [v.plain for v in variants] == [True] + [False] * (len(names) - 1)
    assert {v.name: v.skip for v in variants if v.skip} == skipped
    compiled = {v.name for v in variants if v.compiled}
    assert compiled == {n for n in names if "jit" in n or n == "compile"}
    assert a.train_model  # said in the summary


def test_tensorflow_weights_device_under_keras_2_and_keras_3() -> None:
    import types

    gpu = "/job:localhost/replica:0/task:0/device:GPU:0"
    keras2 = types.SimpleNamespace(device=gpu)  # a tf.Variable
    keras3 = types.SimpleNamespace(value=types.SimpleNamespace(device=gpu))  # no .device
    assert h.TensorFlowAdapter._variable_device(keras2) == gpu
    assert h.TensorFlowAdapter._variable_device(keras3) == gpu
    assert h.TensorFlowAdapter._variable_device(object()) == "None"  # then the check FAILs


def test_torch_adapter_without_torch_compile_skips() -> None:
    adapter = h.TorchAdapter()
    adapter.module = fake_torch(__version__="1.13.1")
    with pytest.raises(h.XlaUnavailable, match=r"^PyTorch 1.13.1 has no torch.compile"):
        adapter.xla_program(on_gpu=False)


def test_torch_compile_failure_is_a_warning_with_the_reason(fake: Fake, tmp_path: Path) -> None:
    def compile(fn: Any, fullgraph: bool = False) -> Any:
        assert fullgraph  # a graph break must be an error, not a silent fallback

        def run(*args: Any) -> Any:
            raise RuntimeError("InvalidCxxCompiler: No working C++ compiler found")

        return run

    adapter = h.TorchAdapter()
    adapter.module = fake_torch(compile=compile)
    ctx = context()
    ctx.loaded = adapter
    ctx.gpus = []
    verdict = h.check_xla(ctx)
    assert (verdict.status, verdict.reason) == (
        "WARN",
        "torch.compile (TorchInductor) failed on the CPU: RuntimeError: InvalidCxxCompiler: "
        "No working C++ compiler found",
    )


def test_tensorflow_adapter_needs_ptxas_and_others_do_not() -> None:
    assert h.TensorFlowAdapter.xla_needs_ptxas is True
    assert (h.TorchAdapter.xla_needs_ptxas, h.JaxAdapter.xla_needs_ptxas) == (False, False)
    assert (h.TensorFlowAdapter.xla_failure, h.JaxAdapter.xla_failure) == ("FAIL", "FAIL")
    assert h.TorchAdapter.xla_failure == "WARN"


@pytest.mark.parametrize(
    ("device", "short"),
    [
        ("/job:localhost/replica:0/task:0/device:GPU:0", "GPU:0"),
        ("cuda:0", "cuda:0"),
        ("TFRT_CPU_0", "TFRT_CPU_0"),
    ],
)
def test_short_device(device: str, short: str) -> None:
    assert h.short_device(device) == short


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


def _oldest_python() -> str | None:
    """CPython 3.8 (the oldest the harness supports) from pyenv or PATH, if here."""
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    found = sorted(root.glob("3.8.*/bin/python3.8"))
    if found:
        return str(found[-1])
    which = shutil.which("python3.8")
    return which if which and "shims" not in which else None


def _python(which: str) -> str:
    if which == "this":
        return sys.executable
    if sys.version_info[:2] == (3, 8):
        pytest.skip("this interpreter is CPython 3.8 already")
    oldest = _oldest_python()
    if oldest is None:
        pytest.skip("no CPython 3.8 here (pyenv install 3.8 to run the harness on it)")
    return oldest


PYTHONS = pytest.mark.parametrize(
    "python", ["this", pytest.param("3.8", marks=pytest.mark.other_python)]
)


def run_file(
    tmp_path: Path, python: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_python(python), str(HARNESS_PATH), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        cwd=tmp_path,
    )


@PYTHONS
def test_stdout_holds_only_the_json_and_crashes_are_reported(tmp_path: Path, python: str) -> None:
    (tmp_path / "jax").mkdir()
    (tmp_path / "jax" / "__init__.py").write_text(FAKE_JAX)
    out = run_file(tmp_path, python, "--framework", "jax", env={"PYTHONPATH": str(tmp_path)})
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)  # nothing but the document
    assert doc["schema"] == "envlock.smoke/v1"
    assert doc["status"] == "FAILED"
    assert doc["version"] == "0.4.30"
    assert [(c["name"], c["status"]) for c in doc["checks"]] == [
        ("import", "PASS"),
        ("framework_version", "SKIP"),
        ("build_cuda", "SKIP"),
        ("build_cudnn", "SKIP"),
        ("gpu_visible", "FAIL"),
        ("compute_capability", "SKIP"),
        ("cudnn_runtime", "SKIP"),
        ("op_on_gpu", "SKIP"),
        ("xla", "FAIL"),
        ("benchmark_fp32", "FAIL"),
        ("train", "SKIP"),  # on by default; this fake jax has no jax.lax to train with
    ]
    gpu = next(c for c in doc["checks"] if c["name"] == "gpu_visible")
    assert gpu["reason"].startswith("gpu_visible crashed: RuntimeError: Unable to initialize")
    assert gpu["error"]["where"].endswith("in devices")
    assert "chatter from python on stdout" in out.stderr
    assert "chatter from C on fd 1" in out.stderr
    assert "Traceback" not in out.stderr


@PYTHONS
def test_harness_runs_without_the_framework_installed(tmp_path: Path, python: str) -> None:
    out = run_file(
        tmp_path, python, "--framework", "tensorflow", "--allow-cpu", env={"PYTHONPATH": ""}
    )
    doc = json.loads(out.stdout)
    assert out.returncode == 1
    assert [c["name"] for c in doc["checks"]] == ["import"]
    assert doc["checks"][-1]["reason"] == (
        "cannot import tensorflow: ModuleNotFoundError: No module named 'tensorflow'"
    )
    assert doc["framework"] == "tensorflow"
    assert doc["settings"]["memory_growth"] is True
    assert doc["host"]["python"].startswith("3.8." if python == "3.8" else "3.")


def _imported_top_names(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_harness_is_standard_library_only() -> None:
    """Every import is the standard library of the Python running this (3.8 included)
    or a framework under test; found by where the module lives, not by a list."""
    tree = ast.parse(HARNESS_PATH.read_text(encoding="utf-8"), feature_version=(3, 8))
    stdlib = sysconfig.get_paths()["stdlib"]
    frameworks = {"tensorflow", "torch", "jax", "jaxlib"}
    names = _imported_top_names(tree) - frameworks - {"__future__"}
    assert {"json", "argparse", "dataclasses", "ctypes"} <= names
    for name in sorted(names):
        spec = importlib.util.find_spec(name)
        assert spec is not None, name
        origin = spec.origin or ""
        in_stdlib = origin.startswith(stdlib) and "-packages" not in origin
        built_in = name in sys.builtin_module_names or origin in ("built-in", "frozen")
        assert built_in or in_stdlib, (name, origin)


# -- the 2.22 layout: build facts from the installed package's headers ----------------

CUDA_CONFIG_2_22 = """#ifndef CUDA_CUDA_CONFIG_H_
#define CUDA_CUDA_CONFIG_H_

#define TF_CUDA_VERSION "12.5.1"
#define TF_CUDNN_VERSION "9"
#define TF_CUDA_TOOLKIT_PATH ""

#define TF_CUDA_COMPUTE_CAPABILITIES 60, 70, 80, 89, 90

#endif  // CUDA_CUDA_CONFIG_H_
"""
CUDNN_VERSION_2_22 = """#define CUDNN_MAJOR 9
#define CUDNN_MINOR 10
#define CUDNN_PATCHLEVEL 0
#define CUDNN_VERSION (CUDNN_MAJOR * 10000 + CUDNN_MINOR * 100 + CUDNN_PATCHLEVEL)
"""


def fake_tensorflow_tree(root: Path, build_info: str, headers: bool = True) -> Path:
    """An installed 'tensorflow' package as 2.22.0rc0 lays it out: build_info says
    what kind of build it is, the headers say the rest."""
    pkg = root / "tensorflow"
    (pkg / "python" / "platform").mkdir(parents=True)
    (pkg / "python" / "__init__.py").write_text("")
    (pkg / "python" / "platform" / "__init__.py").write_text("")
    (pkg / "python" / "platform" / "build_info.py").write_text(build_info)
    (pkg / "__init__.py").write_text(
        "import types\n"
        "from tensorflow.python.platform import build_info as _bi\n"
        "__version__ = '2.22.0rc0'\n"
        "sysconfig = types.SimpleNamespace(get_build_info=lambda: dict(_bi.build_info))\n"
    )
    if headers:
        config = pkg / "include" / "third_party" / "gpus" / "cuda"
        cudnn = pkg / "include" / "external" / "cuda_cudnn" / "include"
        config.mkdir(parents=True)
        cudnn.mkdir(parents=True)
        (config / "cuda_config.h").write_text(CUDA_CONFIG_2_22)
        (cudnn / "cudnn_version.h").write_text(CUDNN_VERSION_2_22)
    return pkg


BUILD_INFO_2_22 = (
    "import collections\n"
    "build_info = collections.OrderedDict([('is_cuda_build', True), "
    "('is_rocm_build', False), ('is_tensorrt_build', False)])\n"
)


def _adapter_build_info(root: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    for name in list(sys.modules):
        if name == "tensorflow" or name.startswith("tensorflow."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(root))
    adapter = h.TensorFlowAdapter()
    adapter.load()
    try:
        return adapter.build_info()
    finally:
        for name in list(sys.modules):
            if name == "tensorflow" or name.startswith("tensorflow."):
                del sys.modules[name]


def test_a_2_22_install_gives_its_facts_from_its_headers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_tensorflow_tree(tmp_path, BUILD_INFO_2_22)
    info = _adapter_build_info(tmp_path, monkeypatch)
    assert info["cuda"] == "12.5.1"
    assert info["cudnn"] == "9.10.0"
    assert info["compute_capabilities"] == ["sm_60", "sm_70", "sm_80", "sm_89", "compute_90"]
    assert info["is_cuda_build"] is True
    assert info["from"] == {
        "cuda_version": "cuda_config.h",
        "cudnn_version": "cudnn_version.h",
        "cuda_compute_capabilities": "cuda_config.h+inferred-ptx",
    }
    # what TensorFlow itself said stays as it said it
    assert info["raw"] == {
        "is_cuda_build": True,
        "is_rocm_build": False,
        "is_tensorrt_build": False,
    }


def test_the_checks_use_the_header_facts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lock's CUDA and cuDNN compared with what the 2.22 headers say: PASS, not a
    'build info names no CUDA' failure."""
    fake_tensorflow_tree(tmp_path, BUILD_INFO_2_22)
    build = _adapter_build_info(tmp_path, monkeypatch)
    ctx = h.Context.__new__(h.Context)
    ctx.build = build
    ctx.expect = {"cuda": "12.5", "cudnn": "9.10"}
    ctx.framework = "tensorflow"
    assert h.check_build_cuda(ctx).status == h.PASS
    assert h.check_build_cudnn(ctx).status == h.PASS
    ctx.expect = {"cuda": "12.8", "cudnn": "9.10"}
    verdict = h.check_build_cuda(ctx)
    assert (
        verdict.status == h.FAIL and "built with CUDA 12.5.1, the lock says 12.8" in verdict.reason
    )


def test_build_info_wins_where_it_states_a_fact(tmp_path: Path) -> None:
    pkg = fake_tensorflow_tree(tmp_path, BUILD_INFO_2_22)
    stated = {"cuda_version": "12.5.1", "cudnn_version": "9", "is_cuda_build": True}
    info, sources = h.with_header_facts(stated, str(pkg))
    assert info["cudnn_version"] == "9"  # build_info's own word is kept
    assert info["cuda_compute_capabilities"] == ["sm_60", "sm_70", "sm_80", "sm_89", "compute_90"]
    assert sources == {
        "cuda_version": "build_info",
        "cudnn_version": "build_info",
        "cuda_compute_capabilities": "cuda_config.h+inferred-ptx",
    }
    # no headers (a wheel before the include/ tree, a trimmed install): nothing invented
    bare = fake_tensorflow_tree(tmp_path / "bare", BUILD_INFO_2_22, headers=False)
    assert h.with_header_facts({"is_cuda_build": True}, str(bare)) == ({"is_cuda_build": True}, {})
    assert h.header_build_facts(str(tmp_path / "nowhere")) == {}


def test_a_cpu_builds_empty_header_gives_no_facts(tmp_path: Path) -> None:
    """tensorflow-cpu 2.15.1's cuda_config.h states empty strings and no capabilities."""
    pkg = fake_tensorflow_tree(tmp_path, BUILD_INFO_2_22)
    config = pkg / "include" / "third_party" / "gpus" / "cuda" / "cuda_config.h"
    config.write_text(
        '#define TF_CUDA_VERSION ""\n#define TF_CUDNN_VERSION ""\n'
        "#define TF_CUDA_COMPUTE_CAPABILITIES \n"
    )
    (pkg / "include" / "external" / "cuda_cudnn" / "include" / "cudnn_version.h").unlink()
    assert h.header_build_facts(str(pkg)) == {}


@pytest.mark.parametrize(
    ("driver", "status", "reason"),
    [
        (
            "580.95.05",
            "PASS",
            "driver 580.95.05 >= 580, the lock's floor: torch 2.15.0 (CUDA 13.2, cuda-toolkit "
            "13.2.2)",
        ),
        (
            "570.86.15",
            "FAIL",
            "driver 570.86.15 is older than 580, the lock's floor: torch 2.15.0 (CUDA 13.2, "
            "cuda-toolkit 13.2.2)",
        ),
        (
            None,
            "SKIP",
            "no NVIDIA driver to compare with the lock's floor 580 (torch 2.15.0 "
            "(CUDA 13.2, cuda-toolkit 13.2.2))",
        ),
    ],
)
def test_the_driver_is_held_to_the_whole_locks_floor(
    monkeypatch: pytest.MonkeyPatch, driver: str | None, status: str, reason: str
) -> None:
    """expect.json's driver_min is the floor of every package of the lock (#40): the
    image of a tensorflow + torch lock fails early on a driver torch's CUDA 13 cannot
    use, naming torch, whatever TensorFlow finds."""
    ctx = h.Context(h.parse_args([]))
    ctx.expect = {
        "driver_min": "580",
        "driver_set_by": "torch 2.15.0 (CUDA 13.2, cuda-toolkit 13.2.2)",
    }
    monkeypatch.setattr(h, "driver_version", lambda: driver)
    verdict = h.check_driver_floor(ctx)
    assert verdict is not None and (verdict.status, verdict.reason) == (status, reason)
    ctx.expect = {}  # a bundle made before: no check
    assert h.check_driver_floor(ctx) is None
