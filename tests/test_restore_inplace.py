"""envlock restore --in-place / --undo / --kernel (#22), against the local index.

The bundle of test_restore (a tiny 'tensorflow' 2.15.1 and dep-a, the stand-in
harness); a venv restored from it, then drifted: tensorflow removed, dep-a moved
to 1.0, an extra distribution added. No GPU here: every restore passes --allow-cpu.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fixtures.index.fakeindex import FakeIndex, closed_port
from test_bootstrap_drift import installed
from test_restore import ENVLOCK, LOCAL_BASE, STUB, hint_command, pasted

from envlock.cli import main
from envlock.venv import undostore


@pytest.fixture()
def bundle(
    make_index: Callable[..., FakeIndex],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> tuple[Path, FakeIndex]:
    """test_restore's bundle, its 'tensorflow' with the __version__ doctor's probe reads."""
    idx = make_index()
    idx.add_dist(
        "tensorflow",
        "2.15.1",
        tag="py3-none-manylinux_2_17_x86_64",
        requires=("dep-a>=1,<2",),
        init="VERSION = __version__ = '2.15.1'\n",
    )
    for v in ("1.0", "1.5"):
        idx.add_dist("dep-a", v)
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    out = tmp_path / "env"
    code = main(
        ["lock", "tensorflow==2.15", "--index-url", idx.url, "-o", str(out)]
        + ["--base-image", LOCAL_BASE, "--python-from", "image"]
    )
    capsys.readouterr()
    assert code == 0
    (out / "envlock_smoke.py").write_text(STUB, encoding="utf-8")
    return out, idx


def doctor(folder: Path, venv: Path) -> tuple[int, dict[str, Any]]:
    proc = subprocess.run(
        [str(ENVLOCK), "doctor", "--venv", str(venv), "--lock", str(folder), "--allow-cpu"]
        + ["--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc.returncode, json.loads(proc.stdout)


def files_of(venv: Path) -> dict[str, str]:
    """Every file of the venv (but bytecode caches) and its sha256."""
    root = venv.resolve()
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def made_venv(folder: Path, idx: FakeIndex, tmp_path: Path, capsys: Any) -> Path:
    venv = tmp_path / "venv"
    argv = ["restore", str(folder), "--venv", str(venv), "--index-url", idx.url, "--allow-cpu"]
    assert main(argv) == 0
    capsys.readouterr()
    return venv


def drift(venv: Path, idx: FakeIndex) -> None:
    py = str(venv / "bin" / "python")
    q = ["-q", "--no-deps", "--index-url", idx.url, "--disable-pip-version-check"]
    subprocess.run([py, "-m", "pip", "uninstall", "-y", "-q", "tensorflow"], check=True)
    subprocess.run([py, "-m", "pip", "install", *q, "dep-a==1.0", "extra-pkg==0.3"], check=True)


def in_place(folder: Path, venv: Path, idx: FakeIndex, *more: str) -> list[str]:
    return ["restore", str(folder), "--venv", str(venv), "--in-place", "--allow-cpu"] + [
        "--index-url",
        idx.url,
        *more,
    ]


@pytest.mark.main_python  # a restore (see tests/pythons.sh)
@pytest.mark.venv
@pytest.mark.other_python
def test_in_place_sync_exact_and_undo_offline_give_back_each_state(
    bundle: tuple[Path, FakeIndex],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    folder, idx = bundle
    idx.add_dist("extra-pkg", "0.3")
    venv = made_venv(folder, idx, tmp_path, capsys)
    drift(venv, idx)
    drifted = files_of(venv)
    assert installed(venv) == {"dep-a": "1.0", "extra-pkg": "0.3"}

    assert main([*in_place(folder, venv, idx), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["mode"] == "in-place" and doc["changed"] is True
    assert doc["installed"] == [["tensorflow", "2.15.1"]]
    assert doc["replaced"] == [["dep-a", "1.0", "1.5"]] and doc["removed"] == []
    assert ["extra-pkg", "0.3"] in doc["kept_extras"]
    first = doc["undo_id"]
    # the user's own store (envlock.userstate), not the bundle folder others may write
    assert Path(doc["undo_path"]) == undostore.store(str(venv)) / first
    assert Path(doc["undo_path"]).is_relative_to(os.environ["ENVLOCK_STATE_DIR"])
    assert stat.S_IMODE(undostore.store(str(venv)).stat().st_mode) == 0o700
    assert not (folder / ".envlock-undo").exists()
    assert doc["undo"] == f"envlock restore {folder} --venv {venv} --undo --undo-id {first}"
    assert "restart the Jupyter kernel" in doc["restart"]
    assert installed(venv) == {"tensorflow": "2.15.1", "dep-a": "1.5", "extra-pkg": "0.3"}
    code, report = doctor(folder, venv)
    assert code == 0, [f for f in report["findings"] if f["status"] == "FAIL"]
    synced = files_of(venv)

    # the text form names the extras and the --exact command; --exact removes them
    assert main(in_place(folder, venv, idx)) == 0
    out = capsys.readouterr().out
    assert "nothing to install, all 2 locked distributions" in out
    assert "not in the lock, left as they are: " in out and "extra-pkg 0.3" in out
    exact = out.split("remove them too (saved for --undo): ", 1)[1].splitlines()[0]
    done = pasted(exact, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "  - extra-pkg 0.3\n" in done.stdout
    assert installed(venv) == {"tensorflow": "2.15.1", "dep-a": "1.5"}
    assert (venv / "bin" / "pip").exists()  # pip is never an extra to remove

    # undo, twice, with no index at all: the --exact, then the first sync
    idx.stop()
    monkeypatch.setenv("UV_OFFLINE", "1")
    dead = f"http://127.0.0.1:{closed_port()}/simple"
    monkeypatch.setenv("PIP_INDEX_URL", dead)
    undo = ["restore", str(folder), "--venv", str(venv), "--undo", "--json"]
    assert main(undo) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["mode"] == "undo" and doc["restored"] == [["extra-pkg", "0.3"]]
    assert files_of(venv) == synced
    assert main(undo) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["undo_id"] == first
    assert doc["restored"] == [["dep-a", "1.0"]] and doc["removed"] == [["tensorflow", "2.15.1"]]
    assert doc["warnings"] == []
    assert files_of(venv) == drifted  # the drifted state, file for file
    code, report = doctor(folder, venv)
    assert code == 1
    failed = {f["check"] for f in report["findings"] if f["status"] == "FAIL"}
    assert {"package tensorflow", "package dep-a"} <= failed
    # nothing left to undo: exit 2, not a traceback
    assert main(undo) == 2
    err = capsys.readouterr().err
    assert "no in-place restore of " in err and "Traceback" not in err


@pytest.mark.main_python  # a restore (see tests/pythons.sh)
@pytest.mark.venv
@pytest.mark.other_python
def test_an_unchanged_environment_installs_nothing(
    bundle: tuple[Path, FakeIndex], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The speed goal (under 2 s) is bench/restore_inplace.py's, not a timed test's:
    this one failed at 2.26 s on a machine busy with other work."""
    folder, idx = bundle
    venv = made_venv(folder, idx, tmp_path, capsys)
    before = files_of(venv)
    argv = [str(ENVLOCK), *in_place(folder, venv, idx)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"{(venv / 'bin' / 'python')}: nothing to install, all 2 ")
    assert files_of(venv) == before
    assert not undostore.store(str(venv)).exists()  # nothing to save, nothing saved


def test_kernel_without_ipykernel_in_the_lock_is_refused_with_a_lock_command_that_works(
    bundle: tuple[Path, FakeIndex], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder, idx = bundle
    for v in ("6.28.0", "6.29.5", "7.0.0rc1"):
        idx.add_dist("ipykernel", v)
    venv = tmp_path / "venv"
    argv = ["restore", str(folder), "--venv", str(venv), "--kernel", "tf215", "--allow-cpu"]
    assert main([*argv, "--index-url", idx.url]) == 2
    err = capsys.readouterr().err
    assert err.startswith("envlock: error: --kernel tf215: ipykernel is not in the lock of ")
    assert "Traceback" not in err and not os.path.lexists(venv)
    fix = hint_command(err, "then restore: ")
    lock_part, restore_part = fix.split(" && ", 1)
    assert "--with ipykernel==6.29.5" in lock_part  # the newest final release the index has
    assert restore_part.startswith(f"envlock restore {folder} --venv {venv} ")
    assert restore_part.endswith("--kernel tf215")
    done = pasted(lock_part, tmp_path)
    assert done.returncode == 0, done.stderr
    text = (folder / "requirements.txt").read_text(encoding="utf-8")
    assert "\nipykernel==6.29.5 " in text and "\ndep-a==1.5 " in text


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--exact"], "--exact does not go with"),
        (["--in-place", "--undo"], "--undo does not go with --in-place"),
        (["--kernel", "a b"], "--kernel 'a b': a kernel name is"),
    ],
)
def test_bad_combinations_are_exit_2_with_a_message(
    bundle: tuple[Path, FakeIndex],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    extra: list[str],
    message: str,
) -> None:
    folder, _ = bundle
    assert main(["restore", str(folder), "--venv", str(tmp_path / "v"), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_python_stays_an_alias_of_base_python(
    bundle: tuple[Path, FakeIndex], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder, _ = bundle
    argv = ["restore", str(folder), "--venv", str(tmp_path / "v"), "--allow-cpu"]
    missing = tmp_path / "no-such-python"  # the same refusal under any running Python
    assert main([*argv, "--python", str(missing)]) == 2
    err = capsys.readouterr().err
    assert f"--base-python {missing}: does not run" in err


@pytest.mark.slow  # real ipykernel and its 30 wheels locked, installed, registered: 22 s idle
@pytest.mark.network
def test_kernel_registers_the_restored_venv_with_its_own_python(
    bundle: tuple[Path, FakeIndex],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """The real ipykernel closure (downloaded from the configured index for
    Python 3.10) served by the local index beside the fake 'tensorflow'."""
    from fixtures.index.fakeindex import FakeWheel

    folder, idx = bundle
    wheels = tmp_path / "ipykernel-wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:"]
        + ["ipykernel", "exceptiongroup", "tomli", "typing-extensions"]  # 3.10's markers
        + ["--python-version", "3.10", "--implementation", "cp", "-d", str(wheels)]
        + [f"--platform={p}" for p in ("manylinux_2_28_x86_64", "manylinux2014_x86_64")],
        check=True,
        capture_output=True,
    )
    for w in sorted(wheels.iterdir()):
        idx.add(FakeWheel(w.name, w.read_bytes()))
    locked = tmp_path / "env-kernel"
    code = main(
        ["lock", "tensorflow==2.15", "--with", "ipykernel", "--index-url", idx.url]
        + ["-o", str(locked), "--base-image", LOCAL_BASE, "--python-from", "image"]
    )
    lock_err = capsys.readouterr().err
    assert code == 0, lock_err
    (locked / "envlock_smoke.py").write_text(STUB, encoding="utf-8")
    home, data = tmp_path / "home", tmp_path / "jupyter-data"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(data))
    venv = tmp_path / "venv"
    argv = ["restore", str(locked), "--venv", str(venv), "--index-url", idx.url, "--allow-cpu"]
    code = main([*argv, "--kernel", "tf215", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    spec_dir = data / "kernels" / "tf215"
    assert Path(doc["kernel"]["path"]).resolve() == spec_dir.resolve()
    spec = json.loads((spec_dir / "kernel.json").read_text(encoding="utf-8"))
    assert spec["argv"] == [
        str(venv / "bin" / "python"),
        "-m",
        "ipykernel_launcher",
        "-f",
        "{connection_file}",
    ]
    assert spec["display_name"] == f"venv from {locked.name} (envlock)"
    assert doc["kernel"]["argv"] == spec["argv"]
    # the kernel's python is the restored venv's: it imports the locked ipykernel
    run = subprocess.run(
        [spec["argv"][0], "-c", "import ipykernel, sys; print(sys.prefix)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(run.stdout.strip()).resolve() == venv.resolve()
