"""Colab's real states (tests/fixtures/platforms/, from shared/platforms/):
``envlock doctor --lock D --freeze`` compares February's published list with a
capture of April before the notebook is opened, and a capture of February restored
onto an environment in the April state gives February back (on a slice)."""

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


def test_the_april_capture_against_the_february_list_names_the_framework_changes(
    tmp_path: Path,
) -> None:
    april, feb = "colab-gpu-2026-04-24", "colab-gpu-2026-02-05"
    out = tmp_path / "D"
    code, _, err = run_cli(
        "capture",
        "-r",
        str(PLATFORMS / f"{april}-pip-freeze.txt"),
        "--os-info",
        str(PLATFORMS / f"{april}-os-info.txt"),
        "-o",
        str(out),
    )
    assert code == 0, err
    freeze = PLATFORMS / f"{feb}-pip-freeze.txt"
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
    code, _, err = run_cli("capture", "-r", str(feb), "--os-info", str(os_info), "-o", str(bundle))
    assert code == 0, err
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
