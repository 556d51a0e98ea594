"""Known errors as data: the shipped file validates, and a log corpus written here
gets the right finding per known message and none for clean logs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from envlock.cli import main
from envlock.doctor import knownerrors
from envlock.errors import DataError
from envlock.lock import read_lock

LOCK_DIR = Path(__file__).parent / "golden" / "render" / "tf2.15-system"

# One log per known error id: a few ordinary lines around the message as TensorFlow
# (or the shell, or Python) prints it.
CORPUS = {
    "cuda-driver-insufficient": "2024-03-01 10:00:01.5: E external/local_xla/xla/stream_executor/"
    "cuda/cuda_driver.cc:282] failed call to cuInit: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH\n"
    "tensorflow.python.framework.errors_impl.InternalError: cudaGetDevice() failed. Status: "
    "CUDA driver version is insufficient for CUDA runtime version",
    "dlopen-failed": "2021-06-01 12:00:00.1: W tensorflow/stream_executor/platform/default/"
    "dso_loader.cc:64] Could not load dynamic library 'libcudnn.so.8'; dlerror: libcudnn.so.8: "
    "cannot open shared object file: No such file or directory",
    "cannot-dlopen-gpu-libraries": "2021-06-01 12:00:00.2: W tensorflow/core/common_runtime/gpu/"
    "gpu_device.cc:1850] Cannot dlopen some GPU libraries. Please make sure the missing libraries "
    "mentioned above are installed properly if you would like to use GPU.",
    "cudnn-version-mismatch": "E tensorflow/stream_executor/cuda/cuda_dnn.cc:361] Loaded runtime "
    "CuDNN library: 8.0.5 but source was compiled with: 8.1.0.  CuDNN library needs to have "
    "matching major version and equal or higher minor version.",
    "cudnn-handle": "E tensorflow/stream_executor/cuda/cuda_dnn.cc:329] Could not create cudnn "
    "handle: CUDNN_STATUS_INTERNAL_ERROR",
    "gpu-out-of-memory": "tensorflow.python.framework.errors_impl.ResourceExhaustedError: "
    "OOM when allocating tensor with shape[256,1024,1024] and type float on "
    "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc",
    "no-cuda-device": "E tensorflow/stream_executor/cuda/cuda_driver.cc:271] failed call to "
    "cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected",
    "ptx-jit": "W tensorflow/core/common_runtime/gpu/gpu_device.cc:2211] TensorFlow was not "
    "built with CUDA kernel binaries compatible with compute capability 9.0. CUDA kernels "
    "will be jit-compiled from PTX, which could take 30 minutes or longer.",
    "keras-import": 'Traceback (most recent call last):\n  File "train.py", line 3, in '
    "<module>\n    from tensorflow.keras.layers.experimental import preprocessing\n"
    "ModuleNotFoundError: No module named 'tensorflow.keras.layers.experimental'",
    "host-memory-killed": "Epoch 3/10\n 812/1563 [==============>...............] - ETA: 41s"
    " - loss: 0.5121\nKilled",
    "tensorrt-missing": "2024-03-01 10:00:03.1: W tensorflow/compiler/tf2tensorrt/utils/"
    "py_utils.cc:38] TF-TRT Warning: Could not find TensorRT",
    "factory-registration": "E external/local_xla/xla/stream_executor/cuda/cuda_dnn.cc:9261] "
    "Unable to register cuDNN factory: Attempting to register factory for plugin cuDNN when one "
    "has already been registered",
    "numa-node": "I external/local_xla/xla/stream_executor/cuda/cuda_executor.cc:901] "
    "successful NUMA node read from SysFS had negative value (-1), but there must be at least "
    "one NUMA node, so returning NUMA node zero.",
    "cpu-instructions": "I tensorflow/core/platform/cpu_feature_guard.cc:182] This TensorFlow "
    "binary is optimized to use available CPU instructions in performance-critical operations.",
}
AROUND = "Epoch 1/2\n1563/1563 [==============================] - 6s 3ms/step - loss: 1.52\n"

CLEAN = {
    "keras-training": "Epoch 1/3\n1875/1875 [==============================] - 4s 2ms/step - "
    "loss: 0.2954 - accuracy: 0.9144\nEpoch 2/3\n1875/1875 [==============================] - "
    "3s 2ms/step - loss: 0.1432 - accuracy: 0.9572\n313/313 - 0s - loss: 0.0901 - accuracy: 0.97\n",
    "pip-install": "Collecting numpy==1.26.4\n  Using cached numpy-1.26.4-cp311-cp311-manylinux_"
    "2_17_x86_64.manylinux2014_x86_64.whl (18.3 MB)\nInstalling collected packages: numpy\n"
    "Successfully installed numpy-1.26.4\n",
    "unrelated": "GET /index.html 200 512\nkilled 0 processes\nthe memory check passed\n"
    "ImportError is a Python exception class; no keras here\n",
    "empty": "",
}


@pytest.fixture(scope="module")
def known() -> tuple[knownerrors.KnownError, ...]:
    return knownerrors.load()


def test_shipped_file_covers_every_corpus_log(known: tuple[knownerrors.KnownError, ...]) -> None:
    assert sorted(e.id for e in known) == sorted(CORPUS)
    info = {e.id for e in known if e.severity == "INFO"}
    assert info == {"tensorrt-missing", "factory-registration", "numa-node", "cpu-instructions"}


@pytest.mark.parametrize("ident", sorted(CORPUS))
def test_each_known_message_gives_its_finding(
    ident: str, known: tuple[knownerrors.KnownError, ...]
) -> None:
    log = AROUND + CORPUS[ident] + "\n" + AROUND
    matches = knownerrors.match_log(log.splitlines(), known)
    assert [m.error.id for m in matches] == [ident]
    assert matches[0].line_number > 2 and matches[0].count == 1


@pytest.mark.parametrize("name", sorted(CLEAN))
def test_clean_logs_give_no_finding(name: str, known: tuple[knownerrors.KnownError, ...]) -> None:
    assert knownerrors.match_log(CLEAN[name].splitlines(), known) == []


def test_fix_uses_what_the_lock_knows(known: tuple[knownerrors.KnownError, ...]) -> None:
    lock = read_lock(LOCK_DIR)
    log = CORPUS["cudnn-version-mismatch"].splitlines() * 3
    (finding,) = knownerrors.explain(knownerrors.match_log(log, known), lock.resolution, "env")
    assert finding.check == "log cudnn-version-mismatch" and finding.status == "FAIL"
    assert finding.cause.startswith("line 1 (3 times): ")
    assert "(8.9)" in finding.fix and "nvidia/cuda:12.2.2-cudnn8-runtime-ubuntu22.04" in finding.fix
    (generic,) = knownerrors.explain(knownerrors.match_log(log, known), None, None)
    assert "{" not in generic.fix and "the locked" in generic.fix


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(argv)
    return code, json.loads(capsys.readouterr().out)


def test_cli_log_healthy_noise_is_info_and_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "healthy.log"
    noise = ["tensorrt-missing", "factory-registration", "numa-node", "cpu-instructions"]
    log.write_text(AROUND + "\n".join(CORPUS[i] for i in noise) + "\n" + CLEAN["keras-training"])
    code, doc = run_cli(["doctor", "--log", str(log), "--json"], capsys)
    assert code == 0 and doc["status"] == "PASSED"
    assert sorted(f["check"] for f in doc["findings"]) == sorted(f"log {i}" for i in noise)
    assert {f["status"] for f in doc["findings"]} == {"INFO"}
    assert "interpreter" not in doc  # only --log: no venv probed


def test_cli_log_failure_exits_1_with_lock_facts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO(AROUND + CORPUS["cuda-driver-insufficient"]))
    code = main(["doctor", "--log", "-"])
    out = capsys.readouterr().out
    assert code == 1
    assert out.startswith("FAILED\n")
    assert "log cuda-driver-insufficient" in out and "(the CUDA build's minimum)" in out


def test_cli_log_unreadable_is_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["doctor", "--log", str(tmp_path / "absent.log")])
    assert code == 2
    assert "--log" in capsys.readouterr().err


def test_clean_log_through_the_cli_has_no_findings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "clean.log"
    log.write_text(CLEAN["keras-training"] + CLEAN["pip-install"])
    code, doc = run_cli(["doctor", "--log", str(log), "--json"], capsys)
    assert (code, doc["status"], doc["findings"]) == (0, "PASSED", [])


BASE = 'schema_version = 1\ndata_version = "2026-12-01"\n[[errors]]\n'
ENTRY = 'id = "x"\nseverity = "FAIL"\ncause = "c"\nsource = "s"\n'


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (ENTRY + "pattern = '(unclosed'\nfix = 'f'\n", "errors[0].pattern: not a regular"),
        (ENTRY + "pattern = 'a*'\nfix = 'f'\n", "errors[0].pattern: matches an empty line"),
        (ENTRY + "pattern = 'a'\nfix = '{nope}'\n", "errors[0].fix: unknown placeholder {nope}"),
        (ENTRY.replace("FAIL", "BAD") + "pattern = 'a'\nfix = 'f'\n", "errors[0].severity"),
        (ENTRY + "pattern = 'a'\nfix = 'f'\nextra = 1\n", "errors[0].extra: unknown field"),
        (ENTRY + "pattern = 'a'\n", "errors[0].fix: missing"),
    ],
)
def test_damaged_entries_name_their_path(body: str, problem: str) -> None:
    from envlock.readers import parse_toml

    with pytest.raises(DataError) as err:
        knownerrors.parse(parse_toml(BASE + body, "t.toml"))
    assert problem in err.value.message


def test_duplicate_ids_are_refused() -> None:
    from envlock.readers import parse_toml

    row = ENTRY + "pattern = 'a'\nfix = 'f'\n"
    with pytest.raises(DataError, match=r"errors\[1\]\.id"):
        knownerrors.parse(parse_toml(BASE + row + "[[errors]]\n" + row, "t.toml"))
