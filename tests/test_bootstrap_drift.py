"""bootstrap.sh run again repairs a venv that drifted from the lock, and refuses a
host whose glibc is older than the locked wheels need.

Most bundles here are rendered from a lock of the local fake index (framework
"fakefw"): bootstrap.sh really makes the venv and installs with pip from that
index. The last test (network, slow) does the same with real TensorFlow 2.15.1
from the configured index, with envlock doctor before and after the repair.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fixtures.index.fakeindex import FakeIndex
from packaging.utils import canonicalize_name
from report_support import run_cli
from test_lock import FW_TAG, resolution

from envlock.lock import lock
from envlock.lock.folder import bundle_files
from envlock.model import Lock, LockInput
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
    given = LockInput(spec="fakefw==2.15.1", cuda_source="system")
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


def installed(venv: Path) -> dict[str, str]:
    code = (
        "import json, importlib.metadata as m; "
        "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))"
    )
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, check=True
    )
    found: dict[str, str] = json.loads(out.stdout)
    return {k: v for k, v in found.items() if k in ("fakefw", "dep-a", "dep-c")}


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


# -- real TensorFlow 2.15.1 (CPU here): bootstrap.sh, drift, doctor, repair, doctor ------


def locked_versions(bundle: Path) -> dict[str, str]:
    return {
        line.split("==")[0]: line.split("==")[1].split()[0]
        for line in (bundle / "requirements.txt").read_text(encoding="utf-8").splitlines()
        if "==" in line and not line.startswith("#")
    }


def doctor_json(bundle: Path) -> tuple[int, dict[str, dict[str, str]], dict[str, Any]]:
    """envlock doctor --lock BUNDLE (the venv bootstrap.sh made there); (exit, findings by
    check, the document)."""
    code, out, err = run_cli("doctor", "--lock", str(bundle), "--allow-cpu", "--json")
    assert "Traceback" not in err
    doc = json.loads(out)
    return code, {f["check"]: f for f in doc["findings"]}, doc


@pytest.fixture(scope="module")
def tf_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``envlock lock tensorflow==2.15.1`` from the configured index, and the venv its
    bootstrap.sh makes (BUNDLE/.venv, the default), once per module."""
    bundle = tmp_path_factory.mktemp("tf215-bootstrap") / "env"
    code, _, err = run_cli("lock", "tensorflow==2.15.1", "--python", "3.11", "-o", str(bundle))
    assert code == 0, err
    made = bootstrap(bundle, None, "--no-smoke")
    assert made.returncode == 0, made.stdout + made.stderr
    return bundle


@pytest.mark.network
@pytest.mark.slow
def test_real_tensorflow_drift_doctor_names_it_bootstrap_repairs_it(tf_bundle: Path) -> None:
    locked = locked_versions(tf_bundle)
    venv = tf_bundle / ".venv"
    assert installed_all(venv) == locked
    code, checks, doc = doctor_json(tf_bundle)
    assert doc["interpreter"]["chosen_by"] == "bundle"
    assert checks["packages"]["status"] == "PASS"
    assert checks["tensorflow version"]["status"] == "PASS"
    assert code == 0, doc

    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    other = "4.25.0" if locked["protobuf"] != "4.25.0" else "4.24.4"
    subprocess.run([*pip, "uninstall", "-y", "numpy"], check=True, timeout=300)
    subprocess.run([*pip, "install", "--no-deps", f"protobuf=={other}"], check=True, timeout=600)

    code, checks, doc = doctor_json(tf_bundle)
    assert code == 1, doc
    assert checks["package numpy"]["status"] == "FAIL"
    assert checks["package numpy"]["cause"] == (
        f"numpy {locked['numpy']} is locked but not installed"
    )
    assert checks["package protobuf"]["cause"] == (
        f"protobuf {other} is installed; the lock has {locked['protobuf']}"
    )
    assert checks["tensorflow import"]["status"] == "FAIL"  # numpy is gone

    repair = bootstrap(tf_bundle, None, "--allow-cpu")
    assert repair.returncode == 0, repair.stdout + repair.stderr
    lines = repair.stdout.splitlines()
    at = lines.index(
        "bootstrap: the venv differs from the lock (2 packages); "
        "installing the locked versions again:"
    )
    assert lines[at + 1 : at + 3] == [
        f"  numpy {locked['numpy']}: missing",
        f"  protobuf {locked['protobuf']}: {other} installed",
    ]
    assert "bootstrap: smoke test PASSED" in lines or "bootstrap: smoke test WARNED" in lines
    assert installed_all(venv) == locked

    code, checks, doc = doctor_json(tf_bundle)
    assert "package numpy" not in checks and "package protobuf" not in checks
    assert checks["packages"] == {
        "check": "packages",
        "status": "PASS",
        "cause": f"all {len(locked)} locked distributions at their versions",
        "fix": "",
    }
    assert checks["tensorflow version"]["cause"] == "tensorflow 2.15.1 imports"
    assert code == 0, doc


def installed_all(venv: Path) -> dict[str, str]:
    """Every distribution in ``venv`` but pip (the venv's own; setuptools and wheel are
    locked: TensorFlow 2.15 requires them), names normalized."""
    code = (
        "import json, importlib.metadata as m; "
        "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))"
    )
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, check=True
    )
    found: dict[str, str] = json.loads(out.stdout)
    names = {k: canonicalize_name(k) for k in found}
    return {names[k]: v for k, v in found.items() if names[k] != "pip"}
