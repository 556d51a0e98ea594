"""The uv releases envlock is tested with, and the parser of uv's failures at both ends.

pyproject.toml requires ``uv`` in the range envlock.lock.uv.TESTED_UV names. The
parser of uv's no-solution prose (envlock/lock/conflicts.py) is run here against
the real output of the oldest release of that range (downloaded from the index the
user's pip configuration names) and of the uv installed beside envlock, on the
same local index: each failure must read the same from both. uv 0.7 to 0.12 wrap
that prose at 80 columns in the middle of a clause; 0.13 does not.
"""

from __future__ import annotations

import stat
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fixtures.index.fakeindex import FakeIndex
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

import envlock.lock.uv as uv_mod
from envlock.errors import EnvironmentFailure, NoResolution
from envlock.lock import lock
from envlock.model import Constraints, LockInput, Resolution

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
OLDEST = min(Version(s.version) for s in SpecifierSet(uv_mod.TESTED_UV))


def test_the_tested_range_is_the_one_pyproject_and_the_venv_script_install() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    uv_reqs = [Requirement(r) for r in project["dependencies"] if Requirement(r).name == "uv"]
    assert [str(r.specifier) for r in uv_reqs] == [str(SpecifierSet(uv_mod.TESTED_UV))]
    script = (ROOT / "scripts" / "ensure-venv.sh").read_text(encoding="utf-8")
    assert f'"uv{uv_mod.TESTED_UV}"' in script
    assert Version(uv_mod.uv_version()) in SpecifierSet(uv_mod.TESTED_UV)


def test_a_uv_older_than_the_range_is_refused_naming_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = tmp_path / "uv"
    old.write_text("#!/bin/sh\necho 'uv 0.9.0 (x86_64-unknown-linux-gnu)'\n", encoding="utf-8")
    old.chmod(old.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(uv_mod, "_find_uv_bin", lambda: str(old))
    with pytest.raises(EnvironmentFailure) as e:
        uv_mod.uv_bin()
    assert e.value.message == (
        f"uv 0.9.0 is older than the releases envlock works with (uv{uv_mod.TESTED_UV})"
    )
    assert e.value.hint == (
        f"pip install 'uv{uv_mod.TESTED_UV}' in envlock's environment, or pass --resolver pip"
    )
    assert e.value.exit_code == 3


def _resolution(cuda_source: str) -> Resolution:
    """fakefw 2.15.1; with ``cuda_source`` pip its and-cuda extra is locked too."""
    return Resolution.from_dict(
        {
            "framework": "fakefw",
            "version": "2.15.1",
            "python": "3.11",
            "python_supported": ["3.9", "3.10", "3.11"],
            "cuda": "12.2",
            "cudnn": "8.9",
            "driver_min": "525.60.13",
            "compute_capabilities": ["sm_80"],
            "cuda_source": cuda_source,
            "os": "ubuntu22.04",
            "base_image": "nvidia/cuda:12.2.2-cudnn8-runtime-ubuntu22.04",
            "base_image_digest": None,
            "cuda_image_version": "12.2.2",
            "image_cudnn": "8.9.6.50",
            "and_cuda": ["nvidia-old-cu11==8.5.3.1"] if cuda_source == "pip" else [],
            "requires_python": ">=3.9",
            "matrix_version": "2026-11-30",
            "matrix_digest": "0" * 64,
            "reasons": ["newest 2.15 release"],
        }
    )


@pytest.fixture(scope="module")
def index(make_module_index: Callable[..., FakeIndex]) -> FakeIndex:
    """fakefw 2.15.1 needs dep-a<2; its and-cuda extra a package with a cp310 wheel
    only; dep-c 2.0 needs Python 3.12."""
    idx = make_module_index()
    idx.add_dist(
        "fakefw",
        "2.15.1",
        tag="cp311-cp311-manylinux_2_17_x86_64",
        requires=("dep-a>=1,<2",),
        extras={"and-cuda": ("nvidia-old-cu11==8.5.3.1",)},
    )
    for v in ("1.0", "2.0"):
        idx.add_dist("dep-a", v)
    idx.add_dist("dep-c", "1.0")
    idx.add_dist("dep-c", "2.0", requires_python=">=3.12")
    idx.add_dist("nvidia-old-cu11", "8.5.3.1", tag="cp310-none-manylinux_2_17_x86_64")
    return idx


def _oldest_uv(root: Path) -> str:
    """The oldest uv of the range, from the index pip's configuration names."""
    wheels = root / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--only-binary",
            ":all:",
            "--platform",
            "manylinux_2_17_x86_64",
            "-d",
            str(wheels),
            f"uv=={OLDEST}",
        ],
        check=True,
        timeout=300,
    )
    (whl,) = wheels.glob("uv-*.whl")
    with zipfile.ZipFile(whl) as z:
        (member,) = (n for n in z.namelist() if n.endswith(".data/scripts/uv"))
        z.extract(member, root)
    binary = root / member
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    return str(binary)


@pytest.fixture(
    scope="module",
    params=[
        "installed",
        pytest.param("oldest", marks=pytest.mark.network),
    ],
)
def uv(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if request.param == "installed":
        yield uv_mod.uv_bin()
        return
    binary = _oldest_uv(tmp_path_factory.mktemp("uv-oldest"))
    said = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    assert Version(said.split()[1]) == OLDEST
    yield binary


def _fails(index: FakeIndex, uv: str, tmp_path: Path, *with_: str, extra: bool = False) -> str:
    """The first line of the message and the hint of the lock's failure with ``uv``."""
    source = "pip" if extra else "system"
    mp = pytest.MonkeyPatch()
    mp.setattr(uv_mod, "_find_uv_bin", lambda: uv)
    try:
        with pytest.raises(NoResolution) as err:
            lock(
                _resolution(source),
                LockInput(
                    Constraints(spec="fakefw==2.15", cuda_source=source), with_requirements=with_
                ),
                resolver="uv",
                index_url=index.url,
                cache_dir=str(tmp_path / "uv-cache"),
            )
    finally:
        mp.undo()
    assert "uv said:" in err.value.message  # uv's own words are kept, whole
    assert err.value.exit_code == 2
    return err.value.message.split("\n", 1)[0] + "\nhint: " + (err.value.hint or "")


TARGET = "CPython 3.11, Linux x86_64, manylinux_2_35_x86_64"


def test_a_pin_that_conflicts_with_the_framework_reads_the_same(
    index: FakeIndex, uv: str, tmp_path: Path
) -> None:
    head = _fails(index, uv, tmp_path, "dep-a>=2").split("\n")[0]
    assert head == (
        "your pins conflict with fakefw 2.15.1 (dep-a): you asked for dep-a>=2, but "
        "fakefw 2.15.1 requires dep-a>=1,<2"
    )


def test_no_wheel_for_the_python_reads_the_same(index: FakeIndex, uv: str, tmp_path: Path) -> None:
    text = _fails(index, uv, tmp_path, extra=True)
    assert text.startswith(
        f"no wheel of nvidia-old-cu11==8.5.3.1 fits {TARGET} (wrong Python tags)\nhint: "
        "choose another --python"
    ), text


def test_a_pin_that_needs_another_python_reads_the_same(
    index: FakeIndex, uv: str, tmp_path: Path
) -> None:
    text = _fails(index, uv, tmp_path, "dep-c==2.0")
    assert text == (
        f"the lock is for {TARGET}, and your pins need another Python: dep-c==2.0 needs "
        "Python >=3.12\nhint: pass --python 3.12 (a pip freeze does not record the Python it "
        "came from; 'envlock capture --venv' does), or relax the pin on dep-c"
    )


def test_a_missing_version_reads_the_same(index: FakeIndex, uv: str, tmp_path: Path) -> None:
    assert "dep-a==9.9" in _fails(index, uv, tmp_path, "dep-a==9.9").split("\n")[0]
