"""``envlock smoke --host --venv PATH`` (``--python`` its old name): the harness in
another interpreter, chosen as doctor's --venv chooses it."""

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


@pytest.mark.parametrize(
    ("flag", "form"), [("--venv", "folder"), ("--venv", "bin/python"), ("--python", "folder")]
)
@pytest.mark.venv
def test_a_venv_without_the_framework_is_a_clear_failure(
    bare_venv: Path, flag: str, form: str
) -> None:
    python = bare_venv if form == "folder" else bare_venv / "bin" / "python"
    code, out, err = run_cli(
        "smoke", "--host", flag, str(python), "--framework", "tensorflow",
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
@pytest.mark.other_python
def test_the_harness_runs_in_an_older_interpreter() -> None:
    code, out, err = run_cli(
        "smoke", "--host", "--venv", str(PY38), "--framework", "tensorflow",
        "--allow-cpu", "--json",
    )  # fmt: skip
    assert code == 1, err
    result = json.loads(out)
    assert result["host"]["python"] == "3.8.18"
    assert result["checks"][0]["reason"].startswith("cannot import tensorflow: ModuleNotFoundError")
    assert "Traceback" not in err


def test_a_missing_interpreter_is_exit_2(tmp_path: Path) -> None:
    code, _, err = run_cli("smoke", "--host", "--venv", str(tmp_path / "nope"))
    assert code == 2
    assert f"--venv {tmp_path / 'nope'}: no venv folder or Python interpreter there" in err
    assert "Traceback" not in err


def test_a_venv_whose_interpreter_is_gone_is_named_as_such(tmp_path: Path) -> None:
    venv = tmp_path / "gone"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /nowhere\n")
    (venv / "bin" / "python").symlink_to("/nowhere/python3.10")
    code, _, err = run_cli("smoke", "--host", "--venv", str(venv), "--allow-cpu")
    assert code == 1
    assert f"{venv / 'bin' / 'python'} is a link to /nowhere/python3.10, which no longer" in err
    assert "Traceback" not in err


@pytest.mark.venv
def test_venv_without_host_is_refused(bare_venv: Path) -> None:
    code, _, err = run_cli("smoke", "some-image", "--venv", str(bare_venv))
    assert code == 2 and "--venv is for --host runs" in err
    assert f"envlock smoke --host --venv {bare_venv}" in err
