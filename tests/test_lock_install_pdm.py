"""PDM installs envlock's pylock.toml, and refuses a changed hash.

PDM (lock.format = "pylock") reads a lock's platform from its ``environments``
marker and knows only ``platform_system`` and ``platform_machine`` there
(pdm/models/markers.py, EnvSpec.from_marker): a lock saying only
``sys_platform == 'linux'`` stopped it with "Unsupported platform marker". PDM is
installed from the index (pip's configuration) into a venv of its own; the lock is
TensorFlow 2.15 for this interpreter's Python, as in test_lock_install.py.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tomli_w
from venv_support import seeded_venv, tool_venv

from envlock.cli import main
from envlock.lock import read_lock

# installs PDM and TensorFlow 2.15 (about 600 MB) from the index: over a minute here
pytestmark = [pytest.mark.network, pytest.mark.slow]

if sys.version_info >= (3, 11):
    import tomllib
else:  # collected (then deselected) by the CPython 3.10 unit run
    import tomli as tomllib

HERE_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


def run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=1200, **kw)  # type: ignore[call-overload, no-any-return]


@pytest.fixture(scope="module")
def pdm(tmp_path_factory: pytest.TempPathFactory) -> str:
    # pdm[locked]: PDM's own pins (hishel 2.0 has no SyncSqliteStorage, which PDM 2.29 needs)
    return str(tool_venv(tmp_path_factory.mktemp("pdm") / "venv", "pdm[locked]") / "pdm")


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if HERE_PYTHON not in ("3.9", "3.10", "3.11"):  # TensorFlow 2.15's wheels
        pytest.skip(f"TensorFlow 2.15 has no wheel for this interpreter's Python {HERE_PYTHON}")
    out = tmp_path_factory.mktemp("bundle")
    argv = ["lock", "tensorflow==2.15", "--cuda-source", "system", "--python", HERE_PYTHON]
    assert main([*argv, "-o", str(out), "--json"]) == 0
    return out


def _project(root: Path, lock_text: str) -> Path:
    """A PDM project whose pylock.toml is the lock, with its own .venv."""
    root.mkdir()
    (root / "pyproject.toml").write_text(
        '[project]\nname = "locked"\nversion = "0"\n'
        f'requires-python = "=={HERE_PYTHON}.*"\ndependencies = []\n'
        "[tool.pdm]\ndistribution = false\n"
    )
    (root / "pylock.toml").write_text(lock_text)
    seeded_venv(root / ".venv")
    return root


def _sync(pdm: str, project: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PDM_IGNORE_SAVED_PYTHON": "1",
        "PDM_CHECK_UPDATE": "false",
        "PDM_CACHE_DIR": str(project / "pdm-cache"),
    }
    setting = run([pdm, "config", "-p", str(project), "-l", "lock.format", "pylock"], env=env)
    assert setting.returncode == 0, setting.stderr
    return run([pdm, "sync", "-p", str(project), "--no-self"], env=env)


def test_pdm_installs_the_pylock(pdm: str, bundle: Path, tmp_path: Path) -> None:
    text = (bundle / "pylock.toml").read_text()
    assert "platform_system == 'Linux' and platform_machine == 'x86_64'" in text
    project = _project(tmp_path / "p", text)
    out = _sync(pdm, project)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    frozen = run([str(project / ".venv" / "bin" / "python"), "-m", "pip", "freeze", "--all"])
    got = {
        line.split("==")[0].lower().replace("_", "-"): line.split("==")[1]
        for line in frozen.stdout.splitlines()
        if "==" in line
    }
    locked = {p.name: p.version for p in read_lock(bundle).packages}
    assert got["tensorflow"] == "2.15.1"
    assert {k: got.get(k) for k in locked} == locked


def test_pdm_refuses_a_changed_hash(pdm: str, bundle: Path, tmp_path: Path) -> None:
    """The lock cut to its one package, six, with a changed hash. With the whole
    closure this test took 140 s here (PDM fetched TensorFlow's 600 MB with a
    fresh cache) to reach the same refusal."""
    lock = tomllib.loads((bundle / "pylock.toml").read_text())
    lock["packages"] = [p for p in lock["packages"] if p["name"] == "six"]
    assert len(lock["packages"]) == 1, "six is in the TensorFlow closure"
    text = tomli_w.dumps(lock)
    m = re.search(r'name = "six-[^"]+\.whl"\n(?:.*\n){0,6}?sha256 = "([0-9a-f]{64})"', text)
    assert m, text
    good = m.group(1)
    bad = good[:-1] + ("0" if good[-1] != "0" else "1")
    project = _project(tmp_path / "p", text.replace(good, bad))
    out = _sync(pdm, project)
    assert out.returncode != 0
    said = out.stdout + out.stderr
    assert re.search(r"hash", said, re.IGNORECASE), said[-3000:]
    assert bad in said or "six" in said, said[-3000:]
    frozen = run([str(project / ".venv" / "bin" / "python"), "-m", "pip", "freeze", "--all"])
    assert "six==" not in frozen.stdout
