"""Colab's real states (tests/fixtures/platforms/, from shared/platforms/): a capture
of February restored onto an environment in the April state gives February back (on
a slice). ``envlock doctor --lock D --freeze`` of February's list against the April
capture is test_capture_colab.py's, on that module's one capture of April."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest
from report_support import run_cli

from envlock.index.config import index_url
from envlock.lock.uv import uv_bin
from envlock.notebook import with_target

pytestmark = [pytest.mark.network, pytest.mark.slow]  # real index; captures take 15-40 s
PLATFORMS = Path(__file__).parent / "fixtures" / "platforms"


@pytest.mark.venv
@pytest.mark.other_python
def test_a_february_slice_restored_onto_the_april_state_gives_february_back(
    tmp_path: Path, shared_uv_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The slice: the changed packages of a web/API/data cluster of Colab's list
    (fastapi, starlette, uvicorn, typer, sqlalchemy, alembic, aiohttp, huggingface-hub,
    gitpython, ...) and TensorFlow (capture locks a TensorFlow environment), with
    their closure at each state's own pins (made with ``uv pip compile`` of those
    names constrained by each freeze, for CPython 3.12 manylinux x86_64): 90 lines
    each side, 40 at other versions, the April side one more (pillow); and one
    February line capture leaves out (en_core_web_sm @ URL). What it leaves out of
    Colab: the CUDA stacks (nvidia-*, torch and its +cu128 builds, JAX and its CUDA
    plugins, RAPIDS, CuPy: a TensorFlow with the system CUDA source, ~2 GB installed),
    and the ~600 other packages; the restore is the in-place one doctor prints for
    a platform on the lock's Python, run as a %envlock cell runs it."""
    from envlock.venv.restore import create_venv, find_python

    monkeypatch.setenv("ENVLOCK_STATE_DIR", str(tmp_path / "state"))
    feb = PLATFORMS / "colab-slice-2026-02-05-pip-freeze.txt"
    april = PLATFORMS / "colab-slice-2026-04-24-pip-freeze.txt"
    os_info = PLATFORMS / "colab-gpu-2026-02-05-os-info.txt"
    bundle = tmp_path / "D"
    argv = ["capture", "-r", str(feb), "--os-info", str(os_info), "-o", str(bundle)]
    code, out, err = run_cli(*argv)
    assert code == 0, err
    # the Python of Colab's own os-info file (its `python --version` line), not the pins'
    assert f"Python 3.12: --os-info {os_info} says Python 3.12.12\n" in out
    venv = tmp_path / "april"
    create_venv(find_python("3.12", None), venv)
    python = str(venv / "bin" / "python")
    subprocess.run(
        [str(uv_bin()), "pip", "install", "-q", "--no-deps", "--python", python]
        + ["--link-mode", "hardlink", "--index-url", index_url(None), "-r", str(april)],
        env={**os.environ, "UV_CACHE_DIR": str(shared_uv_cache), "UV_SYSTEM_CERTS": "1"},
        check=True,
        timeout=900,
    )
    code, stdout, err = run_cli(
        "doctor", "--lock", str(bundle), "--freeze", str(april), "--python", "3.12",
        "--allow-cpu", "--json",
    )  # fmt: skip
    assert code == 1, err
    found = {f["check"]: f for f in json.loads(stdout)["findings"]}
    assert found["tensorflow version"]["status"] == "FAIL"
    fix = found["restore"]["fix"]
    assert fix == shlex.join(["%envlock", "restore", str(bundle), "--in-place", "--allow-cpu"])
    # as the %envlock magic runs the line in the kernel of that environment
    code, out, err = run_cli(*with_target(shlex.split(fix)[1:], python))
    assert code == 0, err
    assert "\n  ~ tensorflow 2.20.0 -> 2.19.0\n" in out
    assert "not brought back (1): the capture left them out of the lock" in out
    assert f"    take it in: {python} -m pip install --no-deps 'en_core_web_sm @ " in out
    listed = subprocess.run(
        [str(uv_bin()), "pip", "freeze", "--python", python],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    from packaging.utils import canonicalize_name

    have = {
        canonicalize_name(line.split("==")[0]): line.split("==")[1]
        for line in listed.splitlines()
        if "==" in line
    }
    wanted = {
        canonicalize_name(line.split("==")[0]): line.split("==")[1]
        for line in feb.read_text().splitlines()
        if "==" in line
    }
    assert {n: have.get(n) for n in wanted} == wanted  # every February pin is back
    assert set(have) - set(wanted) <= {"pillow", "pip"}  # April's extra, left as it is
    # and the live-venv doctor, on the environment itself, agrees
    code, stdout, err = run_cli(
        "doctor", "--lock", str(bundle), "--venv", python, "--allow-cpu", "--json"
    )
    found = {f["check"]: f for f in json.loads(stdout)["findings"]}
    assert not [c for c in found if c.startswith("package ")], err  # every pin as locked
    assert found["packages not in the lock"]["cause"] == "installed but not locked: pillow 11.3.0"
    assert found["left out of the lock"]["folded"][0]["fix"].startswith(f"{python} -m pip ")
