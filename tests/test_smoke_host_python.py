"""``envlock smoke --host --python PATH``: the harness in another interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from report_support import run_cli

PY38 = Path.home() / ".pyenv" / "versions" / "3.8.18" / "bin" / "python"


@pytest.fixture(scope="module")
def bare_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv without any framework (and without pip: nothing is installed into it)."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return venv


@pytest.mark.parametrize("form", ["folder", "bin/python"])
def test_a_venv_without_the_framework_is_a_clear_failure(bare_venv: Path, form: str) -> None:
    python = bare_venv if form == "folder" else bare_venv / "bin" / "python"
    code, out, err = run_cli(
        "smoke", "--host", "--python", str(python), "--framework", "tensorflow",
        "--allow-cpu", "--json",
    )  # fmt: skip
    assert code == 1
    result = json.loads(out)
    assert result["status"] == "FAILED"
    assert result["host"]["python_executable"] == str(bare_venv / "bin" / "python")
    assert [(c["name"], c["status"], c["reason"]) for c in result["checks"]] == [
        (
            "import",
            "FAIL",
            "cannot import tensorflow: ModuleNotFoundError: No module named 'tensorflow'",
        )
    ]
    assert "Traceback" not in err


@pytest.mark.skipif(not PY38.is_file(), reason="no pyenv 3.8.18 on this machine")
def test_the_harness_runs_in_an_older_interpreter() -> None:
    code, out, err = run_cli(
        "smoke", "--host", "--python", str(PY38), "--framework", "tensorflow",
        "--allow-cpu", "--json",
    )  # fmt: skip
    assert code == 1, err
    result = json.loads(out)
    assert result["host"]["python"] == "3.8.18"
    assert result["checks"][0]["reason"].startswith("cannot import tensorflow: ModuleNotFoundError")
    assert "Traceback" not in err


def test_a_missing_interpreter_is_exit_2(tmp_path: Path) -> None:
    code, _, err = run_cli("smoke", "--host", "--python", str(tmp_path / "nope"))
    assert code == 2
    assert f"--python {tmp_path / 'nope'}: no executable Python interpreter there" in err
    assert "Traceback" not in err


def test_python_without_host_is_refused(bare_venv: Path) -> None:
    code, _, err = run_cli("smoke", "some-image", "--python", str(bare_venv))
    assert code == 2 and "--python is for --host runs" in err
