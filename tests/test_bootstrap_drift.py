"""bootstrap.sh run again repairs a venv that drifted from the lock, and refuses a
host whose glibc is older than the locked wheels need.

The bundle is rendered from a lock of the local fake index (framework "fakefw"):
bootstrap.sh really makes the venv and installs with pip from that index. The
same repair with real TensorFlow 2.15.1, with envlock doctor before and after,
is in test_render_bootstrap.py (network, slow; it shares that module's venv).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from fixtures.index.fakeindex import FakeIndex
from packaging.utils import canonicalize_name
from test_lock import FW_TAG, resolution

from envlock.bundle.folder import bundle_files
from envlock.lock import lock
from envlock.model import Constraints, Lock, LockInput
from envlock.render import EXECUTABLE, RenderOptions
from envlock.render.context import glibc_floor

pytestmark = pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the fake lock is cp311")


@pytest.fixture(scope="module")
def index(make_module_index: Callable[..., FakeIndex]) -> FakeIndex:
    idx = make_module_index()
    idx.add_dist("fakefw", "2.15.1", tag=FW_TAG, requires=("dep-a>=1,<2", "dep-c"))
    for v in ("1.0", "1.5"):
        idx.add_dist("dep-a", v)
    idx.add_dist("dep-c", "1.0")
    idx.add_dist("dep-x", "1.0", requires=("dep-gone>=1",))  # not locked; its requirement unmet
    return idx


@pytest.fixture(scope="module")
def locked(index: FakeIndex, tmp_path_factory: pytest.TempPathFactory) -> Lock:
    cache = tmp_path_factory.mktemp("uv")
    given = LockInput(Constraints(spec="fakefw==2.15.1", cuda_source="system"))
    return lock(resolution("system"), given, index_url=index.url, cache_dir=str(cache))


def write_bundle(folder: Path, locked: Lock) -> Path:
    folder.mkdir()
    for name, data in bundle_files(locked, RenderOptions()).items():
        (folder / name).write_bytes(data)
        if name in EXECUTABLE:
            (folder / name).chmod(0o755)
    return folder


def bootstrap(bundle: Path, index_url: str | None, *args: str) -> subprocess.CompletedProcess[str]:
    """Run bundle/bootstrap.sh; ``index_url`` None: pip's own configuration."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PIP_NO_INPUT"] = "1"
    if index_url is not None:
        env.update(PIP_INDEX_URL=index_url, PIP_CONFIG_FILE=os.devnull)
    # python3.11 first on PATH: this test's interpreter
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    return subprocess.run(
        ["bash", str(bundle / "bootstrap.sh"), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=bundle,
    )


def installed(venv: Path, skip: tuple[str, ...] = ("pip", "setuptools")) -> dict[str, str]:
    """{normalized name: version} of every distribution in ``venv`` but ``skip``."""
    code = (
        "import json, importlib.metadata as m; "
        "print(json.dumps([[d.metadata['Name'], d.version] for d in m.distributions()]))"
    )
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, check=True
    )
    found: dict[str, str] = {}
    for name, version in json.loads(out.stdout):
        if name and canonicalize_name(name) not in skip:
            found.setdefault(canonicalize_name(name), version)
    return found


@pytest.mark.venv  # bootstrap.sh builds the venv
def test_a_rerun_repairs_a_missing_and_a_moved_package(
    locked: Lock, index: FakeIndex, tmp_path: Path
) -> None:
    assert {p.name: p.version for p in locked.packages} == {
        "fakefw": "2.15.1",
        "dep-a": "1.5",
        "dep-c": "1.0",
    }
    bundle = write_bundle(tmp_path / "env", locked)
    venv = tmp_path / "venv"
    first = bootstrap(bundle, index.url, "--no-smoke", "--venv", str(venv))
    assert first.returncode == 0, first.stdout + first.stderr
    assert installed(venv) == {"fakefw": "2.15.1", "dep-a": "1.5", "dep-c": "1.0"}

    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "uninstall", "-y", "dep-c"], check=True)
    subprocess.run(
        [*pip, "install", "--no-deps", "--index-url", index.url, "dep-a==1.0"], check=True
    )
    assert installed(venv) == {"fakefw": "2.15.1", "dep-a": "1.0"}

    second = bootstrap(bundle, index.url, "--no-smoke", "--venv", str(venv))
    assert second.returncode == 0, second.stdout + second.stderr
    lines = second.stdout.splitlines()
    at = lines.index(
        "bootstrap: the venv differs from the lock (2 packages); "
        "installing the locked versions again:"
    )
    assert lines[at + 1 : at + 3] == ["  dep-a 1.5: 1.0 installed", "  dep-c 1.0: missing"]
    assert "nothing to install" not in second.stdout
    assert installed(venv) == {"fakefw": "2.15.1", "dep-a": "1.5", "dep-c": "1.0"}

    third = bootstrap(bundle, index.url, "--no-smoke", "--venv", str(venv))
    assert third.returncode == 0, third.stdout + third.stderr
    assert "every locked package installed as locked: nothing to install" in third.stdout


def test_a_host_glibc_older_than_the_wheels_need_is_exit_3(locked: Lock, tmp_path: Path) -> None:
    assert glibc_floor(locked) == "2.17"  # fakefw's manylinux_2_17 wheel; the others are any
    newer = tuple(
        replace(
            p,
            wheels=tuple(
                replace(
                    w, filename=w.filename.replace("py3-none-any", "py3-none-manylinux_2_99_x86_64")
                )
                for w in p.wheels
            ),
        )
        if p.name == "dep-c"
        else p
        for p in locked.packages
    )
    needy = replace(locked, packages=newer)
    assert glibc_floor(needy) == "2.99"
    bundle = write_bundle(tmp_path / "env", needy)
    venv = tmp_path / "venv"
    # an index on a closed port: never asked, the check comes before the venv
    run = bootstrap(bundle, "http://127.0.0.1:9/simple", "--no-smoke", "--venv", str(venv))
    assert run.returncode == 3, run.stdout + run.stderr
    glibc = os.confstr("CS_GNU_LIBC_VERSION")
    assert glibc is not None
    assert run.stderr.strip() == (
        f"bootstrap: error: this host's glibc is {glibc.split()[-1]}; the locked wheels need "
        "glibc 2.99 or newer (manylinux_2_99): use the Dockerfile, or a newer host"
    )
    assert not venv.exists()


@pytest.mark.venv  # bootstrap.sh builds the venv
def test_a_repair_that_leaves_a_failed_check_is_exit_1(
    locked: Lock, index: FakeIndex, tmp_path: Path
) -> None:
    """The repair installs, then pip check fails (an unlocked package's requirement is
    missing): a failed check, exit 1, not an environment failure."""
    bundle = write_bundle(tmp_path / "env", locked)
    venv = tmp_path / "venv"
    first = bootstrap(bundle, index.url, "--no-smoke", "--venv", str(venv))
    assert first.returncode == 0, first.stdout + first.stderr
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "uninstall", "-y", "dep-c"], check=True)
    subprocess.run([*pip, "install", "--no-deps", "--index-url", index.url, "dep-x"], check=True)
    second = bootstrap(bundle, index.url, "--no-smoke", "--venv", str(venv))
    assert second.returncode == 1, second.stdout + second.stderr
    assert "  dep-c 1.0: missing" in second.stdout.splitlines()
    assert second.stderr.endswith(
        f"bootstrap: error: pip check found broken requirements in {venv}\n"
    )
    assert installed(venv)["dep-c"] == "1.0"  # the repair itself happened


def test_a_venv_folder_that_is_not_a_venv_is_exit_2(locked: Lock, tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path / "env", locked)
    folder = tmp_path / "notavenv"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine\n", encoding="utf-8")
    run = bootstrap(bundle, "http://127.0.0.1:9/simple", "--no-smoke", "--venv", str(folder))
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr == (
        f"bootstrap: error: {folder} exists and is not a venv; pick another --venv or remove it\n"
    )
    assert sorted(p.name for p in folder.iterdir()) == ["keep.txt"]
