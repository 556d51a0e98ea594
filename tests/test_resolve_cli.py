"""`envlock resolve` on the command line: golden --json output, the readable
summary, and bad input as one message + hint with exit 2 (never a traceback)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envlock.cli import main

GOLDEN = Path(__file__).parent / "golden" / "resolve"
REPO = Path(__file__).resolve().parent.parent

# golden file -> arguments
CASES = {
    "tf2.15.json": ["tensorflow==2.15"],
    "tf2.16-pip-fallback.json": ["tensorflow==2.16"],
    "tf2.18-cudnn-newer-image.json": ["tensorflow==2.18", "--os", "ubuntu22.04"],
    "tf2.13-compatible.json": ["tensorflow~=2.13.0", "--python", "3.9"],
    "tf-range-driver-gpu.json": [
        "tensorflow>=2.14,<2.17",
        "--driver",
        "535.104.05",
        "--gpu",
        "NVIDIA H100 PCIe",
        "--cuda-source",
        "pip",
    ],
    "tf2.3-deleted-image.json": ["tensorflow==2.3"],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_json_output_matches_golden(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["resolve", *CASES[name], "--json"])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    path = GOLDEN / name
    if os.environ.get("ENVLOCK_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(out, encoding="utf-8")
    assert path.is_file(), f"{path} missing: run with ENVLOCK_UPDATE_GOLDEN=1 and review the diff"
    assert out == path.read_text(encoding="utf-8")
    data = json.loads(out)
    assert data["framework"] == "tensorflow"
    assert data["base_image"].startswith("nvidia/cuda:")


def test_readable_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["resolve", "tensorflow==2.15"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split() == ["release", "tensorflow", "2.15.1"]
    assert "python       3.10  (wheels for 3.9, 3.10, 3.11)" in lines  # ubuntu22.04's own
    assert "cuda         12.2  (cuDNN 8.9)" in lines
    assert "driver       >= 525.60.13" in lines
    assert "base image   nvidia/cuda:12.2.2-cudnn8-runtime-ubuntu22.04" in lines
    assert "why:" in lines and "warnings:" in lines
    assert not out.lstrip().startswith("{")


@pytest.mark.parametrize(
    ("args", "message", "hint"),
    [
        (["numpy==2.1"], "SPEC 'numpy==2.1' is a requirement on 'numpy'", "tensorflow==2.15"),
        (["tensorflow=2.15"], "is not a valid requirement", "did you mean 'tensorflow==2.15'?"),
        (["tensorflow==2.15", "--python", "3"], "--python '3' is not a CPython minor", "3.11"),
        (["tensorflow", "--driver", "new"], "--driver 'new' is not a driver version", "535"),
        (["tensorflow", "--cuda", "twelve"], "--cuda 'twelve' is not a CUDA version", "12.2"),
        (["tensorflow", "--os", "debian12"], "--os 'debian12' is not a known Ubuntu", "ubuntu"),
        (
            ["tensorflow==2.15", "--python", "3.12"],
            "nothing fits: tensorflow 2.15.x supports Python 3.9-3.11",
            "for Python 3.12 use tensorflow>=2.16",
        ),
        (
            ["tensorflow==2.16", "--cuda-source", "system"],
            "no nvidia/cuda cudnn image carries cuDNN 8.x >= 8.9",
            "--cuda-source pip",
        ),
        (["tensorflow==2.0"], "CPU-only builds", "tensorflow>=2.2"),
        (["tensorflow==3.0"], "no tensorflow release matches 'tensorflow==3.0'", "2.21.0"),
    ],
)
def test_bad_input_exit_2(
    args: list[str], message: str, hint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["resolve", *args, "--json"])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 2, err
    assert lines[0].startswith("envlock: error: ") and message in lines[0]
    assert lines[1].startswith("  hint: ") and hint in lines[1]


def test_bad_cuda_source_is_an_argparse_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["resolve", "tensorflow", "--cuda-source", "conda"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'conda'" in err and "hint:" in err


def test_driver_auto_without_a_driver_is_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # a machine without the NVIDIA driver: NVML does not load, no nvidia-smi on PATH
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr("envlock.driver.NVML_LIBRARY", str(tmp_path / "libnvidia-ml.so.1"))
    assert main(["resolve", "tensorflow", "--driver", "auto"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("envlock: error: --driver auto: no NVIDIA driver found on this machine")
    assert "hint: pass the driver version instead, e.g. --driver 535.104.05" in err


def test_real_subprocess_run() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENVLOCK_")}
    bad = subprocess.run(
        [sys.executable, "-m", "envlock", "resolve", "tensorflow==2.15", "--python", "3.13"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=60,
    )
    assert bad.returncode == 2
    assert bad.stdout == ""
    assert "Traceback" not in bad.stderr
    assert bad.stderr.splitlines()[0] == (
        "envlock: error: nothing fits: tensorflow 2.15.x supports Python 3.9-3.11; "
        "there is no Python 3.13 wheel"
    )
    good = subprocess.run(
        [sys.executable, "-m", "envlock", "resolve", "tensorflow==2.15", "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=60,
    )
    assert good.returncode == 0, good.stderr
    assert good.stdout == (GOLDEN / "tf2.15.json").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("name", "old", "new", "message"),
    [
        (
            "cuda.toml",
            'driver_min = "525.60.13"',
            'driver_min = "newest"',
            "matrices/cuda.toml: cuda[12].driver_min: expected",
        ),
        ("gpus.toml", 'compute_capability = "9.0"', "compute_capability = 9", "gpus[0]"),
        ("cuda.toml", "[[images]]", "[[images]", "matrices/cuda.toml: not valid TOML"),
    ],
)
def test_damaged_matrix_file_is_exit_2_naming_file_and_place(
    name: str,
    old: str,
    new: str,
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from envlock import matrix, resources

    folder = tmp_path / "matrices"
    folder.mkdir()
    for src in resources.data_dir("matrices").iterdir():
        if src.name.endswith(".toml"):
            (folder / src.name).write_bytes(src.read_bytes())
    damaged = folder / name
    damaged.write_text(damaged.read_text(encoding="utf-8").replace(old, new, 1), encoding="utf-8")
    monkeypatch.setattr(resources, "data_dir", lambda _name: folder)
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(tmp_path / "cache"))
    matrix.load.cache_clear()
    try:
        code = main(["resolve", "tensorflow==2.15", "--json"])
    finally:
        matrix.load.cache_clear()
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err.startswith("envlock: error: matrices/") and message in err.splitlines()[0]
    assert "Traceback" not in err
