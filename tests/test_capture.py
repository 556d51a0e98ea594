"""envlock capture against local fake indexes: a venv (or a freeze) -> a normal bundle.

The venvs are made here and filled with uv from a fake index that serves a
tiny "tensorflow" 2.15.1 wheel (the resolution comes from the real matrix).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from fixtures.index.fakeindex import FakeIndex
from report_support import run_cli
from test_lock import FW_TAG

from envlock.venv.capture import captured_from

pytestmark = pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the fake wheels are cp311")
UV = shutil.which("uv") or str(Path(sys.executable).parent / "uv")


def _fill(idx: FakeIndex, dep_a: tuple[str, ...]) -> FakeIndex:
    idx.add_dist("tensorflow", "2.15.1", tag=FW_TAG, requires=("dep-a>=1,<2", "dep-c"))
    for v in dep_a:
        idx.add_dist("dep-a", v)
    idx.add_dist("dep-c", "1.0")
    idx.add_dist("nvidia-fake-cu12", "12.2.1", tag="py3-none-manylinux1_x86_64")
    return idx


@pytest.fixture(scope="module")
def full(make_module_index: Callable[..., FakeIndex]) -> FakeIndex:
    return _fill(make_module_index(), ("1.1", "1.2", "1.3"))


@pytest.fixture(scope="module")
def gone(make_module_index: Callable[..., FakeIndex]) -> FakeIndex:
    """dep-a 1.2 is no longer on this index."""
    return _fill(make_module_index(), ("1.1", "1.3"))


def make_venv(where: Path, index: FakeIndex, *reqs: str) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    subprocess.run(
        [UV, "pip", "install", "-q", "--python", str(where / "bin" / "python"),
         "--index-url", index.url, "--no-deps", *reqs],
        check=True,
    )  # fmt: skip
    return where


@pytest.fixture(scope="module")
def venv(full: FakeIndex, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_venv(
        tmp_path_factory.mktemp("v") / "venv",
        full,
        "tensorflow==2.15.1",
        "dep-a==1.2",
        "dep-c==1.0",
    )


@pytest.mark.venv
def test_capture_of_a_venv_locks_the_installed_versions(
    venv: Path, full: FakeIndex, tmp_path: Path
) -> None:
    out = tmp_path / "env"
    code, stdout, err = run_cli(
        "capture", "--venv", str(venv), "-o", str(out), "--index-url", full.url, "--json"
    )
    assert code == 0, err
    data = json.loads(stdout)
    assert data["packages"] == [
        {"name": "dep-a", "version": "1.2"},
        {"name": "dep-c", "version": "1.0"},
        {"name": "tensorflow", "version": "2.15.1"},
    ]
    assert data["differs"] == []
    assert data["captured"]["pins"] == ["dep-a==1.2", "dep-c==1.0"]
    assert data["captured"]["python"].startswith("3.11.")
    pylock = (out / "pylock.toml").read_text(encoding="utf-8")
    assert 'python = "3.11"' in pylock
    reqs = (out / "requirements.txt").read_text(encoding="utf-8")
    assert "dep-a==1.2 \\" in reqs and "tensorflow==2.15.1 \\" in reqs
    assert {"bootstrap.sh", "Dockerfile", "pylock.toml", "requirements.txt"} <= set(data["files"])
    # the fake wheel's module has no tf.sysconfig: build_info cannot be read, and capture says so
    assert f"tensorflow imports in {venv} but gives no build_info (AttributeError: " in "\n".join(
        data["notes"]
    )


@pytest.mark.venv
def test_capture_of_a_venv_given_by_a_relative_path(
    venv: Path, full: FakeIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: --venv venv was looked up from the probe's temp folder: exit 3."""
    monkeypatch.chdir(venv.parent)
    out = tmp_path / "env"
    code, stdout, err = run_cli(
        "capture", "--venv", venv.name, "-o", str(out), "--index-url", full.url, "--json"
    )
    assert code == 0, err
    data = json.loads(stdout)
    assert [p["name"] for p in data["packages"]] == ["dep-a", "dep-c", "tensorflow"]
    assert (out / "pylock.toml").is_file()


@pytest.mark.venv
def test_a_version_the_index_no_longer_has_is_named_with_the_nearest(
    venv: Path, gone: FakeIndex, tmp_path: Path
) -> None:
    out = tmp_path / "env"
    code, _, err = run_cli("capture", "--venv", str(venv), "-o", str(out), "--index-url", gone.url)
    assert code == 2, err
    assert "1 captured package(s) cannot be locked from the index for CPython 3.11" in err
    assert "  dep-a==1.2: no wheel of 1.2 for CPython 3.11" in err
    assert "nearest available: 1.1 (below), 1.3 (above)" in err
    assert "Traceback" not in err and not (out / "pylock.toml").exists()


def test_capture_of_a_freeze(full: FakeIndex, tmp_path: Path) -> None:
    freeze = tmp_path / "freeze.txt"
    freeze.write_text(
        "dep-a==1.1\ndep-c==1.0\ntensorflow==2.15.1\nnvidia-fake-cu12==12.2.1\n", encoding="utf-8"
    )
    out = tmp_path / "env"
    code, stdout, err = run_cli(
        "capture", "-r", str(freeze), "--python", "3.11", "-o", str(out),
        "--cuda-source", "system", "--index-url", full.url, "--json",
    )  # fmt: skip
    assert code == 0, err
    data = json.loads(stdout)
    assert [(p["name"], p["version"]) for p in data["packages"]] == [
        ("dep-a", "1.1"), ("dep-c", "1.0"), ("tensorflow", "2.15.1"),
    ]  # fmt: skip


@pytest.mark.venv
def test_a_venv_without_tensorflow_is_exit_2(full: FakeIndex, tmp_path: Path) -> None:
    bare = make_venv(tmp_path / "bare", full, "dep-c==1.0")
    code, _, err = run_cli("capture", "--venv", str(bare), "-o", str(tmp_path / "env"))
    assert code == 2
    assert f"{bare}: no TensorFlow installed there" in err and "Traceback" not in err
    code, _, err = run_cli("capture", "--venv", str(tmp_path), "-o", str(tmp_path / "env"))
    assert code == 2 and "neither a venv nor an interpreter (no bin/python there)" in err


def test_what_capture_leaves_out() -> None:
    got = captured_from(
        "v",
        [
            ("tensorflow-cpu", "2.15.1", None),
            ("pip", "24.0", None),
            ("Setuptools", "69.0", None),
            ("nvidia-cudnn-cu12", "8.9.4.25", None),
            ("mylib", "0.1", "editable"),
            ("Keras", "2.15.0", None),
            ("python-apt", "2.4.0ubuntu1", None),
        ],
    )
    assert (got.framework, got.version, got.pins, got.cuda_source) == (
        "tensorflow", "2.15.1", ("keras==2.15.0", "pip==24.0", "setuptools==69.0"), "pip",
    )  # fmt: skip
    assert got.left_out == ("mylib", "python-apt")
    assert got.notes == (
        "tensorflow-cpu 2.15.1 is installed; the lock pins tensorflow 2.15.1",
        "1 nvidia CUDA wheel(s) installed (nvidia-cudnn-cu12): locked with the pip CUDA "
        "source (tensorflow[and-cuda]'s own pins)",
        "left out: mylib 0.1: an editable install of a local checkout: no index serves it",
        "left out: python-apt 2.4.0ubuntu1: '2.4.0ubuntu1' is no PEP 440 version (a distro's "
        "build?): no index has it",
    )


@pytest.mark.venv
def test_the_probe_says_how_each_was_installed_and_a_broken_import_is_a_note(
    tmp_path: Path,
) -> None:
    """capture runs doctor's probe: the direct_url.json kinds reach captured_from, and a
    TensorFlow whose import raises leaves the list whole and says why build_info is absent."""
    from envlock.venv.capture import build_info, capture_venv, probe_venv

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3.*/site-packages"))
    kinds = {
        "tensorflow": None,
        "mylib": '{"url": "file:///src/mylib", "dir_info": {"editable": true}}',
        "frozen": '{"url": "file:///src/frozen", "dir_info": {}}',
        "fromgit": '{"url": "https://example.invalid/x.git", "vcs_info": {"vcs": "git"}}',
    }
    for name, direct in kinds.items():
        info = site / f"{name}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        if direct:
            (info / "direct_url.json").write_text(direct)
    (site / "tensorflow").mkdir()
    (site / "tensorflow" / "__init__.py").write_text("raise ImportError('libfoo.so.1: gone')\n")
    python, dists = probe_venv(venv)
    assert python.startswith("3.11.")
    assert {d["name"]: d["direct"] for d in dists} == {
        "tensorflow": None, "mylib": "editable", "frozen": "folder", "fromgit": "vcs",
    }  # fmt: skip
    assert build_info(venv) == (
        {},
        f"tensorflow does not import in {venv} (ImportError: libfoo.so.1: gone); "
        "build_info not read",
    )
    got = capture_venv(venv)
    # a VCS install pinned by name==version would lock the index's build: left out too
    assert (got.version, got.pins) == ("1.0", ())
    assert got.notes == (
        f"tensorflow does not import in {venv} (ImportError: libfoo.so.1: gone); "
        "build_info not read",
        "left out: fromgit 1.0 (git+https://example.invalid/x.git): installed from a VCS "
        "checkout: the index's build of that version, if any, differs",
        "left out: frozen 1.0 (file:///src/frozen): installed from a local folder: no index "
        "serves it",
        "left out: mylib 1.0 (file:///src/mylib): an editable install of a local checkout: "
        "no index serves it",
    )
