"""envlock capture -r of a real Colab freeze (tests/fixtures/platforms/, from
shared/platforms/): the platform's Python from its os-info file, everything the
default index serves locked, every other line listed once with its reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_support import run_cli

from envlock.bundle import left_out

pytestmark = [pytest.mark.network, pytest.mark.slow]
PLATFORMS = Path(__file__).parent / "fixtures" / "platforms"
FREEZE = PLATFORMS / "colab-gpu-2026-04-24-pip-freeze.txt"
OS_INFO = PLATFORMS / "colab-gpu-2026-04-24-os-info.txt"


def test_the_april_colab_freeze_is_captured_for_its_own_python(tmp_path: Path) -> None:
    out = tmp_path / "D"
    code, stdout, err = run_cli(
        "capture", "-r", str(FREEZE), "--os-info", str(OS_INFO), "-o", str(out), "--json"
    )
    assert code == 0, err
    data = json.loads(stdout)
    assert data["python"]["version"] == "3.12"
    assert data["python"]["how"].endswith("says Python 3.12.13")
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


def test_without_os_info_it_says_how_it_chose_the_python(tmp_path: Path) -> None:
    code, stdout, err = run_cli("capture", "-r", str(FREEZE), "-o", str(tmp_path / "D"))
    assert code == 0, err
    assert "Python 3.12: no Python fits all " in stdout
    assert "\n  not 3.13: no wheel or Requires-Python for it in " in stdout


def test_a_python_the_pins_contradict_is_named_with_its_lines(tmp_path: Path) -> None:
    out = tmp_path / "D"
    code, _, err = run_cli("capture", "-r", str(FREEZE), "--python", "3.9", "-o", str(out))
    assert code == 2
    assert "--python 3.9 contradicts " in err and "  numpy==2.0.2: Requires-Python >=3.9" not in err
    assert "Traceback" not in err and not out.exists()
