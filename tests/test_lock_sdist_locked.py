"""Source archives locked (#41): a package with no wheel for the target is locked
by its sdist (PEP 751 ``[packages.sdist]``, ``--hash`` lines), its build
requirements locked with hashes into build-constraints.txt, and built by
restore; the pylock reader refuses a crafted sdist entry.

The index is the local fake one (real HTTP). Its sdist is a real tar.gz with
an in-tree PEP 517 backend (``backend-path``: it writes the wheel with
zipfile) whose ``[build-system] requires`` names dep-a, a wheel the index
serves: the lock pins dep-a with its hash as the build requirement, and uv
really installs it into the build environment (hash-checked) and builds. A
setuptools backend would need setuptools and wheel on this offline index.
One test reads the real index (``network``): promise 2.3, which publishes only
a source archive, built by setuptools.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from fixtures.index.fakeindex import FakeIndex, FakeWheel
from report_support import run_cli
from test_lock import FW_TAG
from test_restore import LOCAL_BASE, STUB

from envlock.errors import DataError
from envlock.lock.pylock import parse_pylock, pylock_text, read_lock
from envlock.lock.sdists import MAX_SDIST_BYTES

pytestmark = pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the fake wheels are cp311")


BACKEND = """\
import base64, hashlib, os, zipfile
NAME, VERSION = "src_only", "1.0"
INFO = NAME + "-" + VERSION + ".dist-info"
FILES = {
    NAME + "/__init__.py": "VERSION = '1.0'\\n",
    INFO + "/METADATA": "Metadata-Version: 2.1\\nName: src-only\\nVersion: 1.0\\n"
    "Requires-Dist: dep-a\\n",
    INFO + "/WHEEL": "Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\n"
    "Tag: py3-none-any\\n",
}
def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    import dep_a  # the build requirement, installed from the index by the installer
    name = NAME + "-" + VERSION + "-py3-none-any.whl"
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as z:
        for path, text in FILES.items():
            data = text.encode()
            z.writestr(path, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append("%s,sha256=%s,%d" % (path, digest.decode(), len(data)))
        record.append(INFO + "/RECORD,,")
        z.writestr(INFO + "/RECORD", "\\n".join(record) + "\\n")
    return name
"""


def built_sdist(
    name: str = "src-only",
    requires: str = '"dep-a"',
    backend: str = BACKEND,
    metadata_version: str = "2.2",
) -> FakeWheel:
    """NAME-1.0.tar.gz: PKG-INFO (Metadata-Version 2.2: static, uv reads it without
    a build; 2.1: uv builds the sdist for its metadata), and a pyproject.toml whose
    in-tree backend needs ``requires`` (reproducible bytes)."""
    import gzip
    import io
    import tarfile

    root = f"{name.replace('-', '_')}-1.0"
    files = {
        f"{root}/PKG-INFO": f"Metadata-Version: {metadata_version}\nName: {name}\n"
        "Version: 1.0\nRequires-Dist: dep-a\n",
        f"{root}/pyproject.toml": f"[build-system]\nrequires = [{requires}]\n"
        'build-backend = "backend"\nbackend-path = ["."]\n',
        f"{root}/backend.py": backend,
    }
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(path)
            info.size, info.mtime, info.mode = len(data), 1704067200, 0o644
            tar.addfile(info, io.BytesIO(data))
    return FakeWheel(f"{root}.tar.gz", gzip.compress(raw.getvalue(), mtime=0))


@pytest.fixture(scope="module")
def index(make_module_index: Callable[..., FakeIndex]) -> FakeIndex:
    idx = make_module_index()
    idx.add_dist("tensorflow", "2.15.1", tag=FW_TAG, requires=("dep-a>=1", "src-only>=1"))
    idx.add_dist("dep-a", "1.0")
    idx.add(built_sdist())
    return idx


@pytest.fixture(scope="module")
def bundle(index: FakeIndex, tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("sdist")
    out = tmp / "env"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("UV_CACHE_DIR", str(tmp / "uv-cache"))
        code, _, err = run_cli(
            "lock", "tensorflow==2.15", "--python", "3.11", "--index-url", index.url,
            "-o", str(out),
            "--base-image", LOCAL_BASE, "--python-from", "image",
        )  # fmt: skip
    assert code == 0, err
    return out


def test_the_sdist_is_locked_by_its_sha256_in_both_lock_files(
    bundle: Path, index: FakeIndex
) -> None:
    sdist = index.wheels["src_only-1.0.tar.gz"]
    dep_a = next(w for w in index.wheels.values() if w.filename.startswith("dep_a-1.0-"))
    pylock = (bundle / "pylock.toml").read_text()
    url = f"{index.url.removesuffix('/simple')}/files/src_only-1.0.tar.gz"
    assert (
        '[[packages]]\nname = "src-only"\nversion = "1.0"\n'
        'dependencies = [\n    { name = "dep-a" },\n]\n\n'
        f'[packages.sdist]\nname = "src_only-1.0.tar.gz"\nurl = "{url}"\n'
        f"size = {len(sdist.data)}\n\n"
        f'[packages.sdist.hashes]\nsha256 = "{sdist.sha256}"\n'
    ) in pylock
    assert "# Built from source where installed (no wheel fits the target): src-only;\n" in pylock
    assert f'build_constraints = [\n    "dep-a==1.0 --hash=sha256:{dep_a.sha256}",\n]' in pylock
    reqs = (bundle / "requirements.txt").read_text()
    assert f"src-only==1.0 \\\n    --hash=sha256:{sdist.sha256}\n    # via tensorflow\n" in reqs
    assert "# Built from source where installed (no wheel fits the target): src-only;\n" in reqs
    assert (bundle / "build-constraints.txt").read_text() == (
        "# Made by envlock: the build requirements of the packages built from source (src-only),\n"
        "# pinned with hashes; every build of them uses exactly these (envlock restore and\n"
        "# uv: uv pip install --build-constraints build-constraints.txt ...; pip refuses hashed\n"
        "# constraints for unpinned build requirements, pypa/pip#9243, so bootstrap.sh and\n"
        "# the Dockerfile give pip these pins without their hashes).\n"
        "\n"
        f"dep-a==1.0 \\\n    --hash=sha256:{dep_a.sha256}\n"
    )
    boot = (bundle / "bootstrap.sh").read_text()
    assert 'say "building src-only from source (no wheel fits; locked by sha256;' in boot
    assert "--only-binary :all: --no-binary src-only -r" in boot
    docker = (bundle / "Dockerfile").read_text()
    assert "# Built from source (no wheel fits; locked by sha256): src-only;\n" in docker
    assert "COPY requirements.txt build-constraints.txt /tmp/envlock/\n" in docker


def test_the_lock_reads_back_and_writes_the_same_bytes(bundle: Path) -> None:
    lock = read_lock(bundle)
    pkg = next(p for p in lock.packages if p.name == "src-only")
    assert pkg.wheels == () and pkg.sdist is not None
    assert pkg.sdist.filename == "src_only-1.0.tar.gz"
    assert pylock_text(lock) == (bundle / "pylock.toml").read_text()


def test_lock_check_of_the_bundle_is_current(bundle: Path, index: FakeIndex) -> None:
    code, out, err = run_cli("lock", "--check", str(bundle))
    assert code == 0, out + err


def _crafted(bundle: Path, old: str, new: str) -> str:
    """pylock.toml with the first ``old`` from the sdist's table on replaced by ``new``."""
    text = (bundle / "pylock.toml").read_text()
    at = text.index("[packages.sdist]")
    assert old in text[at:]
    return text[:at] + text[at:].replace(old, new, 1)


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        ('sha256 = "', 'sha256 = "0', "is not 64 lowercase hex digits"),
        ('name = "src_only-1.0.tar.gz"', 'name = "../../src_only-1.0.tar.gz"',
         "is not consistent with package name 'src-only'"),
        ('name = "src_only-1.0.tar.gz"', 'name = "dep_a-1.0.tar.gz"',
         "is not consistent with package name 'src-only'"),
        ('name = "src_only-1.0.tar.gz"', 'name = "src_only-1.1.tar.gz"',
         "Version in 'src_only-1.1.tar.gz' is not consistent with package version '1.0'"),
        ("/files/src_only-1.0.tar.gz", "/files/x/../../evil.tar.gz", "does not end in"),
        ("size = 832", f"size = {MAX_SDIST_BYTES + 1}", "is not from 1 to"),
        ("size = 832", "size = 0", "is not from 1 to"),
        ('[packages.sdist]\nname = "src_only-1.0.tar.gz"\n',
         '[packages.sdist]\nname = "src_only-1.0.tar.gz"\npath = "/etc/src_only-1.0.tar.gz"\n',
         "a local path"),
        ("build_constraints = [\n    \"dep-a", "build_constraints = [\n    \"../dep-a",
         "is not 'name==version --hash=sha256:...'"),
    ],
)  # fmt: skip
def test_the_reader_refuses_a_crafted_sdist_entry(
    bundle: Path, old: str, new: str, said: str
) -> None:
    text = _crafted(bundle, old, new)
    with pytest.raises(DataError) as e:
        parse_pylock(text, "crafted/pylock.toml")
    assert said in e.value.message, e.value.message
    assert e.value.message.startswith("crafted/pylock.toml: ")


def test_a_lock_made_with_only_binary_holding_an_sdist_is_refused(bundle: Path) -> None:
    text = _crafted(bundle, "schema_version = 2", 'only_binary = ":all:"\nschema_version = 2')
    with pytest.raises(DataError) as e:
        parse_pylock(text, "crafted/pylock.toml")
    assert "a source archive in a lock made with --only-binary (src-only)" in e.value.message


@pytest.mark.venv
@pytest.mark.other_python  # restore finds the lock's Python
def test_restore_builds_the_sdist_with_the_locked_build_requirements(
    bundle: Path, index: FakeIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_bootstrap_drift import installed

    (bundle / "envlock_smoke.py").write_text(STUB, encoding="utf-8")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    venv = tmp_path / "venv"
    code, out, err = run_cli(
        "restore", str(bundle), "--venv", str(venv), "--index-url", index.url, "--allow-cpu"
    )
    assert code == 0, out + err
    said = out + err
    assert "building src-only from source (no wheel fits; locked by sha256, built with the " in said
    assert installed(venv) == {"tensorflow": "2.15.1", "dep-a": "1.0", "src-only": "1.0"}
    site = next((venv / "lib").glob("python3.*/site-packages"))
    assert (site / "src_only" / "__init__.py").read_text() == "VERSION = '1.0'\n"


@pytest.mark.network
def test_a_real_source_only_package_is_locked_and_refused_with_only_binary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """promise 2.3 publishes only promise-2.3.tar.gz (sha256 as the index lists it)."""
    out = tmp_path / "env"
    args = ["lock", "tensorflow==2.20", "--python", "3.12", "--with", "promise==2.3"]
    code, stdout, err = run_cli(*args, "--only-binary", "-o", str(out))
    assert code == 2, err
    first = err.splitlines()[0]
    assert first.startswith("envlock: error: no wheel of promise")
    assert "and --only-binary locks binary wheels only" in first
    assert not out.exists()
    code, stdout, err = run_cli(*args, "-o", str(out))
    assert code == 0, err
    lock = read_lock(out)
    promise = next(p for p in lock.packages if p.name == "promise")
    assert promise.wheels == () and promise.sdist is not None
    assert promise.sdist.filename == "promise-2.3.tar.gz"
    assert (
        promise.sdist.sha256 == "dfd18337c523ba4b6a58801c164c1904a9d4d1b1747c7d5dbf45b693a49d93d0"
    )
    assert any(c.startswith("setuptools==") for c in lock.build_constraints)
    assert (
        f"promise==2.3 \\\n    --hash=sha256:{promise.sdist.sha256}\n"
        in (out / "requirements.txt").read_text()
    )


@pytest.mark.parametrize("only_binary", [False, True])
def test_capture_of_a_freeze_locks_the_source_only_line_unless_only_binary(
    make_index: Callable[..., FakeIndex],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    only_binary: bool,
) -> None:
    from envlock.bundle import left_out

    index = make_index()  # the framework does not need src-only here: a freeze line does
    index.add_dist("tensorflow", "2.15.1", tag=FW_TAG, requires=("dep-a>=1",))
    index.add_dist("dep-a", "1.0")
    index.add(built_sdist())
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    freeze = tmp_path / "freeze.txt"
    freeze.write_text("tensorflow==2.15.1\ndep-a==1.0\nsrc-only==1.0\n", encoding="utf-8")
    out = tmp_path / "env"
    argv = ["capture", "-r", str(freeze), "--python", "3.11", "-o", str(out),
            "--cuda-source", "system", "--index-url", index.url]  # fmt: skip
    code, stdout, err = run_cli(*argv, *(["--only-binary"] if only_binary else []))
    if not only_binary:
        assert code == 0, err
        assert "locked 3 of 3" in stdout, stdout
        src = next(p for p in read_lock(out).packages if p.name == "src-only")
        assert src.sdist is not None and src.sdist.filename == "src_only-1.0.tar.gz"
        recorded = left_out.read(out)
        assert recorded is None or recorded.left_out == ()
        return
    assert code == 0, err
    recorded = left_out.read(out)
    assert recorded is not None
    assert [(i.line, i.reason) for i in recorded.left_out] == [("src-only==1.0", "no-distribution")]
    assert "the index has only a source archive of it (--only-binary)" in (
        recorded.left_out[0].detail
    )
    assert "src-only" not in (out / "requirements.txt").read_text()
    code, _, err = run_cli(*argv, "--only-binary", "--strict")
    assert code == 1 and "src-only==1.0: no distribution for this" in err


BROKEN = """\
def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    raise OSError("pkg-config was not able to find libfoo")
"""


@pytest.fixture()
def bad_index(make_index: Callable[..., FakeIndex]) -> FakeIndex:
    """A framework, a stub sdist (wheel-stub backend) and one whose metadata
    build fails here (a missing system library), both only pinned by the freeze."""
    idx = make_index()
    idx.add_dist("tensorflow", "2.15.1", tag=FW_TAG, requires=("dep-a>=1",))
    idx.add_dist("dep-a", "1.0")
    idx.add(built_sdist("stub-only", requires='"wheel-stub"'))
    idx.add(built_sdist("needs-lib", requires="", backend=BROKEN, metadata_version="2.1"))
    return idx


@pytest.mark.parametrize(
    ("pin", "said"),
    [
        (
            "stub-only==1.0",
            "the index's source archives of stub-only==1.0 are stubs (build backend "
            "wheel-stub): building them downloads the wheel from another index",
        ),
        (
            "needs-lib==1.0",
            "needs-lib==1.0 has no wheel for the target, and its source archive does not "
            "build here, so its dependencies cannot be read: OSError: pkg-config was not "
            "able to find libfoo",
        ),
    ],
)
def test_lock_refuses_a_stub_sdist_and_one_that_does_not_build_here(
    bad_index: FakeIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pin: str, said: str
) -> None:
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    out = tmp_path / "env"
    code, _, err = run_cli(
        "lock", "tensorflow==2.15", "--python", "3.11", "--index-url", bad_index.url,
        "--with", pin, "-o", str(out),
    )  # fmt: skip
    assert code == 2, err
    assert err.startswith(f"envlock: error: {said}"), err
    if pin.startswith("stub-only"):  # the hint names the options that route it
        assert "--index NAME=URL --route 'stub-only=NAME'" in err, err
    assert "Traceback" not in err and err.count("envlock: error:") == 1
    assert not out.exists()


def test_capture_leaves_both_out_before_the_lock_with_their_reasons(
    bad_index: FakeIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from envlock.bundle import left_out

    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    freeze = tmp_path / "freeze.txt"
    freeze.write_text(
        "tensorflow==2.15.1\ndep-a==1.0\nstub-only==1.0\nneeds-lib==1.0\n", encoding="utf-8"
    )
    out = tmp_path / "env"
    code, stdout, err = run_cli(
        "capture", "-r", str(freeze), "--python", "3.11", "-o", str(out),
        "--cuda-source", "system", "--index-url", bad_index.url,
    )  # fmt: skip
    assert code == 0, err
    recorded = left_out.read(out)
    assert recorded is not None
    by_line = {i.line: i for i in recorded.left_out}
    assert {line: i.reason for line, i in by_line.items()} == {
        "stub-only==1.0": "other-index",
        "needs-lib==1.0": "no-distribution",
    }
    assert by_line["stub-only==1.0"].detail == (
        "the index has only a stub source archive of it (wheel-stub), whose build downloads "
        "the wheel from NVIDIA's index; add that index and route the name to it: "
        "--index NAME=URL --route 'stub-only=NAME'"
    )
    assert "does not build here (OSError: pkg-config was not able to find libfoo)" in (
        by_line["needs-lib==1.0"].detail
    )
    assert stdout.endswith(
        "locked 2 of 4; 2 left out: 1 needs an index not given, "
        "1 no distribution for this Python/platform\n"
    ), stdout


def test_a_build_that_failed_in_uvs_cache_is_not_asked_again_online(
    bad_index: FakeIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The preflight asks uv's cache first (--offline). With needs-lib's page and
    archive there from an earlier capture, that run makes the build environment and
    the backend fails: that is the answer, uv asks the index nothing more for it.
    With a cache that has neither, the online run answers, as before."""
    from envlock.bundle import left_out

    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    freeze = tmp_path / "freeze.txt"
    freeze.write_text("tensorflow==2.15.1\ndep-a==1.0\nneeds-lib==1.0\n", encoding="utf-8")
    page = "/simple/needs-lib/"
    details = []
    for run in ("first", "again"):
        before = bad_index.client_hits["uv", page]
        out = tmp_path / run
        code, stdout, err = run_cli(
            "capture", "-r", str(freeze), "--python", "3.11", "-o", str(out),
            "--cuda-source", "system", "--index-url", bad_index.url,
        )  # fmt: skip
        assert code == 0, err
        assert stdout.endswith("locked 2 of 3; 1 left out: 1 no distribution for this "
                               "Python/platform\n"), stdout  # fmt: skip
        recorded = left_out.read(out)
        assert recorded is not None
        [item] = recorded.left_out
        assert (item.line, item.reason) == ("needs-lib==1.0", "no-distribution")
        details.append(item.detail)
        # the empty cache: uv asked the index online; then the cache answered alone
        assert (bad_index.client_hits["uv", page] > before) is (run == "first")
    assert details[0] == details[1]
    assert "does not build here (OSError: pkg-config was not able to find libfoo)" in details[1]


def test_the_wheelhouse_of_a_lock_that_builds_from_source_holds_the_sdist(
    bundle: Path, index: FakeIndex, tmp_path: Path
) -> None:
    """Before: restore --wheelhouse refused the lock ('a wheelhouse does not hold their
    build requirements yet'). Its one build requirement, dep-a, is a locked package
    here: its locked wheel serves the build, and no index page is read for it
    (tests/test_wheelhouse_sdist.py: one the lock does not hold, and the offline
    restore)."""
    import json

    from envlock.venv.wheelhouse import check_wheelhouse

    wh = tmp_path / "wh"
    pages = index.hits["/simple/dep-a/"]
    code, out, err = run_cli("wheelhouse", str(bundle), "-o", str(wh), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["sdists"] == ["src_only-1.0.tar.gz"] and doc["build_requirements"] == []
    assert sorted(p.name for p in wh.iterdir()) == [
        "dep_a-1.0-py3-none-any.whl",
        "src_only-1.0.tar.gz",
        f"tensorflow-2.15.1-{FW_TAG}.whl",
    ]
    assert (wh / "src_only-1.0.tar.gz").read_bytes() == index.wheels["src_only-1.0.tar.gz"].data
    assert index.hits["/simple/dep-a/"] == pages
    assert check_wheelhouse(read_lock(bundle), wh) == []
