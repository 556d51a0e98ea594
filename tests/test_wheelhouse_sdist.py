"""A wheelhouse of a lock that builds a package from source (#41): ``envlock
wheelhouse`` downloads the locked sdist and the wheels of its build
requirements (the lock records those as ``name==version --hash`` lines, no URL:
found on the index's PEP 691 page by their sha256), and ``restore --wheelhouse
WH --offline`` builds the sdist with the index stopped and a fresh uv cache.

The index is the local fake one (real HTTP). Its sdist is a real tar.gz with an
in-tree PEP 517 backend (as in test_lock_sdist_locked.py: a setuptools backend
would need real setuptools and wheel wheels on this offline index) whose
``[build-system] requires`` names dep-a (which the lock also holds as a
package: its locked wheel serves the build) and build-helper (only a build
requirement: found on the index by its recorded sha256); the backend imports
both, so a build without either fails.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from fixtures.index.fakeindex import FakeIndex, FakeWheel, closed_port
from report_support import run_cli
from test_lock import FW_TAG
from test_lock_sdist_locked import BACKEND, built_sdist
from test_restore import LOCAL_BASE, STUB, hint_command, pasted

from envlock.lock.pylock import read_lock
from envlock.venv.wheelhouse import check_wheelhouse

pytestmark = pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the fake wheels are cp311")

SDIST = "src_only-1.0.tar.gz"
HELPER = "build_helper-1.0-py3-none-any.whl"
DEP_A = "dep_a-1.0-py3-none-any.whl"
TF = f"tensorflow-2.15.1-{FW_TAG}.whl"


@pytest.fixture(scope="module")
def index(make_module_index: Callable[..., FakeIndex]) -> FakeIndex:
    idx = make_module_index()
    idx.add_dist("tensorflow", "2.15.1", tag=FW_TAG, requires=("dep-a>=1", "src-only>=1"))
    idx.add_dist("dep-a", "1.0")
    idx.add_dist("build-helper", "1.0")
    idx.add_dist("build-helper", "2.0", tag="py2-none-any")  # another file on its page
    backend = BACKEND.replace("import dep_a ", "import build_helper, dep_a ")
    assert backend != BACKEND
    idx.add(built_sdist(requires='"dep-a", "build-helper"', backend=backend))
    return idx


@pytest.fixture(scope="module")
def bundle(index: FakeIndex, tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("whsdist")
    out = tmp / "env"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("UV_CACHE_DIR", str(tmp / "uv-cache"))
        code, _, err = run_cli(
            "lock", "tensorflow==2.15", "--python", "3.11", "--index-url", index.url,
            "-o", str(out), "--base-image", LOCAL_BASE, "--python-from", "image",
        )  # fmt: skip
    assert code == 0, err
    (out / "envlock_smoke.py").write_text(STUB, encoding="utf-8")
    return out


@contextlib.contextmanager
def stopped(idx: FakeIndex) -> Iterator[None]:
    """The index down (nothing listens on its port), then up again at its address."""
    parts = urlsplit(idx.url)
    assert parts.hostname and parts.port
    idx.stop()
    try:
        yield
    finally:
        idx.address = (parts.hostname, parts.port)
        idx.start()


def make_wheelhouse(bundle: Path, wh: Path) -> dict[str, object]:
    code, out, err = run_cli("wheelhouse", str(bundle), "-o", str(wh), "--json")
    assert code == 0, err
    doc: dict[str, object] = json.loads(out)
    return doc


def test_the_lock_records_both_build_requirements_without_urls(
    bundle: Path, index: FakeIndex
) -> None:
    lock = read_lock(bundle)
    assert lock.build_constraints == (
        f"build-helper==1.0 --hash=sha256:{index.wheels[HELPER].sha256}",
        f"dep-a==1.0 --hash=sha256:{index.wheels[DEP_A].sha256}",
    )


def test_wheelhouse_holds_the_sdist_and_the_build_requirements(
    bundle: Path, index: FakeIndex, tmp_path: Path
) -> None:
    wh = tmp_path / "wh"
    before = index.hits["/simple/build-helper/"]
    doc = make_wheelhouse(bundle, wh)
    names = sorted([DEP_A, HELPER, SDIST, TF])
    assert sorted(p.name for p in wh.iterdir()) == names
    assert sorted(doc["downloaded"]) == names and doc["present"] == []  # type: ignore[call-overload]
    assert doc["sdists"] == [SDIST] and doc["build_requirements"] == [HELPER]
    for n in names:
        assert (wh / n).read_bytes() == index.wheels[n].data
    # dep-a is a locked package: its wheel serves the build, no page is read for it;
    # build-helper is found on its page
    assert index.hits["/simple/build-helper/"] == before + 1
    assert check_wheelhouse(read_lock(bundle), wh) == []
    # a whole wheelhouse needs no index; a damaged sdist and build wheel are fetched again
    with stopped(index):
        doc = make_wheelhouse(bundle, wh)
    assert doc["downloaded"] == [] and sorted(doc["present"]) == names  # type: ignore[call-overload]
    (wh / SDIST).write_bytes(b"damaged")
    (wh / HELPER).write_bytes(b"damaged")
    doc = make_wheelhouse(bundle, wh)
    assert sorted(doc["downloaded"]) == [HELPER, SDIST]  # type: ignore[call-overload]
    assert (wh / SDIST).read_bytes() == index.wheels[SDIST].data
    assert (wh / HELPER).read_bytes() == index.wheels[HELPER].data
    text = run_cli("wheelhouse", str(bundle), "-o", str(wh))[1]
    assert text.startswith(
        f"{wh}: 4 files (0 downloaded, 0 bytes; 4 already there; 1 of them source "
        "archives, 1 the wheels of their build requirements)\n"
    ), text


@pytest.mark.parametrize("fault", ["another-file", "wrong-hash"])
def test_wheelhouse_refuses_a_build_requirement_the_index_serves_otherwise(
    bundle: Path, index: FakeIndex, tmp_path: Path, fault: str
) -> None:
    """another-file: the page lists another file under the name (no recorded sha256:
    nothing to download); wrong-hash: the page lists the recorded sha256 but the
    body is other bytes (refused as a locked wheel's would be)."""
    good = index.wheels[HELPER]
    wh = tmp_path / "wh"
    try:
        if fault == "another-file":
            index.wheels[HELPER] = FakeWheel(HELPER, good.data + b"x")
        else:
            index.faults[f"/files/{HELPER}"] = ["wrong-hash"]
        code, _, err = run_cli("wheelhouse", str(bundle), "-o", str(wh))
    finally:
        index.wheels[HELPER] = good
        index.faults.pop(f"/files/{HELPER}", None)
    assert code == 3, err
    first = next(line for line in err.splitlines() if line.startswith("envlock: error: "))
    assert err.count("envlock: error: ") == 1
    if fault == "another-file":
        assert first == (
            f"envlock: error: the index at {index.url} serves no wheel of the build "
            "requirement build-helper==1.0 with a sha256 the lock records "
            "(build-constraints.txt)"
        )
    else:
        assert first.startswith(
            f"envlock: error: {HELPER}: the sha256 of the download is not the lock's "
            f"(listed {good.sha256}, received "
        ), first
    assert "Traceback" not in err
    assert not (wh / HELPER).exists()
    assert [p.name for p in wh.iterdir() if p.name.startswith(".")] == []


@pytest.mark.venv
@pytest.mark.other_python  # restore finds the lock's Python
def test_offline_restore_builds_the_sdist_from_the_wheelhouse_with_the_index_down(
    bundle: Path, index: FakeIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_bootstrap_drift import installed

    wh = tmp_path / "wh"
    make_wheelhouse(bundle, wh)
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "fresh-cache"))  # nothing cached
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{closed_port()}/simple")
    venv = tmp_path / "venv"
    with stopped(index):
        code, out, err = run_cli(
            "restore", str(bundle), "--venv", str(venv), "--wheelhouse", str(wh),
            "--offline", "--allow-cpu",
        )  # fmt: skip
    assert code == 0, out + err
    assert "building src-only from source (no wheel fits; locked by sha256, built with the " in (
        out + err
    )
    # the build requirement built it and stayed out of the venv
    assert installed(venv) == {"tensorflow": "2.15.1", "dep-a": "1.0", "src-only": "1.0"}
    imported = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import src_only; print(src_only.VERSION)"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (imported.returncode, imported.stdout) == (0, "1.0\n"), imported.stderr


@pytest.mark.venv
@pytest.mark.other_python  # restore finds the lock's Python; the hint restores
@pytest.mark.parametrize(
    ("gone", "said"),
    [
        (SDIST, f"  {SDIST}: missing"),
        (
            HELPER,
            "  build-helper==1.0 (build requirement): missing (no wheel of it with a "
            "sha256 the lock records)",
        ),
    ],
)
def test_a_wheelhouse_without_the_sdist_or_a_build_requirement_is_named_with_a_hint_that_runs(
    bundle: Path,
    index: FakeIndex,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    gone: str,
    said: str,
) -> None:
    from test_bootstrap_drift import installed

    wh = tmp_path / "wh"
    make_wheelhouse(bundle, wh)
    (wh / gone).unlink()
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "fresh-cache"))
    venv = tmp_path / "venv"
    argv = ["restore", str(bundle), "--venv", str(venv), "--wheelhouse", str(wh)]
    with stopped(index):
        code, out, err = run_cli(*argv, "--offline", "--allow-cpu")
    assert code == 2, out + err
    assert err.startswith(
        f"envlock: error: --wheelhouse {wh} does not match the lock: 1 of 4 locked files "
        "missing or damaged; nothing was built (exit 2: the wheelhouse given is not the "
        f"lock's, a bad input)\n{said}\n"
    ), err
    assert "Traceback" not in err and not venv.exists()
    # the hint, pasted as printed (the index up again): fills the wheelhouse, restores
    fix = hint_command(err, "fill it (downloads only what is missing or damaged, hash-checked): ")
    assert fix == (
        f"envlock wheelhouse {bundle} -o {wh} && envlock restore {bundle} --venv {venv} "
        f"--wheelhouse {wh} --offline --allow-cpu"
    )
    done = pasted(fix, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (wh / gone).read_bytes() == index.wheels[gone].data
    assert installed(venv) == {"tensorflow": "2.15.1", "dep-a": "1.0", "src-only": "1.0"}
    shutil.rmtree(wh)


def test_the_build_requirements_are_looked_up_on_the_index_the_lock_was_made_from(
    bundle: Path, index: FakeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recorded --index-url (without its password), with the configured index's
    credentials where that is the same index; another configured index is not used."""
    from dataclasses import replace

    from envlock.venv.wheelhouse import lock_index

    lock = read_lock(bundle)
    assert lock.input.index_url == index.url
    monkeypatch.setenv("UV_DEFAULT_INDEX", "http://127.0.0.1:9/other/simple")
    assert lock_index(lock) == index.url
    with_user = index.url.replace("http://", "http://user:secret@")
    monkeypatch.setenv("UV_DEFAULT_INDEX", with_user)
    assert lock_index(lock) == with_user
    unrecorded = replace(lock, input=replace(lock.input, index_url=None))
    assert lock_index(unrecorded) == with_user
