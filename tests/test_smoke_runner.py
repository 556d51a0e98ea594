"""envlock smoke's runners without Docker: host runs, dead harnesses, usage errors."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from envlock.cli import main
from envlock.errors import UsageError
from envlock.smoke import HARNESS_PATH, container, runner

REPO = Path(__file__).resolve().parent.parent

FAKE_TORCH_CPU = """
__version__ = "2.9.0+cpu"
class _V:
    cuda = None
    git_version = "abc"
version = _V()
class _Cuda:
    @staticmethod
    def is_available():
        return False
cuda = _Cuda()
float32, float16, bfloat16 = "float32", "float16", "bfloat16"
class Generator:
    def __init__(self, device="cpu"):
        self.state = 0
    def manual_seed(self, seed):
        self.state = seed
        return self
def randn(rows, cols, device="cpu", dtype=None, generator=None):
    return [[float((r * cols + c) % 7) for c in range(cols)] for r in range(rows)]
def empty(rows, cols, device="cpu", dtype=None):
    return [[0.0] * cols for _ in range(rows)]
def matmul(a, b, out):
    for i, row in enumerate(a):
        for j in range(len(b[0])):
            out[i][j] = sum(x * b[k][j] for k, x in enumerate(row))
    return out
"""

SEGFAULT_TORCH = """
import ctypes
__version__ = "2.9.0"
class _V:
    cuda = "12.1"
    git_version = "abc"
version = _V()
class _Cudnn:
    @staticmethod
    def is_available():
        ctypes.string_at(0)  # the process dies here, halfway through the checks
backends = type("B", (), {"cudnn": _Cudnn})()
"""


def fake_module(tmp_path: Path, source: str, name: str = "torch") -> Path:
    folder = tmp_path / "site"
    (folder / name).mkdir(parents=True)
    (folder / name / "__init__.py").write_text(source)
    return folder


def test_host_run_uses_the_harness_in_a_subprocess(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(fake_module(tmp_path, FAKE_TORCH_CPU)))
    result = runner.run_on_host("torch", None, False, size=64)
    assert result["status"] == "FAILED"
    assert result["version"] == "2.9.0+cpu"
    assert result["host"]["python_executable"] == sys.executable
    gpu = next(c for c in result["checks"] if c["name"] == "gpu_visible")
    assert gpu["reason"] == "no GPU visible: PyTorch runs on the CPU"
    assert "envlock-smoke: FAIL gpu_visible" in capsys.readouterr().err

    # this fake torch has no torch.nn to train with: --no-training leaves the train checks out
    code = main(
        ["smoke", "--host", "--framework", "torch", "--allow-cpu", "--size", "8", "--json"]
        + ["--no-training"]
    )
    out = capsys.readouterr().out
    assert code == 0
    doc = json.loads(out)
    assert doc["status"] == "WARNED"
    assert not [c for c in doc["checks"] if c["name"].startswith("train")]
    assert "training" not in doc["benchmark"]
    assert doc["benchmark"]["results"][0]["device"] == "cpu"
    assert doc["benchmark"]["results"][0]["n"] == 8
    assert doc["benchmark"]["results"][0]["seconds_per_op"]["median"] > 0


def test_host_run_reads_expect_from_a_bundle_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(fake_module(tmp_path, FAKE_TORCH_CPU)))
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "expect.json").write_text(json.dumps({"framework": "torch", "version": "2.8.0"}))
    out_file = tmp_path / "out" / "result.json"
    code = main(
        [
            "smoke",
            "--host",
            "--expect",
            str(bundle),
            "--allow-cpu",
            "--size",
            "32",
            "-o",
            str(out_file),
        ]
    )
    table = capsys.readouterr().out
    assert code == 1
    assert table.splitlines()[0] == "FAILED: torch 2.9.0+cpu"
    assert (
        "FAIL    framework_version   PyTorch 2.9.0+cpu is installed, the lock says 2.8.0" in table
    )
    saved = json.loads(out_file.read_text())
    assert saved["expected"]["version"] == "2.8.0"
    assert saved["status"] == "FAILED"


def test_a_harness_that_dies_is_reported_as_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(fake_module(tmp_path, SEGFAULT_TORCH)))
    result = runner.run_on_host("torch", None, False, size=32)
    assert result["status"] == "FAILED"
    last = result["checks"][-1]
    assert last["name"] == "harness"
    assert last["reason"].startswith(
        "the harness died before reporting (killed by SIGSEGV) in the check build_info; "
    )
    assert last["died_in"] == "build_info"  # torch.backends.cudnn.is_available() died
    assert "broken_path" not in last  # it said nothing that names a path
    assert last["exit_code"] == -11


def test_a_harness_that_hangs_is_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hang = "import time\nprint('loading', flush=True)\ntime.sleep(600)\n"
    monkeypatch.setenv("PYTHONPATH", str(fake_module(tmp_path, hang)))
    result = runner.run_on_host("torch", None, False, timeout=3)
    assert result["status"] == "FAILED"
    assert result["checks"][-1]["reason"] == "the harness did not finish within 3 s"


def test_host_harness_log_is_streamed_while_it_runs(tmp_path: Path) -> None:
    """`smoke --host --verbose` shows the harness's progress as it comes, not at the end."""
    import time

    chatty = (
        "import sys, time\n"
        "sys.stderr.write('fake-torch: loading\\n'); sys.stderr.flush()\n"
        "time.sleep(4)\n"
        "raise ImportError('no torch here after all')\n"
    )
    env = dict(os.environ, PYTHONPATH=str(fake_module(tmp_path, chatty)))
    started = time.perf_counter()
    with subprocess.Popen(
        [sys.executable, "-m", "envlock", "smoke", "--host", "--framework", "torch", "--json"]
        + ["--verbose"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    ) as proc:
        assert proc.stderr is not None and proc.stdout is not None
        seen: list[tuple[float, str]] = []
        for line in proc.stderr:
            seen.append((time.perf_counter() - started, line))
        doc = json.loads(proc.stdout.read())
        ended = time.perf_counter() - started
        assert proc.wait() == 1
    first = next(t for t, line in seen if line == "fake-torch: loading\n")
    assert ended - first >= 3, (first, ended, seen)  # shown before the harness ended
    assert sum(1 for _, line in seen if "fake-torch: loading" in line) == 1  # once
    assert doc["status"] == "FAILED"
    assert doc["checks"][0]["name"] == "import"


def test_without_verbose_the_harness_log_goes_to_a_named_file(tmp_path: Path) -> None:
    """The framework's noise and the harness's check lines stay off the terminal; the
    file they went to is named first, and -o says where the result went."""
    noisy = "import sys\nsys.stderr.write('fake-torch: C++ noise\\n')\nraise ImportError('no')\n"
    env = dict(
        os.environ, PYTHONPATH=str(fake_module(tmp_path, noisy)), XDG_STATE_HOME=str(tmp_path)
    )
    out = tmp_path / "result.json"
    proc = subprocess.run(
        [sys.executable, "-m", "envlock", "smoke", "--host", "--framework", "torch"]
        + ["-o", str(out)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 1
    (log,) = (tmp_path / "envlock" / "logs").iterdir()
    assert proc.stderr.splitlines() == [
        f"envlock: running the smoke harness on this host; its log: {log} "
        "(--verbose shows it here)",
        f"envlock: wrote the result to {out}",
    ]
    text = log.read_text()
    assert "fake-torch: C++ noise\n" in text and "envlock-smoke: FAIL import" in text
    assert json.loads(out.read_text())["status"] == "FAILED"
    assert proc.stdout.startswith("FAILED: torch")


def test_table_reasons_are_short_and_json_keeps_them_whole() -> None:
    from envlock.output import REASON_WIDTH
    from envlock.smoke.text import describe

    reason = "the driver is too old for this build: " + "word " * 80
    result = {"status": "FAILED", "checks": [{"name": "x", "status": "FAIL", "reason": reason}]}
    row = describe(result).splitlines()[4]
    status, check, text = row.split(None, 2)
    assert (status, check) == ("FAIL", "x")
    assert text.startswith("the driver is too old for this build: word")
    assert text.endswith("word...") and len(text) <= REASON_WIDTH
    assert result["checks"][0]["reason"] == reason


@pytest.mark.parametrize(
    ("stdout", "stderr", "code", "check", "words"),
    [
        ("", "boom\nSegmentation fault", 139, "harness", "(killed by SIGSEGV); last lines: boom"),
        ("", "", -9, "harness", "(killed by SIGKILL)"),
        ("not json", "Traceback...\nImportError: x", 1, "harness", "(exit status 1)"),
        ("", "envlock-smoke: no Python interpreter in the image\n", 127, "python", "no Python"),
    ],
)
def test_interpret_dead_harness(
    stdout: str, stderr: str, code: int, check: str, words: str
) -> None:
    result = runner.interpret(stdout, stderr, code, "tensorflow")
    assert result["status"] == "FAILED"
    assert result["schema"] == "envlock.smoke/v1"
    assert result["framework"] == "tensorflow"
    assert result["checks"][-1]["name"] == check
    assert words in result["checks"][-1]["reason"]


def test_a_harness_killed_after_a_cudnn_failure_keeps_its_checks_and_names_cudnn() -> None:
    # the log of jax on the H200 with stub cuDNN engine libraries (docs/gpu-run-training.md)
    stderr = (
        "envlock-smoke: running import\n"
        "envlock-smoke: PASS import: imported jax\n"
        "envlock-smoke: running cudnn_runtime\n"
        "envlock-smoke: FAIL cudnn_runtime: cudnn_runtime crashed: RuntimeError: "
        "CUDNN_BACKEND_TENSOR_DESCRIPTOR cudnnFinalize failedptrDesc->finalize() cudnn_status: "
        "CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED\n"
        "envlock-smoke: running op_on_gpu\n"
    )
    result = runner.interpret("", stderr, -11, "jax")
    assert [(c["name"], c["status"]) for c in result["checks"]] == [
        ("import", "PASS"),
        ("cudnn_runtime", "FAIL"),
        ("harness", "FAIL"),
    ]
    last = result["checks"][-1]
    assert last["reason"].startswith(
        "the harness died before reporting (killed by SIGSEGV) in the check op_on_gpu: "
        "cuDNN broke; last lines: "
    )
    assert (last["died_in"], last["broken_path"]) == ("op_on_gpu", "cuDNN")


def test_interpret_keeps_the_harness_document() -> None:
    doc = {"schema": "envlock.smoke/v1", "status": "WARNED", "checks": []}
    assert runner.interpret(json.dumps(doc), "", 0, None) == doc
    # a foreign JSON document is not taken for a result
    assert runner.interpret('{"status": "PASSED"}', "", 0, None)["status"] == "FAILED"


def test_recompute_status_and_exit_codes() -> None:
    result = {"status": "PASSED", "checks": [{"status": "PASS"}, {"status": "WARN"}]}
    runner.recompute_status(result)
    assert result["status"] == "WARNED" and runner.exit_code_for(result) == 0
    result["checks"].append({"status": "FAIL"})
    runner.recompute_status(result)
    assert result["status"] == "FAILED" and runner.exit_code_for(result) == 1


@pytest.mark.parametrize("value", ["all", "none", "1", "4"])
def test_gpus_values(value: str) -> None:
    assert container.parse_gpus(value) == value


@pytest.mark.parametrize("value", ["0", "-1", "some", "", "1.5"])
def test_bad_gpus_values(value: str) -> None:
    with pytest.raises(UsageError, match="--gpus"):
        container.parse_gpus(value)


def test_injected_files_carry_this_harness_and_the_gpus_matrix() -> None:
    peaks = runner.gpu_peaks()
    assert peaks is not None
    h200 = next(p for p in peaks if p["name"] == "NVIDIA H200")
    assert h200["tflops"]["bf16"] == 989.0
    with tarfile.open(fileobj=io.BytesIO(container._injected_files(peaks))) as tar:
        names = sorted(tar.getnames())
        assert names == [
            ".envlock-smoke",
            ".envlock-smoke/envlock_smoke.py",
            ".envlock-smoke/peaks.json",
        ]
        harness = tar.extractfile(".envlock-smoke/envlock_smoke.py")
        assert harness is not None and harness.read() == HARNESS_PATH.read_bytes()
        peaks_file = tar.extractfile(".envlock-smoke/peaks.json")
        assert peaks_file is not None and json.loads(peaks_file.read()) == peaks


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["smoke"], "no image given"),
        (["smoke", "img", "--host"], "give an image or --host, not both"),
        (["smoke", "--host", "--size", "0"], "--size 0"),
        (["smoke", "--host", "--sign", "k.pem"], "--sign needs -o FILE"),
        (["smoke", "--host", "--expect", "/nonexistent-bundle"], "no expect.json there"),
        (
            ["smoke", "--host", "--peaks", "/nonexistent.json"],
            "--peaks /nonexistent.json: no such file",
        ),
        (["smoke", "img", "--expect", "."], "--expect and --peaks are for --host runs"),
        (["smoke", "img", "--gpus", "many"], "--gpus 'many'"),
    ],
)
def test_usage_errors_exit_2(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert words in err
    assert "hint:" in err
    assert "Traceback" not in err


def test_host_smoke_starts_without_heavy_imports(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from envlock.cli import main\n"
        "main(['smoke', '--host', '--framework', 'jax', '--json'])\n"
        "heavy = [m for m in ('docker', 'requests', 'jinja2', 'cryptography', 'rich') "
        "if m in sys.modules]\n"
        "print('HEAVY', heavy, file=sys.stderr)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert "HEAVY []" in out.stderr, out.stderr


class _BrokenLogStream:
    """A container whose stderr stream gives some chunks, then breaks, as a
    connection to the engine can; the real engine cannot be made to do it on
    demand, so this one part of the Docker runner is tested with a stand-in."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.closed = False

    def logs(self, **kw: object) -> object:
        assert kw == {"stream": True, "follow": True, "stdout": False, "stderr": True}
        chunks = self.chunks

        class Stream:
            def __iter__(self) -> object:
                yield from chunks
                raise ConnectionResetError("the engine went away")

            def close(self) -> None:
                pass

        return Stream()


def test_stderr_pump_writes_the_rest_of_a_broken_stream_once() -> None:
    full = "envlock-smoke: one\nenvlock-smoke: café\nenvlock-smoke: three".encode()
    cut = full.index("é".encode()) + 1  # the stream breaks inside a UTF-8 sequence
    sink = io.StringIO()
    pump = container._StderrPump(_BrokenLogStream([full[:10], full[10:cut]]), sink)
    pump.start()
    pump.finish(full)
    assert sink.getvalue() == full.decode() + "\n"


def test_stderr_pump_with_nothing_to_say_writes_nothing() -> None:
    sink = io.StringIO()
    pump = container._StderrPump(_BrokenLogStream([]), sink)
    pump.start()
    pump.finish(b"")
    assert sink.getvalue() == ""


def test_describe_shows_the_training_runs_beside_the_matmul() -> None:
    from envlock.smoke.text import describe

    result = json.loads((REPO / "docs" / "gpu-run" / "h200-torch-training.json").read_text())
    text = describe(result)
    lines = text.splitlines()
    at = lines.index(
        "training: Conv2d 3x3 (no bias) + BatchNorm2d + ReLU + Linear(10), Adam, "
        "batch 64 of 32x32x3 on gpu:0"
    )
    assert lines[at - 1] == ""  # below the matmul table
    assert any(line.startswith("matmul 8192^3") for line in lines[:at])
    header, *rows = [line for line in lines[at + 1 :] if line.strip() and "---" not in line][:4]
    assert header.split() == [
        "train",
        "ms",
        "per",
        "step",
        "first",
        "step",
        "s",
        "loss",
        "vs",
        "plain",
    ]
    runs = result["benchmark"]["training"]["runs"]
    assert [row.split()[0] for row in rows] == [r["variant"] for r in runs]
    assert rows[0].split()[1] == f"{runs[0]['seconds_per_step'] * 1e3:.2f}"
    assert rows[0].endswith("plain loop")
    assert rows[2].endswith(f"{runs[2]['speedup_vs_plain']:.2f}x")
