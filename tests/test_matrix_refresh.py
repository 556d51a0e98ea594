"""envlock matrix refresh against a local index serving real (tiny) zip wheels."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from fixtures.index.fakeindex import FakeIndex, FakeWheel, closed_port, make_wheel
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.version import Version

from envlock.cli import main
from envlock.errors import DataError, EnvironmentFailure, UsageError
from envlock.index.pep691 import IndexFile
from envlock.lockplatform import newest_linux
from envlock.matrix import and_cuda, check, load_tensorflow, tested, wheel_members
from envlock.matrix import refresh as refresh_mod
from envlock.matrix.rangefile import TAIL, RangeFile

BUILD_INFO_2_15 = '''"""Auto-generated module providing information about the build."""
import collections

build_info = collections.OrderedDict([('cpu_compiler', '/usr/lib/llvm-17/bin/clang'), \
('cuda_compute_capabilities', ['sm_50', 'sm_60', 'sm_70', 'sm_75', 'compute_80']), \
('cuda_version', '12.2'), ('cudnn_version', '8'), ('is_cuda_build', True), \
('is_rocm_build', False), ('is_tensorrt_build', True)])
'''

BUILD_INFO_2_21 = """import collections
build_info = collections.OrderedDict([('cpu_compiler', 'clang'), \
('cuda_compute_capabilities', ['sm_60', 'sm_70', 'sm_80', 'sm_89', 'compute_90']), \
('cuda_version', '12.5.1'), ('cudnn_version', '9'), ('is_cuda_build', True)])
"""

BUILD_INFO_2_3 = """from __future__ import absolute_import
build_info = {'cuda_version': '10.1', 'cudnn_version': '7', \
'cuda_compute_capabilities': ['sm_35', 'sm_37', 'sm_52', 'sm_60', 'sm_61', 'compute_70'], \
'cpu_compiler': '/usr/bin/gcc-5', 'is_rocm_build': False, 'is_cuda_build': True}
"""

BUILD_INFO_2_2 = """is_rocm_build = False
is_cuda_build = True
cuda_version_number = '10'
cudnn_version_number = '7'
"""

BUILD_INFO_2_0 = """is_rocm_build = False
is_cuda_build = False
"""

META_2_15 = """Metadata-Version: 2.1
Name: tensorflow
Version: 2.15.1
Requires-Python: >=3.9
Requires-Dist: absl-py (>=1.0.0)
Requires-Dist: numpy (<2.0.0,>=1.23.5)
Requires-Dist: tensorflow-intel (==2.15.1) ; platform_system == "Windows"
Requires-Dist: nvidia-cublas-cu12 (==12.2.5.6) ; extra == 'and-cuda'
Requires-Dist: nvidia-cudnn-cu12 (==8.9.4.25) ; extra == 'and-cuda'
Requires-Dist: nvidia-nccl-cu12 ==2.16.5 ; extra == 'and-cuda'
Provides-Extra: and-cuda

TensorFlow is an open source machine learning framework for everyone.
"""

META_2_21 = """Metadata-Version: 2.4
Name: tensorflow
Version: 2.21.0
Requires-Python: >=3.10
Requires-Dist: absl-py>=1.0.0
Requires-Dist: nvidia-cublas-cu12<13.0,>=12.5.3.2; extra == "and-cuda"
Requires-Dist: nvidia-cudnn-cu12<10.0,>=9.3.0.75; extra == "and-cuda"
Requires-Dist: tensorflow-io-gcs-filesystem>=0.23.1; (sys_platform != "win32" and \
python_version < "3.13") and extra == "gcs-filesystem"
Provides-Extra: and-cuda
"""


META_2_22 = """Metadata-Version: 2.4
Name: tensorflow
Version: 2.22.0rc0
Requires-Python: >=3.10
Requires-Dist: nvidia-cublas-cu12<13.0,>=12.5.3.2; extra == "and-cuda"
Requires-Dist: nvidia-cudnn-cu12<10.0,>=9.10.2.21; extra == "and-cuda"
Provides-Extra: and-cuda
"""

# 2.22.0rc0's layout: build_info.py says only what kind of build it is; the facts
# are in the CUDA and cuDNN headers (as on the real index)
BUILD_INFO_2_22 = """import collections

build_info = collections.OrderedDict([('is_cuda_build', True), ('is_rocm_build', False), \
('is_tensorrt_build', False)])
"""
CUDA_CONFIG_2_22 = """#ifndef CUDA_CUDA_CONFIG_H_
#define CUDA_CUDA_CONFIG_H_

#define TF_CUDA_VERSION "12.5.1"
#define TF_CUDART_VERSION "12"
#define TF_CUDNN_VERSION "9"

#define TF_CUDA_TOOLKIT_PATH ""

#define TF_CUDA_COMPUTE_CAPABILITIES 60, 70, 80, 89, 90

#endif  // CUDA_CUDA_CONFIG_H_
"""
CUDNN_VERSION_2_22 = """#ifndef CUDNN_VERSION_H_
#define CUDNN_VERSION_H_

#define CUDNN_MAJOR 9
#define CUDNN_MINOR 10
#define CUDNN_PATCHLEVEL 0

#define CUDNN_VERSION (CUDNN_MAJOR * 10000 + CUDNN_MINOR * 100 + CUDNN_PATCHLEVEL)
#endif /* CUDNN_VERSION_H */
"""
HEADERS_2_22 = {
    "tensorflow/include/third_party/gpus/cuda/cuda_config.h": CUDA_CONFIG_2_22,
    "tensorflow/include/external/cuda_cudnn/include/cudnn_version.h": CUDNN_VERSION_2_22,
}


def _meta(version: str) -> str:
    return f"Metadata-Version: 2.1\nName: tensorflow\nVersion: {version}\nRequires-Dist: six\n"


LINUX = "manylinux_2_17_x86_64.manylinux2014_x86_64"


def _wheel(version: str, py: str, plat: str = LINUX, **kw: object) -> str:
    abi = f"cp{py}m" if py in ("35", "36", "37") else f"cp{py}"
    return f"tensorflow-{version}-cp{py}-{abi}-{plat}.whl"


def build_index(idx: FakeIndex, filler: int = 0) -> FakeIndex:
    """Fill ``idx`` with the tensorflow wheels and the and-cuda projects."""

    def add(
        filename: str,
        meta: str,
        info: str | None,
        *,
        path: str | None = None,
        upload: str = "2024-01-01T00:00:00Z",
        yanked: bool | str = False,
        zip64: bool = False,
        members: dict[str, str] | None = None,
    ) -> None:
        kwargs: dict[str, object] = {"members": members}
        if path:
            kwargs["build_info_path"] = path
        data = make_wheel(
            filename,
            metadata=meta,
            build_info=info,
            filler_members=filler,
            force_zip64=zip64,
            **kwargs,
        )  # type: ignore[arg-type]
        idx.add(FakeWheel(filename, data, upload_time=upload, yanked=yanked))

    for py in ("39", "310", "311"):
        add(_wheel("2.15.1", py), META_2_15, BUILD_INFO_2_15, upload="2024-03-08T18:00:00Z")
    add(_wheel("2.15.1", "311", "macosx_10_15_x86_64"), META_2_15, BUILD_INFO_2_15)
    add(_wheel("2.15.1", "311", "manylinux_2_17_aarch64.manylinux2014_aarch64"), META_2_15, None)
    for py in ("310", "313"):
        add(
            _wheel("2.21.0", py, "manylinux_2_27_x86_64"),
            META_2_21,
            BUILD_INFO_2_21,
            upload="2026-03-06T10:00:00Z",
            zip64=(py == "313"),
        )
    add(
        _wheel("2.22.0rc0", "313", "manylinux_2_27_x86_64"),
        META_2_22,
        BUILD_INFO_2_22,
        upload="2026-05-01T00:00:00Z",
        members=HEADERS_2_22,
    )
    for py in ("36", "37", "38"):
        add(_wheel("2.3.0", py, "manylinux2010_x86_64"), _meta("2.3.0"), BUILD_INFO_2_3)
        add(
            _wheel("2.2.0", py, "manylinux2010_x86_64"),
            _meta("2.2.0"),
            BUILD_INFO_2_2,
            yanked="broken upload",
        )
    for py in ("35", "36", "37"):
        add(
            _wheel("2.0.0", py, "manylinux2010_x86_64"),
            _meta("2.0.0"),
            BUILD_INFO_2_0,
            path="tensorflow_core/python/platform/build_info.py",
        )
    add(
        "tensorflow-2.0.0-cp27-cp27mu-manylinux2010_x86_64.whl",
        _meta("2.0.0"),
        BUILD_INFO_2_0,
        path="tensorflow_core/python/platform/build_info.py",
    )
    add("tensorflow-1.15.0-cp37-cp37m-manylinux2010_x86_64.whl", _meta("1.15.0"), None)
    add_and_cuda_projects(idx)
    return idx


def add_and_cuda_projects(idx: FakeIndex) -> None:
    """The and-cuda requirements' projects, shaped so that 2.15.1's
    nvidia-cudnn-cu12==8.9.4.25 has no cp311 wheel, and 2.21.0's range
    ``<10.0,>=9.3.0.75`` is served by two versions together."""
    many = "manylinux_2_27_x86_64"
    # py3-none wheels serve every minor
    for version in ("12.2.5.6", "12.9.0", "13.0.0"):
        idx.add_dist("nvidia-cublas-cu12", version, tag=f"py3-none-{many}")
    idx.add_dist("nvidia-nccl-cu12", "2.16.5", tag="py3-none-manylinux2014_x86_64")
    # 8.9.4.25: cp39 and cp310 for Linux; cp311 only for macOS
    for tag in (
        "cp39-none-manylinux1_x86_64",
        "cp310-none-manylinux1_x86_64",
        "cp311-none-macosx_11_0_arm64",
    ):
        idx.add_dist("nvidia-cudnn-cu12", "8.9.4.25", tag=tag)
    # the range: 9.3.0.75 serves 3.10 only, 9.5.0's abi3 wheel 3.12 and newer;
    # 10.0.0 (every minor) is outside it
    idx.add_dist("nvidia-cudnn-cu12", "9.3.0.75", tag=f"cp310-cp310-{many}")
    idx.add_dist("nvidia-cudnn-cu12", "9.5.0", tag=f"cp312-abi3-{many}")
    idx.add_dist("nvidia-cudnn-cu12", "10.0.0", tag="py3-none-any")


@pytest.fixture
def fake_index(monkeypatch: pytest.MonkeyPatch, make_index: Callable[..., FakeIndex]) -> FakeIndex:
    monkeypatch.setenv("ENVLOCK_HTTP_BACKOFF", "0.01")
    monkeypatch.setenv("ENVLOCK_HTTP_RETRIES", "3")
    return build_index(make_index())


# requests per small fixture wheel: RangeFile's first read, the tail, holds all of it
SMALL_WHEEL_REQUESTS = 1


def _refresh(idx: FakeIndex, **kw: object) -> refresh_mod.RefreshResult:
    return refresh_mod.refresh(
        idx.url,
        tested=tested.load(),
        notes=check.load_notes(),
        jobs=4,
        **kw,  # type: ignore[arg-type]
    )


def test_rows_read_from_the_wheels(fake_index: FakeIndex) -> None:
    result = _refresh(fake_index)
    m = result.matrix
    assert [str(r.version) for r in m.releases] == [
        "2.0.0",
        "2.2.0",
        "2.3.0",
        "2.15.1",
        "2.21.0",
        "2.22.0rc0",
    ]
    # newest upload among the rows' Linux x86_64 wheels (the release candidate's)
    assert m.data_version == "2026-05-01"

    # the release candidate, in the 2.22 layout: its facts from the headers
    r = m.get("2.22.0rc0")
    assert r is not None and r.prerelease
    assert (r.cuda, r.cuda_full, r.cuda_from) == ("12.5", "12.5.1", "cuda_config.h")
    assert (r.cudnn, r.cudnn_from) == ("9.10", "cudnn_version.h")
    assert r.compute_capabilities == ("sm_60", "sm_70", "sm_80", "sm_89", "compute_90")
    assert r.compute_capabilities_from == "cuda_config.h+inferred-ptx"
    assert r.cuda_build
    assert all(not x.prerelease for x in m.releases if x is not r)

    r = m.get("2.15.1")
    assert r is not None
    assert r.python == ("3.9", "3.10", "3.11")
    assert r.requires_python == ">=3.9"
    assert (r.cuda, r.cuda_full, r.cuda_from) == ("12.2", "12.2", "build_info")
    assert (r.cudnn, r.cudnn_from) == ("8.9", "build_info+and-cuda")
    assert r.compute_capabilities == ("sm_50", "sm_60", "sm_70", "sm_75", "compute_80")
    assert r.and_cuda == (
        "nvidia-cublas-cu12==12.2.5.6",
        "nvidia-cudnn-cu12==8.9.4.25",
        "nvidia-nccl-cu12==2.16.5",
    )
    assert r.wheel == _wheel("2.15.1", "311")
    assert r.sha256 == fake_index.wheels[r.wheel].sha256
    assert r.cuda_build and not r.yanked and r.note == ""
    # the and-cuda extra's Pythons, from the requirements' own project pages
    assert r.and_cuda_python == ("3.9", "3.10")
    assert r.and_cuda_python_note == "nvidia-cudnn-cu12==8.9.4.25: no cp311 wheel"

    r = m.get("2.21.0")
    assert r is not None
    assert (r.cuda, r.cuda_full, r.cudnn) == ("12.5", "12.5.1", "9.3")
    assert r.and_cuda == ("nvidia-cublas-cu12<13.0,>=12.5.3.2", "nvidia-cudnn-cu12<10.0,>=9.3.0.75")
    assert r.python == ("3.10", "3.13")
    assert r.wheel == _wheel("2.21.0", "313", "manylinux_2_27_x86_64")
    # a range: 9.3.0.75 gives 3.10, 9.5.0 (abi3 from 3.12) gives 3.13
    assert (r.and_cuda_python, r.and_cuda_python_note) == (("3.10", "3.13"), "")

    r = m.get("2.3.0")
    assert r is not None
    assert (r.cuda, r.cuda_from, r.cudnn, r.cudnn_from) == (
        "10.1",
        "build_info",
        "7.6",
        "build_info+tested-configs",
    )
    assert r.and_cuda == () and r.requires_python == ""
    assert (r.and_cuda_python, r.and_cuda_python_note) == ((), "")

    r = m.get("2.2.0")
    assert r is not None
    assert (r.cuda, r.cuda_full, r.cuda_from) == ("10.1", "10", "build_info+tested-configs")
    assert r.compute_capabilities == ()
    assert r.yanked is True

    r = m.get("2.0.0")
    assert r is not None
    assert r.cuda_build is False
    assert (r.cuda, r.cuda_from, r.cudnn, r.cudnn_from) == (
        "10.0",
        "tested-configs",
        "7.4",
        "tested-configs",
    )
    assert r.python == ("3.5", "3.6", "3.7")  # the cp27 wheel is not a Python 3 target
    # notes come from matrices/tf-notes.toml, one segment per disagreement
    assert r.note.startswith("cuda_build: the tensorflow 2.0 wheels are CPU builds")
    assert "; python: the table gives the range tested for source builds" in r.note
    # the fixture's wheels leave out Pythons the table lists: the check catches it
    report = check.cross_check(m, tested.load(), check.load_notes())
    assert not report.ok
    assert [f.disagreement.describe() for f in report.findings if not f.explained] == [
        "2.2.0: python: wheels say 3.6-3.8, tested-configs say 3.5-3.8",
        "2.3.0: python: wheels say 3.6-3.8, tested-configs say 3.5-3.8",
        "2.21.0: python: wheels say 3.10, 3.13, tested-configs say 3.10-3.13",
    ]


def test_only_range_requests_and_few_of_them(fake_index: FakeIndex) -> None:
    result = _refresh(fake_index, only=[Version("2.15.1")])
    assert result.releases == 1
    wheel = _wheel("2.15.1", "311")
    # the tail holds the whole small wheel; never a full GET
    assert fake_index.hits[f"/files/{wheel}"] == SMALL_WHEEL_REQUESTS
    assert all(r.startswith("bytes=") for r in fake_index.ranges)
    assert len(fake_index.ranges) == SMALL_WHEEL_REQUESTS
    # the page, the wheel, the and-cuda pages
    assert result.requests == 1 + SMALL_WHEEL_REQUESTS + 3
    assert result.bytes_read < len(fake_index.wheels[wheel].data) + 4096


def test_big_central_directory_and_zip64() -> None:
    """A directory larger than the first tail read costs one more range request."""
    data = make_wheel(
        "tensorflow-2.15.1-cp311-cp311-linux_x86_64.whl",
        metadata=META_2_15,
        build_info=BUILD_INFO_2_15,
        filler_members=1200,
        force_zip64=True,
    )
    calls: list[tuple[int, int | None]] = []

    def fetch(start: int, end: int | None) -> tuple[bytes, int]:
        calls.append((start, end))
        if end is None:
            return data[start:], len(data)
        return data[start : end + 1], len(data)

    assert len(data) - data.find(b"PK\x01\x02") > TAIL  # the directory starts before the tail
    got = wheel_members.read_members(fetch, "x.whl")
    with zipfile.ZipFile(io.BytesIO(data)) as real:
        assert got.build_info_path == "tensorflow/python/platform/build_info.py"
        assert got.build_info == real.read(got.build_info_path)
        assert got.metadata == real.read("tensorflow-2.15.1.dist-info/METADATA")
    assert calls[0] == (-TAIL, None)
    # tail, directory, build_info; METADATA follows build_info, in RangeFile's read-ahead
    assert len(calls) == 3
    assert (got.requests, got.bytes_read) == (len(calls), sum(_sizes(calls, len(data))))


def _sizes(calls: list[tuple[int, int | None]], total: int) -> list[int]:
    return [-start if end is None else min(end + 1, total) - start for start, end in calls]


def test_same_index_same_bytes(fake_index: FakeIndex, tmp_path: Path) -> None:
    out1, out2 = tmp_path / "a.toml", tmp_path / "b.toml"
    for out, jobs in ((out1, "1"), (out2, "8")):
        code = main(
            [
                "matrix",
                "refresh",
                "--index-url",
                fake_index.url,
                "-o",
                str(out),
                "--jobs",
                jobs,
                "--json",
            ]
        )
        assert code == 0
    assert out1.read_bytes() == out2.read_bytes()
    # and what was written loads and passes the cross-check
    assert len(load_tensorflow(out1).releases) == 6
    # the fixture rows have unexplained Python gaps (see above): check fails, exit 1
    assert main(["matrix", "check", "--matrix", str(out1)]) == 1


def test_503_then_success_is_retried(fake_index: FakeIndex) -> None:
    wheel = _wheel("2.15.1", "311")
    fake_index.faults["/simple/tensorflow/"] = [503, 503]
    fake_index.faults[f"/files/{wheel}"] = [503, 502]
    result = _refresh(fake_index, only=[Version("2.15.1")])
    assert result.matrix.releases[0].cudnn == "8.9"
    assert fake_index.hits["/simple/tensorflow/"] == 3
    assert fake_index.hits[f"/files/{wheel}"] == 2 + SMALL_WHEEL_REQUESTS  # 503, 502, then served


def test_persistent_5xx_is_exit_3(
    fake_index: FakeIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_index.faults["/simple/tensorflow/"] = [503] * 10
    out = tmp_path / "tf.toml"
    out.write_text("earlier output\n")
    code = main(["matrix", "refresh", "--index-url", fake_index.url, "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 3
    assert f"cannot reach the package index at {fake_index.url}: HTTP 503" in err
    assert "hint:" in err and "Traceback" not in err
    assert out.read_text() == "earlier output\n"  # a failed run leaves it as it was
    assert fake_index.hits["/simple/tensorflow/"] == 4  # first try + 3 retries


def test_connection_refused_is_exit_3(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ENVLOCK_HTTP_BACKOFF", "0.01")
    url = f"http://127.0.0.1:{closed_port()}/simple"
    out = tmp_path / "tf.toml"
    code = main(["matrix", "refresh", "--index-url", url, "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 3
    assert err.startswith(
        f"envlock: error: cannot reach the package index at {url}: connection refused\n"
    )
    assert "  hint: " in err
    assert not out.exists()


def test_server_ignoring_range_is_refused_not_downloaded(fake_index: FakeIndex) -> None:
    # a wheel big enough that its whole body cannot sit in the sockets' buffers:
    # refused on the 200's headers, the connection closed, the rest never sent
    wheel = _wheel("2.15.1", "311")
    size = 64 << 20
    fake_index.add(FakeWheel(wheel, bytes(size)))
    fake_index.ignore_range = True
    with pytest.raises(EnvironmentFailure, match="ignores HTTP range requests"):
        _refresh(fake_index, only=[Version("2.15.1")])
    assert fake_index.hits[f"/files/{wheel}"] == 1  # not asked again, whole
    assert fake_index.sent[f"/files/{wheel}"] < size // 4  # about 4 MiB here


def test_index_without_json_api(
    fake_index: FakeIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_index.json_api = False
    code = main(["matrix", "refresh", "--index-url", fake_index.url, "-o", str(tmp_path / "x")])
    assert code == 2
    err = capsys.readouterr().err
    assert "does not answer the JSON simple API (PEP 691); it sent text/html" in err
    assert not (tmp_path / "x").exists()


def test_unknown_release_and_bad_jobs(
    fake_index: FakeIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(UsageError, match=r"no Linux x86_64 wheel .* tensorflow 2\.9\.9"):
        _refresh(fake_index, only=[Version("2.9.9")])
    assert main(["matrix", "refresh", "--jobs", "0"]) == 2
    assert "--jobs 0 is out of range" in capsys.readouterr().err


def test_json_summary(
    fake_index: FakeIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "tf.toml"
    assert main(["matrix", "refresh", "--index-url", fake_index.url, "-o", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["releases"] == 6
    assert summary["data_version"] == "2026-05-01"  # the release candidate
    assert summary["output"] == str(out)
    # 1 page + per release the tail (a small wheel is all in it) + the and-cuda
    # projects' pages, once each although two releases name them
    assert summary["requests"] == 1 + 6 * SMALL_WHEEL_REQUESTS + 3
    for project in ("nvidia-cublas-cu12", "nvidia-cudnn-cu12", "nvidia-nccl-cu12"):
        assert fake_index.hits[f"/simple/{project}/"] == 1


def _fetch_from(data: bytes) -> Callable[[int, int | None], tuple[bytes, int]]:
    def fetch(start: int, end: int | None) -> tuple[bytes, int]:
        if end is None:
            return data[start:], len(data)
        return data[start : end + 1], len(data)

    return fetch


pieces = st.sampled_from(
    [
        "a",
        "/",
        "build_info.py",
        "python/platform/",
        "METADATA",
        ".bak",
        "PK\x01\x02",
        "é",
        "x.dist-info/",
    ]
)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.lists(pieces, min_size=1, max_size=6).map("".join), min_size=1, max_size=20, unique=True
    ),
)
def test_the_members_picked(names: list[str]) -> None:
    """Top-level *.dist-info/METADATA (first by name) and the shortest build_info.py."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name in names:
            zf.writestr(name, f"member {name}")
    metadata = sorted(n for n in names if n.endswith(".dist-info/METADATA") and "/" not in n[:-9])
    info = sorted(
        (n for n in names if n.endswith("/python/platform/build_info.py")),
        key=lambda n: (n.count("/"), n),
    )
    fetch = _fetch_from(buf.getvalue())
    if not metadata:
        with pytest.raises(DataError, match=r"^t\.whl: no \.dist-info/METADATA in the wheel$"):
            wheel_members.read_members(fetch, "t.whl")
        return
    got = wheel_members.read_members(fetch, "t.whl")
    assert got.metadata == f"member {metadata[0]}".encode()
    assert got.build_info_path == (info[0] if info else "")
    assert got.build_info == (f"member {info[0]}".encode() if info else None)


def _damage(kind: str) -> bytes:
    """A wheel (with a directory larger than the tail read) damaged one way."""
    data = make_wheel(
        "tensorflow-2.15.1-cp311-cp311-linux_x86_64.whl",
        metadata=META_2_15 * 20,
        build_info=BUILD_INFO_2_15,
        filler_members=1200,
    )
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        meta = zf.getinfo("tensorflow-2.15.1.dist-info/METADATA")
    directory = data.find(b"PK\x01\x02")
    raw = bytearray(data)
    if kind == "not a zip":
        return bytes(range(256)) * 1000
    if kind == "directory signature":
        raw[directory : directory + 4] = b"XXXX"
    elif kind == "directory offset":
        eocd = data.rfind(b"PK\x05\x06")
        raw[eocd + 16 : eocd + 20] = (directory + 7).to_bytes(4, "little")
    elif kind == "member data":
        start = meta.header_offset + 30 + len(meta.filename) + len(meta.extra)
        middle = start + meta.compress_size // 2
        raw[middle : middle + 8] = bytes(8)
    elif kind == "compression method":
        raw[meta.header_offset + 8 : meta.header_offset + 10] = (99).to_bytes(2, "little")
        entry = data.find(b"PK\x01\x02", directory)
        while data[entry + 46 : entry + 46 + len(meta.filename)] != meta.filename.encode():
            entry = data.find(b"PK\x01\x02", entry + 1)
        raw[entry + 10 : entry + 12] = (99).to_bytes(2, "little")
    else:
        raise AssertionError(kind)
    return bytes(raw)


@pytest.mark.parametrize(
    "kind",
    ["not a zip", "directory signature", "directory offset", "member data", "compression method"],
)
def test_a_damaged_wheel_is_an_environment_failure_naming_it(kind: str) -> None:
    with pytest.raises(EnvironmentFailure) as err:
        wheel_members.read_members(_fetch_from(_damage(kind)), "x.whl")
    assert err.value.exit_code == 3
    assert err.value.message.startswith("x.whl: not a readable wheel: ")
    assert err.value.hint == (
        "the file server sent damaged or other bytes than the file's; "
        "try again, and report it to the index if it persists"
    )


def test_a_truncated_body_is_an_environment_failure() -> None:
    data = make_wheel(
        "tensorflow-2.15.1-cp311-cp311-linux_x86_64.whl",
        metadata=META_2_15,
        build_info=BUILD_INFO_2_15,
        filler_members=1200,
    )
    whole = _fetch_from(data)

    def short(start: int, end: int | None) -> tuple[bytes, int]:
        body, total = whole(start, end)
        return (body if end is None else body[:-10]), total  # the tail whole, the rest cut

    problem = r"the server sent \d+ bytes for bytes \d+-\d+ \(\d+ bytes\)"
    with pytest.raises(EnvironmentFailure, match=rf"^x\.whl: not a readable wheel: {problem}$"):
        wheel_members.read_members(short, "x.whl")


def test_a_damaged_wheel_on_the_index_is_exit_3_without_a_traceback(
    fake_index: FakeIndex,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    wheel = _wheel("2.15.1", "311")
    fake_index.add(FakeWheel(wheel, _damage("member data")))
    out = tmp_path / "tf.toml"
    code = main(["matrix", "refresh", "--index-url", fake_index.url, "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 3
    assert err.startswith(f"envlock: error: {wheel}: not a readable wheel: ")
    assert "Traceback" not in err and not out.exists()


@settings(max_examples=100, deadline=None)
@given(
    st.binary(min_size=0, max_size=3000),
    st.integers(1, 400),
    st.integers(1, 300),
    st.lists(st.tuples(st.integers(-10, 3100), st.integers(-1, 900)), max_size=12),
)
def test_rangefile_reads_what_a_file_would_with_one_request_per_read(
    blob: bytes, tail: int, ahead: int, reads: list[tuple[int, int]]
) -> None:
    fetched: list[int] = []
    whole = _fetch_from(blob)

    def fetch(start: int, end: int | None) -> tuple[bytes, int]:
        body, total = whole(start, end)
        fetched.append(len(body))
        return body, total

    f = RangeFile(fetch, "blob", tail=tail, read_ahead=ahead)
    real = io.BytesIO(blob)
    assert f.seek(0, io.SEEK_END) == len(blob) and f.tell() == len(blob)
    for pos, size in reads:
        before = f.requests
        if pos < 0:
            with pytest.raises(OSError):
                f.seek(pos)
            continue
        f.seek(pos)
        real.seek(pos)
        assert f.read(size) == real.read(size)
        assert f.tell() == real.tell()
        assert f.requests - before <= 1
    assert (f.requests, f.bytes_read) == (len(fetched), sum(fetched))
    buf = bytearray(5)
    f.seek(0)
    assert f.readinto(buf) == min(5, len(blob)) and bytes(buf[: len(blob)]) == blob[:5]


def _files(*names: str, yanked: tuple[str, ...] = ()) -> list[IndexFile]:
    return [IndexFile(n, f"http://index.invalid/{n}", "", None, "", n in yanked) for n in names]


@pytest.mark.parametrize(
    ("filename", "served"),
    [
        ("tensorrt-8.5.3.1-cp310-none-manylinux_2_17_x86_64.whl", ["3.10"]),
        ("x-1-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", ["3.11"]),
        ("x-1-cp37-cp37m-manylinux2010_x86_64.whl", []),  # not a minor asked for
        ("x-1-cp310-abi3-manylinux_2_28_x86_64.whl", ["3.10", "3.11", "3.12", "3.13"]),
        ("x-1-py3-none-manylinux1_x86_64.whl", ["3.9", "3.10", "3.11", "3.12", "3.13"]),
        ("x-1-py2.py3-none-any.whl", ["3.9", "3.10", "3.11", "3.12", "3.13"]),
        ("x-1-py311-none-any.whl", ["3.11", "3.12", "3.13"]),
        ("x-1-cp313-cp313t-manylinux_2_17_x86_64.whl", []),  # free-threaded
        ("x-1-cp311-cp311-manylinux_2_17_aarch64.whl", []),
        ("x-1-cp311-cp311-musllinux_1_2_x86_64.whl", []),
        ("x-1-cp311-cp311-win_amd64.whl", []),
        ("x-1-pp310-pypy310_pp73-manylinux_2_17_x86_64.whl", []),
        ("x-1.tar.gz", []),
        ("not-a-wheel.whl", []),
    ],
)
def test_wheel_python(filename: str, served: list[str]) -> None:
    minors = ("3.9", "3.10", "3.11", "3.12", "3.13")
    assert sorted(and_cuda.wheel_python(filename, minors), key=Version) == served


def test_and_cuda_python_rules() -> None:
    python = ("3.9", "3.10", "3.11")
    pages: dict[str, list[IndexFile] | None] = {
        "tensorrt": _files(
            *(f"tensorrt-8.5.3.1-cp3{n}-none-manylinux_2_17_x86_64.whl" for n in (8, 9, 10)),
            "tensorrt-8.6.1.post1.tar.gz",
        ),
        "only-old": _files("only_old-1.0-cp311-cp311-manylinux_2_17_x86_64.whl"),
        "yanked": _files(
            "yanked-2.0-py3-none-any.whl",
            "yanked-1.0-cp39-cp39-manylinux1_x86_64.whl",
            yanked=("yanked-2.0-py3-none-any.whl",),
        ),
        "pre": _files("pre-3.0rc1-py3-none-any.whl", "pre-2.0-cp310-abi3-manylinux1_x86_64.whl"),
        "gone": None,
    }
    # the 2.14 case: tensorrt==8.5.3.1 has no cp311 wheel
    assert and_cuda.and_cuda_python(["tensorrt==8.5.3.1"], python, pages) == (
        ("3.9", "3.10"),
        "tensorrt==8.5.3.1: no cp311 wheel",
    )
    # a marker that leaves 3.11 out takes the requirement away for 3.11
    assert and_cuda.and_cuda_python(
        ['tensorrt==8.5.3.1; python_version < "3.11"', 'tensorrt; platform_system == "Windows"'],
        python,
        pages,
    ) == (python, "")
    # sdist only, nothing allowed, a missing project: every minor goes
    assert and_cuda.and_cuda_python(["tensorrt==8.6.1.post1"], python, pages) == (
        (),
        "tensorrt==8.6.1.post1: only an sdist, no Linux x86_64 wheel",
    )
    assert and_cuda.and_cuda_python(["only-old>=2"], python, pages) == (
        (),
        "only-old>=2: no Linux x86_64 wheel of an allowed version",
    )
    assert and_cuda.and_cuda_python(["gone==1", "tensorrt==8.5.3.1"], python, pages) == (
        (),
        "gone==1: not on the index; tensorrt==8.5.3.1: no cp311 wheel",
    )
    # yanked files count only for an exact pin (PEP 592)
    assert and_cuda.and_cuda_python(["yanked>=1"], python, pages) == (
        ("3.9",),
        "yanked>=1: no cp310 or cp311 wheel",
    )
    assert and_cuda.and_cuda_python(["yanked==2.0"], python, pages) == (python, "")
    # pre-releases only when the specifier names one
    assert and_cuda.and_cuda_python(["pre>=2"], python, pages) == (
        ("3.10", "3.11"),
        "pre>=2: no cp39 wheel",
    )
    assert and_cuda.and_cuda_python(["pre>=3.0rc1"], python, pages) == (python, "")


def test_candidates_keep_final_post_and_pre_releases_only() -> None:
    """What the matrix can hold (envlock.matrix.tensorflow.parse): no dev- or local
    releases, no epochs, no 1.x; release candidates are rows (flagged prerelease)."""
    tag = "cp311-cp311-manylinux_2_17_x86_64.whl"
    files = _files(
        *(
            f"tensorflow-{v}-{tag}"
            for v in (
                "2.15.0",
                "2.15.0.post1",
                "2.16.0rc0",
                "2.16.0.dev20240101",
                "2.15.1+cpu",
                "1!2.17.0",
                "1.15.5",
            )
        )
    )
    found = refresh_mod.candidates(files)
    assert [str(c.version) for c in found] == ["2.15.0", "2.15.0.post1", "2.16.0rc0"]


# -- one tag logic, one marker environment, one PEP 691 wrapper, one TOML writer ------


def test_candidates_read_python_minors_through_the_lock_targets_tags() -> None:
    """Python 3.5-3.7 wheels carry the pymalloc ABI (cp37m); Python 2, other
    platforms and musl are left out; the newest glibc envlock places is accepted."""
    files = _files(
        "tensorflow-2.0.0-cp27-cp27mu-manylinux2010_x86_64.whl",
        "tensorflow-2.0.0-cp35-cp35m-manylinux2010_x86_64.whl",
        "tensorflow-2.0.0-cp37-cp37m-manylinux2010_x86_64.whl",
        "tensorflow-2.0.0-cp37-cp37m-win_amd64.whl",
        "tensorflow-2.20.0-cp313-cp313-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
        "tensorflow-2.20.0-cp312-cp312-musllinux_1_2_x86_64.whl",
        "tensorflow-2.20.0-cp314-cp314-manylinux_2_99_x86_64.whl",  # newer than any base image
    )
    found = {str(c.version): c.python for c in refresh_mod.candidates(files)}
    assert found == {"2.0.0": ("3.5", "3.7"), "2.20.0": ("3.13",)}
    assert and_cuda.wheel_python("x-1-cp37-cp37m-manylinux2010_x86_64.whl", ["3.7"]) == {"3.7"}


def test_and_cuda_markers_use_the_lock_targets_environment() -> None:
    requires = [
        'nvidia-a==1; extra == "and-cuda" and python_version < "3.12"',
        'nvidia-b==2; extra == "and-cuda" and platform_machine == "aarch64"',
        'nvidia-c==3; extra == "and-cuda" and implementation_version >= "3.12"',
        "numpy>=1.26",
    ]
    assert refresh_mod.and_cuda_requirements(requires, "3.11") == (
        'nvidia-a==1; python_version < "3.12"',
    )
    assert refresh_mod.and_cuda_requirements(requires, "3.12") == (
        'nvidia-c==3; implementation_version >= "3.12"',
    )
    env = newest_linux("3.12").marker_environment()
    assert (env["python_version"], env["platform_machine"], env["sys_platform"]) == (
        "3.12",
        "x86_64",
        "linux",
    )


def test_one_pep691_wrapper_words_a_non_json_index_for_every_command(
    fake_index: FakeIndex,
) -> None:
    from envlock.index import http, pep691
    from envlock.lock.pip_files import fetch_files

    sess = http.session()
    try:
        files = pep691.project_files(sess, fake_index.url, "tensorflow")
        served = {n: w.sha256 for n, w in fake_index.wheels.items() if w.project == "tensorflow"}
        assert files and {f.filename: f.sha256 for f in files} == served
        assert pep691.project_files(sess, fake_index.url, "no-such-project") is None
        fake_index.json_api = False
        with pytest.raises(UsageError) as err:
            pep691.project_files(sess, fake_index.url, "tensorflow")
    finally:
        sess.close()
    assert err.value.exit_code == 2
    assert err.value.message == (
        f"the package index at {fake_index.url} does not answer the JSON simple API (PEP 691); "
        "it sent text/html for tensorflow"
    )
    assert err.value.hint == f"use an index that serves {pep691.ACCEPT}"
    with pytest.raises(UsageError) as err:
        fetch_files(fake_index.url, ["tensorflow"])
    assert err.value.message.endswith("it sent text/html for tensorflow")
    assert (err.value.hint or "").startswith("use the uv resolver")


def test_matrix_writer_escapes_control_characters() -> None:
    import copy

    from envlock.matrix.tensorflow import dumps

    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib

    control = "".join(chr(c) for c in [*range(0x20), 0x7F])
    tf = copy.copy(load_tensorflow())
    odd = copy.copy(tf.releases[0])
    object.__setattr__(odd, "note", f"note {control}")  # frozen: no validation on this path
    object.__setattr__(tf, "releases", (odd, *tf.releases[1:]))
    text = dumps(tf)
    assert "\x7f" not in text
    assert tomllib.loads(text)["releases"][0]["note"] == f"note {control}"


def test_a_refresh_its_own_check_would_reject_is_never_written(
    make_index: Callable[..., FakeIndex],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 38, break 5: a hostile build_info.py value (a cuda_version of five
    parts) was written into the matrix, which every later command then refused.
    The output is read back by the matrix reader first; the old file stays."""
    hostile = BUILD_INFO_2_15.replace("('cuda_version', '12.2')", "('cuda_version', '12.2.3.4.5')")
    monkeypatch.setitem(globals(), "BUILD_INFO_2_15", hostile)  # build_index reads it
    idx = build_index(make_index())
    out = tmp_path / "tf.toml"
    out.write_text("# the matrix in use\n")
    assert main(["matrix", "refresh", "--index-url", idx.url, "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"envlock: error: the refreshed matrix does not pass envlock's own check, so {out} was "
        f"not written: {out}: releases["
    ), err
    assert '.cuda_full: expected "X[.Y[.Z]]", got "12.2.3.4.5"' in err
    assert out.read_text() == "# the matrix in use\n"
