"""envlock capture -r of a real Colab freeze (tests/fixtures/platforms/, from
shared/platforms/): the platform's Python chosen from the pins themselves (no
--os-info: the newest Python most pins fit, and why not the newer ones),
everything the default index serves locked, every other line listed once with
its reason; and ``envlock doctor --lock D --freeze`` of February's published
list against that capture of April (one capture for both: ~30 CPU-s each). The
Python from a real Colab os-info file is test_doctor_colab.py's capture (of a
slice of the February list: the same choice, a fraction of the lines); with
--os-info this capture's lock is the same file for file, only the commands it
prints name the option."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from report_support import run_cli

from envlock.bundle import left_out

pytestmark = [pytest.mark.network, pytest.mark.slow]
PLATFORMS = Path(__file__).parent / "fixtures" / "platforms"
FREEZE = PLATFORMS / "colab-gpu-2026-04-24-pip-freeze.txt"


Captured = tuple[int, str, str, Path]


@pytest.fixture(scope="module")
def april(tmp_path_factory: pytest.TempPathFactory) -> Captured:
    """One capture of the April freeze (--json): exit, stdout, stderr and the
    bundle folder, for the capture's tests and doctor's."""
    out = tmp_path_factory.mktemp("april") / "D"
    code, stdout, err = run_cli("capture", "-r", str(FREEZE), "-o", str(out), "--json")
    return code, stdout, err, out


def test_the_april_colab_freeze_is_captured_for_the_python_its_pins_fit(
    april: Captured,
) -> None:
    code, stdout, err, out = april
    assert code == 0, err
    data = json.loads(stdout)
    # Colab's own Python (its os-info file says 3.12.13), chosen from the pins alone
    assert data["python"]["version"] == "3.12"
    assert data["python"]["how"].startswith("Python 3.12: no Python fits all 692 pins ")
    # why not the newer ones: 3.14, then 3.13, each naming the pins that have no build for it
    not_newer = [d.split(" in ")[0] for d in data["python"]["deciding"]]
    assert not_newer == [
        "not 3.14: no wheel or Requires-Python for it",
        "not 3.13: no wheel or Requires-Python for it",
    ]
    assert "numpy==2.0.2" in data["python"]["deciding"][1]
    total, locked, left = data["lines"], data["locked"], data["left_out"]
    assert total == 726
    assert locked + len(data["differs"]) + len(left) == total  # every line accounted for once
    assert locked / total >= 0.95  # 706 of 726 (97.2%) since source archives are locked
    reasons = {e["line"]: e["reason"] for e in left}
    assert len(reasons) == len(left)
    assert reasons["python-apt==0.0.0"] == "os-package"
    assert reasons["torch==2.10.0+cu128"] == "other-index"
    assert reasons["tf_keras==2.20.0"] == "yanked"
    assert "promise==2.3" not in reasons  # source only on the index: locked by its sdist
    assert reasons["libcugraph-cu12==26.2.0"] == "other-index"  # a wheel-stub sdist
    assert sum(r == "direct" for r in reasons.values()) == 6
    recorded = left_out.read(out)
    assert recorded is not None and len(recorded.left_out) == len(left)
    assert data["summary"].startswith(f"locked {locked} of 726; ")


def test_a_python_the_pins_contradict_is_named_with_its_lines(tmp_path: Path) -> None:
    out = tmp_path / "D"
    code, _, err = run_cli("capture", "-r", str(FREEZE), "--python", "3.9", "-o", str(out))
    assert code == 2
    assert "--python 3.9 contradicts " in err and "  numpy==2.0.2: Requires-Python >=3.9" not in err
    assert "Traceback" not in err and not out.exists()


def test_the_april_capture_against_the_february_list_names_the_framework_changes(
    april: Captured,
) -> None:
    """``envlock doctor --lock D --freeze`` compares February's published list with
    the capture of April before the notebook is opened."""
    code, _, err, out = april
    assert code == 0, err
    freeze = PLATFORMS / "colab-gpu-2026-02-05-pip-freeze.txt"
    argv = ["doctor", "--lock", str(out), "--freeze", str(freeze), "--python", "3.12"]
    code, stdout, err = run_cli(*argv, "--json")
    assert code == 1, err
    doc = json.loads(stdout)
    fails = [f["check"] for f in doc["findings"] if f["status"] == "FAIL"]
    # the roots: TensorFlow 2.19 -> 2.20, torch 2.9 -> 2.10, Keras 3.10 -> 3.13; the other
    # ~230 changed pins folded under one row, not one row each
    assert fails == ["tensorflow version", "torch version", "keras version", "packages"]
    found = {f["check"]: f for f in doc["findings"]}
    where = f"--freeze {freeze}"
    assert found["tensorflow version"]["cause"].startswith(
        f"tensorflow 2.19.0 is in {where}; the lock has 2.20.0; its CUDA unchanged: "
        "CUDA 12.5, cuDNN 9.3 (its matrix row); CUDA wheels that differ: "
        "nvidia-cuda-nvcc-cu12 12.5.82 is listed; the lock has 12.8.93"
    )
    assert found["torch version"]["cause"].startswith(
        f"torch 2.9.0+cu128 is in {where}; the lock has 2.10.0; its CUDA unchanged: CUDA 12.8"
    )
    assert found["keras version"]["cause"].startswith(
        f"keras 3.10.0 is in {where}; the lock has 3.13.2"
    )
    folded = sum(len(f.get("folded", [])) for f in doc["findings"] if f["status"] == "FAIL")
    changed = found["packages"]["cause"]
    assert f"; {len(found['packages']['folded'])} package findings follow from it" in changed
    assert folded > 200 and len(doc["findings"]) < 15
    assert "package tensorflow" not in {
        g["check"] for f in doc["findings"] for g in f.get("folded", [])
    }
    left = found["left out of the lock"]
    recorded = json.loads((out / "left-out.json").read_text())["left_out"]
    assert left["status"] == "INFO" and len(left["folded"]) == len(recorded)
    assert found["restore"]["fix"] == shlex.join(["%envlock", "restore", str(out), "--in-place"])
    # the text names the same roots, with the folded counted, not listed
    code, text, _ = run_cli(*argv)
    assert code == 1
    for check in fails:
        assert f"\nFAIL    {check} " in text
    assert len(text.splitlines()) < 200
