"""The upgrade story inside real Jupyter kernels (issue #22, "Must show").

A venv with TensorFlow 2.15.1 (CPU) and ipykernel is made with uv, the
``%envlock`` extension is installed into it with ``envlock notebook install``,
and jupyter_client (ipykernel's own dependency, so the driver runs on the
kernel venv's Python; envlock's test venv needs nothing new) starts kernels
and runs cells in them, as a notebook would:

1. kernel "base": ``%envlock capture``; the platform upgrade, as the issue
   has it: pip upgrades TensorFlow (``%pip install tensorflow==2.16.2``, Keras 3
   with it); ``%envlock doctor`` names TensorFlow's drift and the Keras jump;
   ``%envlock restore --kernel tf215`` builds a new venv and registers it.
2. kernel "tf215", started from the kernelspec restore wrote: ``import
   tensorflow`` gives 2.15.1, and ``%envlock doctor`` of it passes.
3. another "base" kernel, still on 2.16.2: doctor's first fix as it printed it
   (#42: ``%envlock restore ~/env --venv PY --in-place``, doctor's fixes being
   this notebook's lines with the restart the kernel needs) puts TensorFlow
   2.15.1 back into the running kernel's own environment;
4. the restart (a new "base" kernel): ``import tensorflow`` gives 2.15.1, and
   ``--undo`` puts 2.16.2 back.

Every uv install (the kernel venv, restore's new venv, the in-place sync) reads
the run's one uv cache (tests/conftest.py's shared_uv_cache), so TensorFlow
2.15.1 is downloaded once per run, not again for this module's restores; pip, in
the upgrade cell, downloads 2.16.2 (~590 MB) as it would on the platform.
"""

from __future__ import annotations

import html as html_mod
import json
import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
from venv_support import make_tf215_venv

from envlock.cli import main

# real TensorFlow installs (one download, then uv's cache), a capture, two doctor
# runs and restore's smoke test, in three kernels: minutes, not seconds
pytestmark = [pytest.mark.network, pytest.mark.slow]

DRIVER = r"""
import json, sys
from jupyter_client.manager import start_new_kernel

plan = json.load(sys.stdin)
results = []
for session in plan:
    km, kc = start_new_kernel(kernel_name=session["kernel"], startup_timeout=180)
    cells = []
    try:
        for code in session["cells"]:
            out = {"code": code, "stdout": "", "stderr": "", "html": [], "plain": [], "error": None}

            def hook(msg, out=out):
                kind, content = msg["msg_type"], msg["content"]
                if kind == "stream":
                    out[content["name"]] += content["text"]
                elif kind in ("display_data", "execute_result"):
                    data = content["data"]
                    if "text/html" in data:
                        out["html"].append(data["text/html"])
                    else:
                        out["plain"].append(data.get("text/plain", ""))
                elif kind == "error":
                    out["error"] = content["ename"] + ": " + content["evalue"]

            reply = kc.execute_interactive(
                code, timeout=1200, output_hook=hook,
                user_expressions={"exit": "globals().get('_envlock_exit')"},
            )
            found = reply["content"].get("user_expressions", {}).get("exit", {})
            out["exit"] = found.get("data", {}).get("text/plain")
            cells.append(out)
            sys.stderr.write("cell done: %r exit %s\n" % (code[:60], out["exit"]))
            if out["exit"] not in (None, "None", "0"):  # what it printed, for a failure
                sys.stderr.write(("  its output: %r" % (out,))[:3000] + "\n")
            sys.stderr.flush()
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    results.append(cells)
json.dump(results, sys.stdout)
"""


def _uv() -> str:
    from envlock.lock.uv import uv_bin

    return str(uv_bin())


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, shared_uv_cache: Path) -> dict[str, Any]:
    """The kernel venv (TensorFlow 2.15.1, ipykernel) and the folders every step
    shares: the run's uv cache, Jupyter's data dir, envlock's data dir."""
    root = tmp_path_factory.mktemp("notebook-kernel")
    env = {
        **os.environ,
        # the run's cache: uv links files out of it and never writes into a venv's
        # files in place, so the story's pip, restores and undo leave it whole
        "UV_CACHE_DIR": str(shared_uv_cache),
        "UV_SYSTEM_CERTS": "1",
        "JUPYTER_DATA_DIR": str(root / "jupyter-data"),
        "JUPYTER_CONFIG_DIR": str(root / "jupyter-config"),
        "IPYTHONDIR": str(root / "ipython"),
        "XDG_DATA_HOME": str(root / "data"),
        "HOME": str(root / "home"),
    }
    env.pop("VIRTUAL_ENV", None)
    (root / "home").mkdir()
    venv = root / "base"
    subprocess.run(
        # any CPython 3.11 uv finds (TensorFlow 2.15.1 has wheels for 3.9-3.11)
        [_uv(), "venv", "-q", "--seed", "--python", "3.11", str(venv)],
        env={**env, "UV_PYTHON_DOWNLOADS": "never"},
        check=True,
    )
    python = venv / "bin" / "python"
    make_tf215_venv(venv, shared_uv_cache, "ipykernel")
    spec = Path(env["JUPYTER_DATA_DIR"]) / "kernels" / "base"
    spec.mkdir(parents=True)
    argv = [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    doc = {"argv": argv, "display_name": "base (TensorFlow 2.15.1)", "language": "python"}
    (spec / "kernel.json").write_text(json.dumps(doc), encoding="utf-8")
    return {"root": root, "env": env, "python": python}


def _cells(world: dict[str, Any], plan: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Run each session's cells in a new kernel of its kernelspec; their outputs."""
    driver = world["root"] / "driver.py"
    driver.write_text(DRIVER, encoding="utf-8")
    done = subprocess.run(
        [str(world["python"]), str(driver)],
        input=json.dumps(plan),
        capture_output=True,
        text=True,
        env=world["env"],
        cwd=world["root"],
        timeout=2400,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result: list[list[dict[str, Any]]] = json.loads(done.stdout)
    # every cell's outputs, for reading when an assertion fails
    (world["root"] / "cells.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    return result


def _envlock_ran(cell: dict[str, Any], code: int) -> str:
    """The cell's HTML (one envlock fragment), after checking its exit status."""
    assert cell["error"] is None, cell
    assert cell["exit"] == str(code), cell
    assert len(cell["html"]) == 1, cell
    html: str = cell["html"][0]
    assert html.startswith('<div class="envlock">'), html[:200]
    return html


def test_capture_upgrade_doctor_restore_kernel_in_place_and_undo(
    world: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root, python = world["root"], str(world["python"])
    monkeypatch.setenv("XDG_DATA_HOME", world["env"]["XDG_DATA_HOME"])
    assert main(["notebook", "install", "--venv", python, "--json"]) == 0
    installed = json.loads(capsys.readouterr().out)
    assert Path(installed["loads"]).is_relative_to(Path(world["env"]["XDG_DATA_HOME"]))
    # the README's lines, ~ included (HOME is the module's folder home/)
    env_dir, tf215 = root / "home" / "env", root / "home" / "envs" / "tf215"

    [first, second] = _cells(
        world,
        [
            {
                "kernel": "base",
                "cells": [
                    "%load_ext envlock",
                    "%envlock capture -o ~/env                     # before: lock what works today",
                    "%pip install -q tensorflow==2.16.2",
                    "%envlock doctor --lock ~/env --allow-cpu   # what changed",
                    "%envlock restore ~/env --kernel tf215 --venv ~/envs/tf215 --allow-cpu",
                    # the line the restore printed, pasted (checked below)
                    f"%envlock notebook install --venv {tf215}",
                ],
            },
            {
                "kernel": "tf215",
                "cells": [
                    "import sys, tensorflow as tf; print(tf.__version__, sys.prefix)",
                    "%load_ext envlock",
                    f"%envlock doctor --lock {env_dir} --allow-cpu",
                ],
            },
        ],
    )
    load, capture, upgrade, doctor, restore, install = first
    assert load["error"] is None and load["stderr"] == "", load
    html = _envlock_ran(capture, 0)
    assert "captured tensorflow 2.15.1" in html and f"from {python}" in html, html
    locked = (env_dir / "requirements.txt").read_text(encoding="utf-8")
    assert "\nnumpy==1.26.4 " in locked and "\nipykernel==" in locked
    # the extension is no distribution: the capture is clean
    assert not [line for line in locked.splitlines() if line.startswith("envlock")]
    assert upgrade["error"] is None, upgrade
    # doctor: a FAIL naming TensorFlow's drift from the lock and the Keras 2 -> 3 jump
    # (exit 1, printed under the table)
    html = _envlock_ran(doctor, 1)
    assert "tensorflow" in html and "2.16.2" in html and "2.15.1" in html, html
    assert "Keras 3" in html and "TF_USE_LEGACY_KERAS" in html, html
    assert "envlock exited with status 1 (a check failed)" in doctor["stderr"]
    # #42: its fixes are this notebook's lines: %envlock acting on this kernel, the
    # other ways through the kernel's shell or %env, and the restart the kernel needs
    text = html_mod.unescape(html)
    runs = re.findall(r"run: (.*)", text)
    assert runs and all(r.startswith(("%envlock ", "!", "%env ")) for r in runs), runs
    fix = runs[0]
    assert fix == shlex.join(
        ["%envlock", "restore", str(env_dir), "--venv", python, "--in-place", "--allow-cpu"]
    )
    assert "do: restart the kernel (Jupyter: Kernel > Restart Kernel;" in text
    assert "%env TF_USE_LEGACY_KERAS=1" in runs
    html = _envlock_ran(restore, 0)
    assert "registered the Jupyter kernel tf215" in html, html
    assert restore["stdout"] == (
        f"to use %envlock in the kernel tf215 too, run here: {install['code']}\n"
    )
    _envlock_ran(install, 0)

    imported, load, doctor = second
    assert imported["error"] is None, imported
    version, prefix = imported["stdout"].split()
    assert version == "2.15.1"
    assert Path(prefix).resolve() == tf215.resolve()
    assert load["error"] is None, load
    html = _envlock_ran(doctor, 0)
    assert "FAIL" not in html, html

    # doctor's first fix as printed, in the kernel that still runs 2.16.2; then the
    # restart it says (a new kernel of the same kernelspec) imports 2.15.1
    [third, restarted] = _cells(
        world,
        [
            {
                "kernel": "base",
                "cells": [
                    "%load_ext envlock",
                    "import tensorflow as tf; print(tf.__version__)",
                    fix,
                    "from importlib.metadata import version; print(version('tensorflow'))",
                ],
            },
            {
                "kernel": "base",
                "cells": [
                    "import tensorflow as tf; print(tf.__version__)",
                    "%load_ext envlock",
                    "%envlock restore ~/env --undo                 # back, offline",
                    "from importlib.metadata import version; print(version('tensorflow'))",
                ],
            },
        ],
    )
    load, before, in_place, on_disk = third
    assert load["error"] is None, load
    assert before["stdout"].strip() == "2.16.2", before
    html = _envlock_ran(in_place, 0)
    assert "tensorflow 2.16.2 -&gt; 2.15.1" in html, html
    assert "restart the Jupyter kernel" in html
    assert on_disk["stdout"].strip() == "2.15.1", on_disk
    imported, load, undo, tf_back = restarted
    assert imported["stdout"].strip() == "2.15.1", imported  # the locked version, imported
    assert load["error"] is None, load
    _envlock_ran(undo, 0)
    assert tf_back["stdout"].strip() == "2.16.2", tf_back


def test_in_ipython_outside_a_kernel_the_output_is_text(world: dict[str, Any]) -> None:
    """IPython in a terminal (no kernel, no HTML display): envlock's text as it is."""
    script = world["root"] / "terminal.ipy"
    script.write_text(
        "%load_ext envlock\n"
        "%envlock resolve tensorflow==2.15.1\n"
        "print('exit', _envlock_exit)\n"
        "%envlock doctor --lock /nonexistent/env\n"
        "print('exit', _envlock_exit)\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [str(world["python"]), "-m", "IPython", "--no-banner", str(script)],
        capture_output=True,
        text=True,
        env=world["env"],
        cwd=world["root"],
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["release", "tensorflow", "2.15.1"]
    assert "<" not in done.stdout and lines[-2:] == ["exit 0", "exit 2"]
    assert done.stderr.splitlines() == [
        "envlock: error: --lock /nonexistent/env: no pylock.toml there",
        "  hint: give the folder envlock lock -o wrote",
        "envlock exited with status 2 (bad input)",
    ]
