"""The harness against real TensorFlow 2.15.1 on this machine's CPU.

A venv with tensorflow==2.15.1 is made once for the module (uv, from the
index in this machine's configuration). TensorFlow finds no GPU here, so the
smoke result must say so loudly, unless --allow-cpu was asked for.

Four harness runs serve the module's tests (each run imports TensorFlow, a few
seconds of CPU; eight tests had eight runs): the strict default run; the
--allow-cpu run from the command line (training, XLA and a small benchmark); a
runtime.json with mixed_float16; and a lock that does not match, without
training. Each is a module fixture, so a test run alone starts only its own.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from venv_support import make_tf215_venv

from envlock.smoke import HARNESS_PATH, runner
from envlock.smoke.result import SmokeRun

pytestmark = [pytest.mark.slow, pytest.mark.network]

REPO = Path(__file__).resolve().parent.parent
EXPECT = {
    "framework": "tensorflow",
    "version": "2.15.1",
    "python": "3.11",
    "cuda": "12.2",
    "cudnn": "8.9",
    "compute_capabilities": ["sm_50", "sm_60", "sm_70", "sm_75", "compute_80"],
}


@pytest.fixture(scope="module")
def tf_python(tmp_path_factory: pytest.TempPathFactory, shared_uv_cache: Path) -> str:
    """tensorflow==2.15.1 from the configured index, through the run's shared uv cache
    (the other real-TensorFlow venvs' one: TensorFlow is fetched once a run)."""
    venv = make_tf215_venv(tmp_path_factory.mktemp("tf215") / "venv", shared_uv_cache)
    return str(venv / "bin" / "python")


def bundle(tmp_path: Path, expect: dict[str, Any], runtime: dict[str, Any] | None = None) -> Path:
    (tmp_path / "expect.json").write_text(json.dumps(expect))
    if runtime is not None:
        (tmp_path / "runtime.json").write_text(json.dumps(runtime))
    return tmp_path


def checks(result: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["name"]: (c["status"], c["reason"]) for c in result["checks"]}


@pytest.fixture(scope="module")
def strict_run(tf_python: str, tmp_path_factory: pytest.TempPathFactory) -> SmokeRun:
    """The default run without --allow-cpu (benchmark at the CPU's default size)."""
    folder = bundle(tmp_path_factory.mktemp("strict"), EXPECT)
    return runner.run_on_host(None, folder, False, python=tf_python)


@pytest.fixture(scope="module")
def cli_run(
    tf_python: str, tmp_path_factory: pytest.TempPathFactory
) -> subprocess.CompletedProcess[str]:
    """The harness from the command line with --allow-cpu: training, XLA, a 64x64
    benchmark, and a runtime.json that keeps float32."""
    runtime = {"schema": "envlock.runtime/v1", "memory_growth": True, "mixed_precision": "float32"}
    folder = bundle(tmp_path_factory.mktemp("cli"), EXPECT, runtime)
    return subprocess.run(
        [tf_python, str(HARNESS_PATH), "--allow-cpu", "--size", "64"]
        + ["--expect", str(folder / "expect.json")],
        capture_output=True,
        text=True,
        timeout=300,
    )


MIXED_RUNTIME = {
    "schema": "envlock.runtime/v1",
    "visible_devices": None,
    "memory_growth": True,
    "mixed_precision": "mixed_float16",
    "determinism": False,
    "seed": 7,
}


@pytest.fixture(scope="module")
def mixed_run(tf_python: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SmokeRun]:
    """runtime.json asks for mixed_float16; four training steps a variant."""
    folder = bundle(tmp_path_factory.mktemp("mixed"), EXPECT, MIXED_RUNTIME)
    result = runner.run_on_host(
        None, folder, True, python=tf_python, size=64, extra=["--training-steps", "4"]
    )
    return folder, result


@pytest.fixture(scope="module")
def mismatch_run(tf_python: str, tmp_path_factory: pytest.TempPathFactory) -> SmokeRun:
    """A lock that does not match the installed TensorFlow, with --no-training."""
    wrong = {**EXPECT, "version": "2.15.0", "cuda": "11.8", "cudnn": "9.1"}
    folder = bundle(tmp_path_factory.mktemp("mismatch"), wrong)
    return runner.run_on_host(
        None, folder, True, python=tf_python, size=64, extra=["--no-training"]
    )


def test_no_gpu_is_a_loud_failure(strict_run: SmokeRun) -> None:
    result = strict_run
    got = checks(result)
    assert result["status"] == "FAILED"
    assert runner.exit_code_for(result) == 1
    assert result["framework"] == "tensorflow"
    assert result["version"] == "2.15.1"
    assert result["build_info"]["cuda"] == "12.2"
    assert result["build_info"]["cudnn"] == "8"
    assert result["build_info"]["compute_capabilities"] == EXPECT["compute_capabilities"]
    # 2.15.1's build_info states all three (its headers agree; not needed here)
    assert result["build_info"]["from"] == {
        "cuda_version": "build_info",
        "cudnn_version": "build_info",
        "cuda_compute_capabilities": "build_info",
    }
    assert got["framework_version"] == ("PASS", "TensorFlow 2.15.1 as locked")
    assert got["build_cuda"] == ("PASS", "built with CUDA 12.2 as locked")
    assert got["build_cudnn"] == (
        "PASS",
        "built with cuDNN 8.9 as locked (build info gives only 8)",
    )
    assert got["gpu_visible"] == ("FAIL", "no GPU visible: TensorFlow runs on the CPU")
    assert result["gpus"] == []
    assert result["settings"]["precision_policy"] == "float32"
    bench = result["benchmark"]["results"]
    assert [(r["device"], r["dtype"], r["n"]) for r in bench] == [("cpu", "fp32", 512)]
    assert bench[0]["tflops"] > 0


def test_allow_cpu_warns_and_benchmarks_the_cpu(
    cli_run: subprocess.CompletedProcess[str],
) -> None:
    out = cli_run
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["status"] == "WARNED"
    assert checks(result)["gpu_visible"] == (
        "WARN",
        "no GPU visible: TensorFlow runs on the CPU (--allow-cpu)",
    )
    bench = result["benchmark"]["results"][0]
    assert bench["device"] == "cpu" and bench["n"] == 64
    assert bench["seconds_per_op"]["min"] <= bench["seconds_per_op"]["median"]
    assert "Traceback" not in out.stderr


def test_a_lock_that_does_not_match_fails_each_check(mismatch_run: SmokeRun) -> None:
    result = mismatch_run
    got = checks(result)
    assert result["status"] == "FAILED"
    assert got["framework_version"] == (
        "FAIL",
        "TensorFlow 2.15.1 is installed, the lock says 2.15.0",
    )
    assert got["build_cuda"] == ("FAIL", "built with CUDA 12.2, the lock says 11.8")
    assert got["build_cudnn"] == ("FAIL", "built with cuDNN 8, the lock says 9.1")


def test_runtime_settings_are_applied_and_recorded(
    mixed_run: tuple[Path, SmokeRun],
) -> None:
    folder, result = mixed_run
    runtime = MIXED_RUNTIME
    got = checks(result)
    assert got["precision_policy"] == (
        "PASS",
        "Keras precision policy mixed_float16 in force (runtime.json)",
    )
    assert result["settings"]["precision_policy"] == "mixed_float16"
    assert result["settings"]["runtime"] == runtime
    assert result["settings"]["runtime_config"] == str(folder / "runtime.json")
    assert result["status"] == "WARNED"


TF_TRAIN = ["train_eager", "train_fit_float32", "train_fit_mixed_float16", "train_fit_jit_compile"]


def test_training_checks_pass_on_the_cpu_by_default(
    cli_run: subprocess.CompletedProcess[str],
) -> None:
    out = cli_run
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    got = checks(result)
    assert result["status"] == "WARNED", got  # gpu_visible under --allow-cpu, nothing else
    assert [c["name"] for c in result["checks"] if c["status"] == "WARN"] == ["gpu_visible"]
    assert [c["name"] for c in result["checks"]][-4:] == TF_TRAIN
    whats = {
        "train_eager": r"an eager tf\.GradientTape loop, float32",
        "train_fit_float32": r"model\.fit on tf\.data \(prefetch\), float32",
        "train_fit_mixed_float16": r"model\.fit on tf\.data \(prefetch\), mixed_float16 policy",
        "train_fit_jit_compile": r"model\.fit on tf\.data \(prefetch\), jit_compile=True",
    }
    for name, what in whats.items():
        status, reason = got[name]
        assert status == "PASS", (name, reason)
        tail = "" if name == "train_eager" else r", \d+\.\d\dx the plain loop's speed"
        assert re.fullmatch(
            what + r": loss \S+ -> \S+ in 8 steps on CPU:0, \d+\.\d\d ms a step "
            r"\(first \d+\.\d\d s\)" + tail,
            reason,
        ), reason
    training = result["benchmark"]["training"]
    assert training["model"].startswith("Conv2D 3x3 (no bias) + BatchNormalization")
    assert (training["device"], training["batch"], training["input"]) == ("cpu", 16, "8x8x3")
    assert training["memory_growth"] is True and training["mixed_precision"] == "float32"
    assert 0 < training["seconds"] < 60  # all four variants; about 4 s on an idle core
    runs = {r["variant"]: r for r in training["runs"]}
    assert list(runs) == [n[len("train_") :] for n in TF_TRAIN]
    for run in runs.values():
        assert run["device"] == "CPU:0" and run["steps"] == 8
        assert 0 < run["loss_last"] < run["loss_first"] < 10  # a real cross-entropy, falling
        assert 0 < run["seconds_per_step"] < run["first_step_s"] + 1
    # the policy each variant trained under, and runtime.json's put back after
    assert runs["fit_mixed_float16"]["compute_dtype"] == "float16"
    assert runs["fit_mixed_float16"]["policy"] == "mixed_float16"
    assert {runs[v]["compute_dtype"] for v in ("eager", "fit_float32", "fit_jit_compile")} == {
        "float32"
    }
    assert {r["runtime_policy"] for r in runs.values()} == {"float32"}
    assert result["settings"]["precision_policy"] == "float32"
    plain = runs["eager"]["seconds_per_step"]
    assert runs["fit_float32"]["speedup_vs_plain"] == pytest.approx(
        plain / runs["fit_float32"]["seconds_per_step"], rel=1e-2
    )
    fp32 = result["benchmark"]["results"][0]
    assert training["matmul_fp32_s"] == fp32["seconds_per_op"]["median"]


def test_runtime_mixed_precision_is_put_back_after_training(
    mixed_run: tuple[Path, SmokeRun],
) -> None:
    _, result = mixed_run
    got = checks(result)
    assert [got[n][0] for n in TF_TRAIN] == ["PASS"] * 4, got
    runs = {r["variant"]: r for r in result["benchmark"]["training"]["runs"]}
    assert runs["fit_float32"]["compute_dtype"] == "float32"  # each variant sets its own
    # each variant found runtime.json's policy in force: the one before put it back
    assert [r["runtime_policy"] for r in runs.values()] == ["mixed_float16"] * 4
    assert result["settings"]["precision_policy"] == "mixed_float16"
    assert {r["steps"] for r in runs.values()} == {4}


def test_no_training_leaves_the_training_checks_out(mismatch_run: SmokeRun) -> None:
    result = mismatch_run
    assert not [c for c in result["checks"] if c["name"].startswith("train")]
    assert "training" not in result["benchmark"]


def test_xla_compiles_and_matches_eager_on_the_cpu(
    cli_run: subprocess.CompletedProcess[str],
) -> None:
    assert cli_run.returncode == 0, cli_run.stderr
    result = json.loads(cli_run.stdout)
    assert result["status"] == "WARNED", checks(result)  # gpu_visible, with --allow-cpu
    entry = next(c for c in result["checks"] if c["name"] == "xla")
    assert entry["status"] == "PASS", entry
    assert re.fullmatch(
        r"tf\.function\(jit_compile=True\) compiled in \d+\.\d\d s, ran on CPU:0; "
        r"max difference to eager execution \S+",
        entry["reason"],
    )
    xla = entry["xla"]
    assert xla["compiled_with"] == "tf.function(jit_compile=True)"
    assert xla["device"] == "/job:localhost/replica:0/task:0/device:CPU:0"
    assert xla["max_difference"] <= xla["tolerance"] == 2e-3
    # the first call traces and compiles: slower than the compiled one after it, and
    # compile_s is the difference (how much slower is a speed, not checked here: a
    # loaded machine stretched the steady call to an eighth of the compile once)
    assert 0 < xla["steady_call_s"] < xla["first_call_s"] < 300
    compiled = xla["first_call_s"] - xla["steady_call_s"]
    assert xla["compile_s"] == pytest.approx(compiled, abs=2e-4) and xla["compile_s"] > 0
    assert set(xla["ptxas"]) in ({"path", "version", "source", "xla_finds"}, {"path", "searched"})
