"""envlock lock on the command line, against the real package index.

The index comes from this machine's pip/uv configuration (envlock.index.config);
nothing here names an index host. uv is the real uv binary, pip the real pip.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from index_support import index_now
from packaging.pylock import Pylock
from packaging.requirements import Requirement
from packaging.version import Version

from envlock.cli import main
from envlock.lock import Target, read_lock

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

pytestmark = pytest.mark.network


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def lock_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, err = run_cli(capsys, "lock", *argv, "--json")
    assert code == 0, err
    data: dict[str, Any] = json.loads(out)
    return data


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


INDEX_AT = index_now()


@pytest.fixture(scope="module")
def system_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tensorflow==2.15 locked from the index as it is at INDEX_AT (index_support): the
    tests that lock again or check compare with the same index."""
    out = tmp_path_factory.mktemp("tf215-system")
    argv = ["lock", "tensorflow==2.15", "--exclude-newer", INDEX_AT, "-o", str(out), "--json"]
    assert main(argv) == 0
    return out


def test_system_source_locks_tensorflow_without_nvidia_wheels(system_bundle: Path) -> None:
    lk = read_lock(system_bundle)
    names = {p.name: p.version for p in lk.packages}
    assert names["tensorflow"] == "2.15.1"
    assert lk.resolution.cuda == "12.2" and lk.resolution.cuda_source == "system"
    assert not [n for n in names if n.startswith("nvidia-")]
    assert Version(names["numpy"]) < Version("2")
    target = Target.for_lock(lk.resolution.python, lk.resolution.os)
    for pkg in lk.packages:
        assert pkg.wheels, pkg.name
        for w in pkg.wheels:
            assert target.wheel_ok(w.filename), w.filename
            assert w.url.startswith("https://") and w.url.endswith(w.filename)
            assert len(w.sha256) == 64 and w.size > 0
    doc = tomllib.loads((system_bundle / "pylock.toml").read_text(encoding="utf-8"))
    Pylock.from_dict(doc).validate()
    tool = doc["tool"]["envlock"]
    assert tool["top_requirements"] == ["tensorflow==2.15.1"]
    assert tool["input"]["spec"] == "tensorflow==2.15"
    assert tool["resolution"]["matrix_digest"] and tool["resolution"]["matrix_version"]
    # the rendered bundle came with the same single write
    assert (system_bundle / "requirements.txt").is_file()
    assert os.access(system_bundle / "bootstrap.sh", os.X_OK)


def test_pip_source_locks_the_and_cuda_wheels_exactly(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = lock_json(capsys, "tensorflow==2.15", "--cuda-source", "pip", "-o", str(tmp_path))
    versions = {p["name"]: p["version"] for p in data["packages"]}
    assert data["top_requirements"] == ["tensorflow[and-cuda]==2.15.1"]
    assert versions["nvidia-cudnn-cu12"] == "8.9.4.25"
    assert versions["nvidia-cublas-cu12"] == "12.2.5.6"
    for line in data["resolution"]["and_cuda"]:
        req = Requirement(line)
        assert req.specifier.contains(versions[req.name]), line
    assert len(data["packages"]) == 54


def test_and_cuda_ranges_resolve_to_exact_versions(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = lock_json(capsys, "tensorflow==2.21", "--cuda-source", "pip", "-o", str(tmp_path))
    versions = {p["name"]: p["version"] for p in data["packages"]}
    and_cuda = [Requirement(r) for r in data["resolution"]["and_cuda"]]
    assert and_cuda and any(len(r.specifier) > 1 for r in and_cuda)  # ranges, not pins
    for req in and_cuda:
        assert req.specifier.contains(versions[req.name]), (req, versions.get(req.name))
    text = (tmp_path / "requirements.txt").read_text(encoding="utf-8")
    for req in and_cuda:
        assert f"\n{req.name}=={versions[req.name]} \\\n" in text


def test_same_input_same_bytes(system_bundle: Path, tmp_path: Path) -> None:
    argv = ["lock", "tensorflow==2.15", "--exclude-newer", INDEX_AT, "-o", str(tmp_path)]
    assert main([*argv, "--json"]) == 0
    for name in ("pylock.toml", "requirements.txt"):
        assert (tmp_path / name).read_bytes() == (system_bundle / name).read_bytes(), name


def test_conflicting_pin_exits_2_and_leaves_the_bundle(
    capsys: pytest.CaptureFixture[str], system_bundle: Path
) -> None:
    before = snapshot(system_bundle)
    code, out, err = run_cli(
        capsys, "lock", "tensorflow==2.15", "--with", "numpy>=2", "-o", str(system_bundle)
    )
    assert code == 2
    assert "your pins conflict with tensorflow 2.15.1 (numpy)" in err
    assert "tensorflow 2.15.1 requires numpy>=1.23.5,<2.0.0" in err
    assert "hint:" in err and "Traceback" not in err
    assert snapshot(system_bundle) == before


def test_user_pins_from_with_and_requirement_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    reqs = tmp_path / "req.txt"
    reqs.write_text("# pins from the notebook\nh5py==3.10.0  # known good\n\n", encoding="utf-8")
    out = tmp_path / "env"
    data = lock_json(
        capsys, "tensorflow==2.15", "--with", "numpy==1.26.4", "-r", str(reqs), "-o", str(out)
    )
    versions = {p["name"]: p["version"] for p in data["packages"]}
    assert versions["numpy"] == "1.26.4" and versions["h5py"] == "3.10.0"
    assert data["input"]["with_requirements"] == ["numpy==1.26.4", "h5py==3.10.0"]
    text = (out / "requirements.txt").read_text(encoding="utf-8")
    assert "--with numpy==1.26.4 --with h5py==3.10.0 -o ." in text


def test_requirement_file_with_options_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    reqs = tmp_path / "req.txt"
    reqs.write_text("numpy==1.26.4\n--index-url http://127.0.0.1:9/simple\n", encoding="utf-8")
    code, _, err = run_cli(capsys, "lock", "tensorflow==2.15", "-r", str(reqs), "-o", str(tmp_path))
    assert code == 2
    assert f"-r {reqs}: line 2: --index-url is not supported here" in err
    code, _, err = run_cli(
        capsys, "lock", "tensorflow==2.15", "-r", str(tmp_path / "nope"), "-o", str(tmp_path)
    )
    assert code == 2 and "no such file" in err


def test_check_passes_then_names_what_would_change(
    capsys: pytest.CaptureFixture[str], system_bundle: Path, tmp_path: Path
) -> None:
    code, out, _ = run_cli(capsys, "lock", "--check", str(system_bundle))
    assert code == 0, out
    assert "the lock is current (42 packages, tensorflow 2.15.1)" in out

    copy = tmp_path / "bundle"
    shutil.copytree(system_bundle, copy)  # with modes: bootstrap.sh stays executable
    pylock = copy / "pylock.toml"
    text = pylock.read_text(encoding="utf-8")
    packages = {p.name: p for p in read_lock(copy).packages}
    numpy_sha = packages["numpy"].wheels[0].sha256
    assert text.count(numpy_sha) == 1
    text = text.replace(numpy_sha, "0" * 64)
    # drop the six package altogether
    six = text.index('[[packages]]\nname = "six"')
    text = text[:six] + text[text.index("[[packages]]", six + 1) :]
    pylock.write_text(text, encoding="utf-8")
    code, out, _ = run_cli(capsys, "lock", "--check", str(copy), "--json")
    assert code == 1
    report = json.loads(out)
    assert report["ok"] is False
    assert report["changes"] == [
        f"~ numpy {packages['numpy'].version}: wheels or hashes differ from the index",
        f"+ six {packages['six'].version} (new)",
        "! pylock.toml would be rewritten",
    ]


@pytest.mark.slow
def test_uv_and_pip_resolvers_give_the_same_package_set(
    capsys: pytest.CaptureFixture[str], system_bundle: Path, tmp_path: Path
) -> None:
    by_pip = lock_json(capsys, "tensorflow==2.15", "--resolver", "pip", "-o", str(tmp_path))
    assert by_pip["resolver"] == "pip"
    by_uv = read_lock(system_bundle)
    assert {p["name"]: p["version"] for p in by_pip["packages"]} == {
        p.name: p.version for p in by_uv.packages
    }
    # same files, too: both take url, size and sha256 from the index
    assert {p["name"]: sorted(w["sha256"] for w in p["wheels"]) for p in by_pip["packages"]} == {
        p.name: sorted(w.sha256 for w in p.wheels) for p in by_uv.packages
    }


def test_exclude_newer_locks_only_files_published_before_the_date(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`envlock lock --exclude-newer 2024-03-10 tensorflow==2.15`: every locked file was on
    the index before 2024-03-10T00:00:00Z, by the index's own PEP 691 upload times."""
    from envlock.index import http
    from envlock.index.config import index_url
    from envlock.index.pep691 import project_files
    from envlock.instant import uploaded_before

    out = tmp_path / "asof"
    data = lock_json(capsys, "--exclude-newer", "2024-03-10", "tensorflow==2.15", "-o", str(out))
    assert data["input"]["exclude_newer"] == "2024-03-10T00:00:00Z"
    assert data["resolution"]["version"] == "2.15.1"  # uploaded 2024-03-08
    lk = read_lock(out)
    assert lk.input.exclude_newer == "2024-03-10T00:00:00Z"
    sess = http.session()
    index = index_url(None)
    for pkg in lk.packages:
        files = {f.filename: f for f in project_files(sess, index, pkg.name) or []}
        for w in pkg.wheels:
            assert uploaded_before(files[w.filename].upload_time, "2024-03-10T00:00:00Z"), (
                w.filename,
                files[w.filename].upload_time,
            )
    text = (out / "requirements.txt").read_text(encoding="utf-8")
    assert "    # via tensorflow\n" in text
    # --check resolves and locks again with the recorded instant: nothing changes
    code, stdout, err = run_cli(capsys, "lock", "--check", str(out))
    assert code == 0, stdout + err
