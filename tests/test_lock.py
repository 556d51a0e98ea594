"""envlock.lock without the real index: a local PEP 691 index on 127.0.0.1.

uv and pip are the real resolvers; the index is a small HTTP server serving
tiny wheels made here (one framework "fakefw" with an and-cuda extra, a
dependency in three versions, wheels for other platforms that must be left
out). Faults are injected through the server.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from fixtures.index.fakeindex import FakeIndex
from hypothesis import given
from hypothesis import strategies as st
from packaging.pylock import Pylock

from envlock.bundle.folder import without_credentials
from envlock.cli import main
from envlock.errors import DataError, EnvironmentFailure, NoResolution, UsageError
from envlock.lock import (
    Target,
    check_requirements,
    lock,
    parse_pylock,
    pylock_text,
    read_lock,
    requirements_text,
)
from envlock.lock.conflicts import explain, merge_one_of
from envlock.lock.pylock import pylock_document
from envlock.lock.uv import uv_env
from envlock.model import Constraints, Lock, LockedPackage, LockedWheel, LockInput, Resolution

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

GOLDEN = Path(__file__).parent / "golden" / "lock"
FW_TAG = "cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64"


def resolution(cuda_source: str = "system", framework: str = "fakefw") -> Resolution:
    return Resolution.from_dict(
        {
            "framework": framework,
            "version": "2.15.1",
            "python": "3.11",
            "python_supported": ["3.9", "3.10", "3.11"],
            "cuda": "12.2",
            "cudnn": "8.9",
            "driver_min": "525.60.13",
            "compute_capabilities": ["sm_60", "sm_70", "sm_80", "compute_80"],
            "cuda_source": cuda_source,
            "os": "ubuntu22.04",
            "base_image": "nvidia/cuda:12.2.2-cudnn8-runtime-ubuntu22.04",
            "base_image_digest": None,
            "cuda_image_version": "12.2.2",
            "image_cudnn": "8.9.6.50",
            "and_cuda": ["nvidia-fake-cu12==12.2.1"],
            "requires_python": ">=3.9",
            "matrix_version": "2026-11-30",
            "matrix_digest": "0" * 64,
            "reasons": ["newest 2.15 release"],
        }
    )


@pytest.fixture(scope="module")
def index(make_module_index: Callable[..., FakeIndex]) -> FakeIndex:
    idx = make_module_index()
    idx.add_dist(
        "fakefw",
        "2.15.1",
        tag=FW_TAG,
        requires=("dep-a>=1,<2", "dep-b"),
        extras={"and-cuda": ("nvidia-fake-cu12==12.2.1",)},
    )
    idx.add_dist("fakefw", "2.15.1", tag="cp311-cp311-macosx_12_0_arm64", requires=("dep-a>=1,<2",))
    idx.add_dist("fakefw", "2.15.1", tag="cp312-cp312-manylinux_2_17_x86_64", requires=("dep-a",))
    for v in ("1.0", "1.5", "2.0"):
        idx.add_dist("dep-a", v)
    # dep-b: a newer version whose only wheel needs a glibc newer than the target's
    idx.add_dist("dep-b", "1.0", tag="cp311-cp311-manylinux_2_28_x86_64")
    idx.add_dist("dep-b", "1.0", tag="py3-none-any")
    idx.add_dist("dep-b", "1.0", tag="cp311-cp311-musllinux_1_2_x86_64")
    idx.add_dist("dep-b", "2.0", tag="cp311-cp311-manylinux_2_39_x86_64")
    idx.add_dist("nvidia-fake-cu12", "12.2.1", tag="py3-none-manylinux1_x86_64")
    idx.add_dist("nvidia-fake-cu12", "12.2.1", tag="py3-none-win_amd64")
    return idx


@pytest.fixture()
def cache(tmp_path: Path) -> str:
    return str(tmp_path / "uv-cache")


def _lock(
    idx: FakeIndex,
    cache: str | None = None,
    *,
    source: str = "system",
    with_: tuple[str, ...] = (),
    resolver: str = "uv",
    offline: bool = False,
) -> Lock:
    return lock(
        resolution(source),
        LockInput(Constraints(spec="fakefw==2.15", cuda_source=source), with_requirements=with_),
        resolver=resolver,
        index_url=idx.url,
        offline=offline,
        cache_dir=cache,
    )


# ------------------------------------------------------------------ target


def test_target_keeps_only_wheels_for_linux_x86_64_and_the_python_minor() -> None:
    t = Target.for_lock("3.11", "ubuntu22.04")
    assert t.glibc == (2, 35)
    assert t.uv_platform == "x86_64-manylinux_2_35"
    ok = [
        "numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        "six-1.17.0-py2.py3-none-any.whl",
        "cryptography-50.0.2-cp39-abi3-manylinux_2_28_x86_64.whl",
        "libclang-18.1.1-py2.py3-none-manylinux2010_x86_64.whl",
        "nvidia_cublas_cu12-12.2.5.6-py3-none-manylinux1_x86_64.whl",
        "x-1.0-cp311-cp311-manylinux_2_35_x86_64.whl",
    ]
    bad = [
        "numpy-1.26.4-cp312-cp312-manylinux_2_17_x86_64.whl",
        "numpy-1.26.4-cp311-cp311-macosx_11_0_arm64.whl",
        "numpy-1.26.4-cp311-cp311-manylinux_2_17_aarch64.whl",
        "numpy-1.26.4-cp311-cp311-musllinux_1_1_x86_64.whl",
        "numpy-1.26.4-cp311-cp311-win_amd64.whl",
        "x-1.0-cp311-cp311-manylinux_2_39_x86_64.whl",
        "x-1.0-cp311-cp311-linux_x86_64.whl",
        "not-a-wheel.tar.gz",
    ]
    assert [f for f in ok if t.wheel_ok(f)] == ok
    assert [f for f in bad if t.wheel_ok(f)] == []


def test_target_rejects_a_python_that_is_not_a_minor() -> None:
    with pytest.raises(UsageError, match="CPython minor"):
        Target.for_lock("3", None)


def test_target_unknown_os_uses_manylinux_2_28() -> None:
    assert Target.for_lock("3.10", "somethingelse").manylinux == "manylinux_2_28_x86_64"


# ------------------------------------------------------------------ uv engine


def test_uv_locks_the_closure_with_only_target_wheels(index: FakeIndex, cache: str) -> None:
    lk = _lock(index, cache)
    got = {p.name: p.version for p in lk.packages}
    # dep-a: newest below 2; dep-b 2.0 has no wheel for manylinux_2_35, so 1.0
    assert got == {"dep-a": "1.5", "dep-b": "1.0", "fakefw": "2.15.1"}
    assert lk.resolver == "uv" and lk.resolver_version
    assert lk.top_requirements == ("fakefw==2.15.1",)
    by_name = {p.name: p for p in lk.packages}
    fw = by_name["fakefw"].wheels
    assert [w.filename for w in fw] == [f"fakefw-2.15.1-{FW_TAG}.whl"]
    assert fw[0].sha256 == index.wheels[fw[0].filename].sha256
    assert fw[0].size == len(index.wheels[fw[0].filename].data)
    assert fw[0].url == f"{index.url.removesuffix('/simple')}/files/{fw[0].filename}"
    assert sorted(w.filename for w in by_name["dep-b"].wheels) == [
        "dep_b-1.0-cp311-cp311-manylinux_2_28_x86_64.whl",
        "dep_b-1.0-py3-none-any.whl",
    ]


def test_pip_cuda_source_locks_the_and_cuda_wheels(index: FakeIndex, cache: str) -> None:
    lk = _lock(index, cache, source="pip")
    assert lk.top_requirements == ("fakefw[and-cuda]==2.15.1",)
    nv = {p.name: p for p in lk.packages}["nvidia-fake-cu12"]
    assert nv.version == "12.2.1"
    assert [w.filename for w in nv.wheels] == [
        "nvidia_fake_cu12-12.2.1-py3-none-manylinux1_x86_64.whl"
    ]


def test_both_resolvers_give_the_same_lock(index: FakeIndex, cache: str) -> None:
    by_uv = _lock(index, cache, source="pip", with_=("dep-a<1.5",))
    by_pip = _lock(index, source="pip", with_=("dep-a<1.5",), resolver="pip")
    assert by_pip.resolver == "pip"
    assert {p.name: p.version for p in by_uv.packages} == {
        "dep-a": "1.0",
        "dep-b": "1.0",
        "fakefw": "2.15.1",
        "nvidia-fake-cu12": "12.2.1",
    }
    assert by_uv.packages == by_pip.packages


def test_same_input_gives_byte_identical_files(index: FakeIndex, tmp_path: Path) -> None:
    a = _lock(index, str(tmp_path / "c1"))
    b = _lock(index, str(tmp_path / "c2"))
    assert pylock_text(a) == pylock_text(b)
    assert requirements_text(a) == requirements_text(b)


def test_pylock_is_valid_pep751_and_reads_back(index: FakeIndex, cache: str) -> None:
    lk = _lock(index, cache, source="pip")
    text = pylock_text(lk)
    doc = tomllib.loads(text)
    pylock = Pylock.from_dict(doc)
    pylock.validate()
    assert pylock.created_by == "envlock"
    assert str(pylock.requires_python) == "==3.11.*"
    # packaging selects one wheel per package for the target's tags
    env = Target.for_lock("3.11", "ubuntu22.04")
    chosen = {
        pkg.name: dist.name
        for pkg, dist in pylock.select(
            environment=env.marker_environment(),  # type: ignore[arg-type]
            tags=sorted(env.tags, key=str),
        )
    }
    assert set(chosen) == {p.name for p in lk.packages}
    assert parse_pylock(text, "x") == lk
    tool = doc["tool"]["envlock"]
    assert tool["resolution"]["matrix_version"] == "2026-11-30"
    assert tool["resolution"]["matrix_digest"] == "0" * 64
    assert tool["input"] == {
        "spec": "fakefw==2.15",
        "with_requirements": [],
        "cuda_source": "pip",
        "schema_version": 2,
    }
    assert tool["resolver"] == "uv" and tool["resolver_version"] == lk.resolver_version


@pytest.mark.parametrize("resolver", ["uv", "pip"])
def test_requirements_txt_lists_every_target_hash(
    index: FakeIndex, cache: str, resolver: str
) -> None:
    """Hashes of every target wheel, and under each package what pulled it in
    (``# via``, as pip-compile and uv pip compile write it), from either resolver."""
    lk = _lock(index, cache, resolver=resolver)
    text = requirements_text(lk)
    assert "pip install --require-hashes --no-deps -r requirements.txt" in text
    assert "envlock lock fakefw==2.15 --cuda-source system " in text
    body = [ln for ln in text.splitlines() if not ln.startswith("#") and ln]
    expected: list[str] = []
    for p in lk.packages:
        expected.append(f"{p.name}=={p.version} \\")
        hashes = sorted(hashlib.sha256(index.wheels[w.filename].data).hexdigest() for w in p.wheels)
        expected += [
            f"    --hash=sha256:{h}" + (" \\" if i < len(hashes) - 1 else "")
            for i, h in enumerate(hashes)
        ]
        expected.append({"fakefw": "    # via SPEC"}.get(p.name, "    # via fakefw"))
    assert [p.name for p in lk.packages] == ["dep-a", "dep-b", "fakefw"]
    assert body == expected
    assert {p.name: p.dependencies for p in lk.packages}["fakefw"] == ("dep-a", "dep-b")


# ------------------------------------------------------------------ failures


def test_conflicting_pin_names_the_package_and_what_the_framework_needs(
    index: FakeIndex, cache: str
) -> None:
    with pytest.raises(NoResolution) as err:
        _lock(index, cache, with_=("dep-a>=2",))
    msg = err.value.message
    assert msg.startswith("your pins conflict with fakefw 2.15.1 (dep-a): ")
    assert "you asked for dep-a>=2, but fakefw 2.15.1 requires dep-a>=1,<2" in msg
    assert "uv said:" in msg  # the resolver's own explanation is kept as detail
    assert err.value.exit_code == 2
    assert "dep-a" in (err.value.hint or "")


def test_conflict_through_pip_names_the_same(index: FakeIndex) -> None:
    with pytest.raises(NoResolution) as err:
        _lock(index, with_=("dep-a>=2",), resolver="pip")
    assert "you asked for dep-a>=2, but fakefw 2.15.1 requires dep-a<2,>=1" in err.value.message


@pytest.mark.parametrize("resolver", ["uv", "pip"])
def test_a_pin_that_needs_a_newer_python_says_so_and_which(
    index: FakeIndex, cache: str, resolver: str
) -> None:
    # a pip freeze made in a newer Python than the lock's names such a release
    index.add_dist("dep-c", "1.0")
    index.add_dist("dep-c", "2.0", requires_python=">=3.12")
    with pytest.raises(NoResolution) as err:
        _lock(index, cache, with_=("dep-c==2.0",), resolver=resolver)
    msg = err.value.message
    assert msg.startswith(
        "the lock is for CPython 3.11, Linux x86_64, manylinux_2_35_x86_64, and your pins "
        "need another Python: dep-c==2.0 needs Python >=3.12\n"
    ), msg
    assert err.value.hint == (
        "pass --python 3.12 (a pip freeze does not record the Python it came from; "
        "'envlock capture --venv' does), or relax the pin on dep-c"
    )
    assert err.value.exit_code == 2


def test_pin_of_a_missing_version(index: FakeIndex, cache: str) -> None:
    with pytest.raises(NoResolution) as err:
        _lock(index, cache, with_=("dep-b==9.9",))
    assert "dep-b==9.9" in err.value.message


def test_bad_with_line_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="not a valid requirement"):
        check_requirements(["numpy=>1"])
    with pytest.raises(UsageError, match="direct URL"):
        check_requirements(["pkg @ https://example.invalid/pkg.whl"])


def test_pinning_the_framework_itself_is_refused(index: FakeIndex, cache: str) -> None:
    with pytest.raises(UsageError, match="comes from the resolution"):
        _lock(index, cache, with_=("fakefw==2.16",))


def test_transient_503_answers_are_retried(index: FakeIndex, cache: str) -> None:
    index.faults["/simple/dep-a/"] = [503, 503]
    before = index.client_hits["uv", "/simple/dep-a/"]
    lk = _lock(index, cache)
    assert {p.name for p in lk.packages} == {"dep-a", "dep-b", "fakefw"}
    assert index.faults["/simple/dep-a/"] == []  # both 503s were served
    # uv asked again after each 503; its second run (the pylock pass) reads uv's cache
    assert index.client_hits["uv", "/simple/dep-a/"] - before == 3


def test_uv_asks_for_each_page_once_per_lock(index: FakeIndex, cache: str) -> None:
    before = dict(index.client_hits)
    lk = _lock(index, cache, source="pip")
    asked = {
        path: n - before.get((agent, path), 0)
        for (agent, path), n in index.client_hits.items()
        if agent == "uv" and path.startswith("/simple/") and n > before.get((agent, path), 0)
    }
    assert asked == {f"/simple/{p.name}/": 1 for p in lk.packages}


def test_without_uv_cache_the_pylock_pass_asks_the_index(
    index: FakeIndex, cache: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_cache = _lock(index, cache, source="pip")
    monkeypatch.setenv("UV_NO_CACHE", "1")
    before = index.client_hits["uv", "/simple/dep-a/"]
    assert _lock(index, cache, source="pip") == with_cache
    assert index.client_hits["uv", "/simple/dep-a/"] - before == 2  # both runs asked


def test_transient_503_answers_are_retried_by_the_pip_engine_listing(
    index: FakeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pip asks for the page first and retries on its own: the 503s go to envlock only
    monkeypatch.setattr(index, "fault_agent", "envlock/")
    index.faults["/simple/dep-b/"] = [503, 503]
    before = index.client_hits["envlock", "/simple/dep-b/"]
    lk = _lock(index, resolver="pip")
    assert {p.name for p in lk.packages} == {"dep-a", "dep-b", "fakefw"}
    assert index.faults["/simple/dep-b/"] == []  # both 503s were served
    assert index.client_hits["envlock", "/simple/dep-b/"] - before == 3


@pytest.mark.slow
def test_unreachable_index_is_exit_3(monkeypatch: pytest.MonkeyPatch) -> None:
    # uv would retry the refused connection with backoff (6 s here); retries are
    # not what this test is about (test_transient_503_answers_are_retried is)
    monkeypatch.setenv("ENVLOCK_HTTP_RETRIES", "0")
    with pytest.raises(EnvironmentFailure) as err:
        lock(
            resolution(),
            LockInput(Constraints(spec="fakefw==2.15")),
            index_url="http://127.0.0.1:9/simple",
        )
    assert err.value.exit_code == 3
    assert err.value.message.startswith(
        "cannot reach the package index at http://127.0.0.1:9/simple"
    )
    assert "refused" in err.value.message.lower()


def test_offline_with_an_empty_cache_says_so(index: FakeIndex, tmp_path: Path) -> None:
    with pytest.raises(EnvironmentFailure) as err:
        _lock(index, str(tmp_path / "empty"), offline=True)
    assert "--offline" in err.value.message and "cache" in err.value.message
    assert "without --offline" in (err.value.hint or "")


def test_offline_uses_the_cache_of_an_earlier_run(index: FakeIndex, cache: str) -> None:
    online = _lock(index, cache)
    hits = dict(index.hits)
    offline = _lock(index, cache, offline=True)
    assert offline.packages == online.packages
    assert index.hits == hits  # not one request


def test_offline_with_the_pip_resolver_is_a_usage_error(index: FakeIndex) -> None:
    with pytest.raises(UsageError, match="uv resolver only"):
        _lock(index, resolver="pip", offline=True)


# ------------------------------------------------------------------ read_lock


def test_read_lock_round_trip(index: FakeIndex, cache: str, tmp_path: Path) -> None:
    lk = _lock(index, cache, with_=("dep-a==1.0",))
    (tmp_path / "pylock.toml").write_text(pylock_text(lk), encoding="utf-8")
    assert read_lock(tmp_path) == lk


def test_a_pylock_that_is_not_utf8_or_holds_a_huge_integer_is_exit_2_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "pylock.toml"
    (tmp_path / "requirements.txt").write_text("", encoding="utf-8")
    for data, problem in (
        (b'lock-version = "1.0"\ncreated-by = "\xff"\n', "not UTF-8"),
        (b"lock-version = " + b"9" * 5000 + b"\n", "not valid TOML: a number too long"),
    ):
        path.write_bytes(data)
        with pytest.raises(DataError, match=problem):
            read_lock(tmp_path)
        assert main(["render", str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert problem in err and "Traceback" not in err


def test_read_lock_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="does not exist"):
        read_lock(tmp_path)
    path = tmp_path / "pylock.toml"
    path.write_text("lock-version = \n", encoding="utf-8")
    with pytest.raises(DataError, match=f"{path}: not valid TOML"):
        read_lock(tmp_path)
    path.write_text('lock-version = "1.0"\npackages = []\n', encoding="utf-8")
    with pytest.raises(DataError, match="not a valid PEP 751 lock.*created-by"):
        read_lock(tmp_path)
    path.write_text('lock-version = "1.0"\ncreated-by = "x"\npackages = []\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"no \[tool.envlock\] table"):
        read_lock(tmp_path)


# ------------------------------------------------------------------ golden


def _fixed_lock() -> Lock:
    base = "http://127.0.0.1:8080/files"

    def wheel(fn: str, size: int) -> LockedWheel:
        return LockedWheel(fn, f"{base}/{fn}", size, hashlib.sha256(fn.encode()).hexdigest())

    return Lock(
        resolution=resolution("pip", framework="tensorflow"),
        input=LockInput(
            Constraints(spec="tensorflow==2.15", python="3.11", cuda_source="pip"),
            with_requirements=("numpy==1.26.4",),
        ),
        packages=(
            LockedPackage(
                "numpy",
                "1.26.4",
                (
                    wheel(
                        "numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
                        18252005,
                    ),
                ),
            ),
            LockedPackage(
                "tensorflow",
                "2.15.1",
                (
                    wheel(
                        "tensorflow-2.15.1-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64"
                        ".whl",
                        475258663,
                    ),
                ),
                dependencies=("numpy", "wrapt"),
            ),
            LockedPackage(
                "wrapt",
                "1.14.2",
                (
                    wheel(
                        "wrapt-1.14.2-cp311-cp311-manylinux1_x86_64.manylinux_2_28_x86_64"
                        ".manylinux_2_5_x86_64.whl",
                        77384,
                    ),
                    wheel("wrapt-1.14.2-py3-none-any.whl", 21577),
                ),
            ),
        ),
        resolver="uv",
        resolver_version="0.13.9",
        top_requirements=("tensorflow[and-cuda]==2.15.1", "numpy==1.26.4"),
    )


@pytest.mark.parametrize(
    ("name", "writer"), [("pylock.toml", pylock_text), ("requirements.txt", requirements_text)]
)
def test_writers_match_golden_files(name: str, writer: Any) -> None:
    text = writer(_fixed_lock())
    path = GOLDEN / name
    if os.environ.get("ENVLOCK_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


# Every C0 control character and DEL: TOML allows none of them raw in a string,
# and only a tab in a comment. The hand writer this replaced emitted DEL raw.
CONTROL = "".join(chr(c) for c in [*range(0x20), 0x7F])


def _lock_with_text(text: str) -> Lock:
    base = _fixed_lock()
    return Lock(
        resolution=Resolution.from_dict(
            {**base.resolution.to_dict(), "reasons": [f"reason {text}"], "warnings": [text]}
        ),
        input=LockInput(Constraints(spec=f"tensorflow==2.15{text}"), with_requirements=(text,)),
        packages=tuple(
            LockedPackage(
                p.name,
                p.version,
                tuple(LockedWheel(w.filename, w.url + text, w.size, w.sha256) for w in p.wheels),
            )
            for p in base.packages
        ),
        resolver="uv",
        resolver_version=f"0.13.9{text}",
        top_requirements=(f"tensorflow{text}",),
    )


def test_control_characters_in_a_lock_are_refused_on_write_and_on_read() -> None:
    """A lock is read, not trusted (issue #11): a field with a control character is
    refused when read, naming the field, and envlock never writes such a lock."""
    lk = _lock_with_text(CONTROL)
    with pytest.raises(DataError, match=r"the lock to write: .* control character U\+0000"):
        pylock_text(lk)
    doc_text = tomli_w.dumps(pylock_document(lk))  # what the writer would have made
    Pylock.from_dict(tomllib.loads(doc_text)).validate()  # valid TOML and PEP 751 ...
    with pytest.raises(DataError, match=r"^x: tool\.envlock\.resolution\.warnings\[0\]: "):
        parse_pylock(doc_text, "x")  # ... but not a lock envlock trusts
    one = _lock_with_text("\t")
    for fine in ("", ".post1", "-1"):
        assert parse_pylock(pylock_text(_lock_with_text(fine)), "x") == _lock_with_text(fine)
    with pytest.raises(DataError, match="U\\+0009"):
        pylock_text(one)


def test_control_characters_stay_inside_requirements_txt_comments() -> None:
    text = requirements_text(_lock_with_text(CONTROL))
    lines = text.splitlines()
    header = lines[: lines.index("")]
    assert len(header) == 10 and all(ln.startswith("#") for ln in header)
    assert "\\x0a" in header[1] and "\x7f" not in text
    body = [ln for ln in lines[len(header) :] if ln]
    assert body[0] == "numpy==1.26.4 \\"


@given(st.text(max_size=20))
def test_any_text_in_a_lock_round_trips_or_is_refused(text: str) -> None:
    lk = _lock_with_text(text)
    try:
        written = pylock_text(lk)
    except DataError as e:  # a field it would not read back: named, never a traceback
        assert e.message.startswith("the lock to write: ") and e.hint
        return
    assert parse_pylock(written, "x") == lk


# ------------------------------------------------------------------ conflict parsing


UV_ONE_OF = """error: No solution found when resolving dependencies
  cause: Because tensorflow==2.15.1 depends on one of:
             protobuf>=3.20.3,<4.21.0
             protobuf>4.21.0,<4.21.1
             protobuf>4.21.1,<5.0.0.dev0
         and you require tensorflow==2.15.1, we can conclude that you require one of:
             protobuf>=3.20.3,<4.21.0
         And because you require protobuf>=6, we can conclude that your requirements are \
unsatisfiable.
"""


def test_uv_one_of_list_becomes_one_specifier() -> None:
    err = explain(
        UV_ONE_OF,
        resolver="uv",
        framework="tensorflow",
        framework_version="2.15.1",
        user_requirements=["protobuf>=6"],
        target="CPython 3.11",
    )
    assert (
        "you asked for protobuf>=6, but tensorflow 2.15.1 requires "
        "protobuf>=3.20.3,!=4.21.0,!=4.21.1,<5.0.0.dev0"
    ) in err.message


def test_merge_one_of_keeps_what_it_cannot_merge() -> None:
    assert merge_one_of(["a>=1,<2", "a>3,<4"]) == "a>=1,<2 or a>3,<4"
    assert merge_one_of(["a>=1,<2", "a>2,<4"]) == "a>=1,!=2,<4"
    assert merge_one_of(["a>=1,<2", "b>2,<4"]) == "a>=1,<2 or b>2,<4"


@given(st.text(max_size=200))
def test_explain_never_fails_on_any_resolver_output(text: str) -> None:
    err = explain(
        text,
        resolver="uv",
        framework="tensorflow",
        framework_version="2.15.1",
        user_requirements=["numpy>=2", "not a req ("],
        target="t",
    )
    assert isinstance(err, NoResolution) and err.message


_names = st.from_regex(r"[a-z][a-z0-9]{0,8}(-[a-z0-9]{1,5})?", fullmatch=True)
_versions = st.from_regex(r"[0-9]{1,2}(\.[0-9]{1,3}){0,2}", fullmatch=True)


@given(
    st.lists(
        st.tuples(_names, st.sampled_from(["==", ">=", "<", "~=", "!="]), _versions), max_size=6
    )
)
def test_check_requirements_keeps_valid_lines(reqs: list[tuple[str, str, str]]) -> None:
    lines = [f"{n}{op}{v}" for n, op, v in reqs if not (op == "~=" and "." not in v)]
    assert check_requirements(lines + ["", "  "]) == tuple(lines)


# ------------------------------------------------------------------ command line


@pytest.mark.slow
def test_cli_unreachable_index_exits_3_and_leaves_the_bundle(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVLOCK_HTTP_RETRIES", "0")  # no backoff: retries are not under test
    bundle = tmp_path / "env"
    bundle.mkdir()
    for name in ("pylock.toml", "requirements.txt", "Dockerfile"):
        (bundle / name).write_text(f"earlier {name}\n", encoding="utf-8")
    before = {p.name: p.read_bytes() for p in bundle.iterdir()}
    code = main(
        ["lock", "tensorflow==2.15", "--index-url", "http://127.0.0.1:9/simple", "-o", str(bundle)]
    )
    _, err = capsys.readouterr()
    assert code == 3
    assert err.startswith("envlock: error: cannot reach the package index at http://127.0.0.1:9")
    assert "hint:" in err and "Traceback" not in err
    assert {p.name: p.read_bytes() for p in bundle.iterdir()} == before


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["lock", "-o", "x"], "what to lock is missing"),
        (["lock", "tensorflow==2.15"], "no output folder"),
        (["lock", "--check", "d", "-o", "x"], "--output is not used"),
        (["lock", "tensorflow==2.15", "--with", "numpy=>1", "-o", "x"], "not a valid requirement"),
    ],
)
def test_cli_usage_errors_exit_2(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    message: str,
    tmp_path: Path,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "hint:" in err
    assert not (tmp_path / "x").exists()


def test_index_credentials_are_never_recorded() -> None:
    assert without_credentials("https://user:secret@mirror.invalid:8443/simple") == (
        "https://mirror.invalid:8443/simple"
    )
    assert without_credentials("http://127.0.0.1:9/simple") == "http://127.0.0.1:9/simple"


# ------------------------------------------------------------------ a Python without wheels

UV_NO_ABI = """\
  × No solution found when resolving dependencies:
  ╰─▶ Because tensorrt==8.5.3.1 has no wheels with a matching Python ABI tag (e.g., `cp311`)
      and tensorflow[and-cuda]==2.14.1 depends on tensorrt==8.5.3.1, we can conclude that
      tensorflow[and-cuda]==2.14.1 cannot be used.
      And because you require tensorflow[and-cuda]==2.14.1, we can conclude that your
      requirements are unsatisfiable.
"""


def test_uv_abi_tag_text_suggests_another_python_not_relaxing_pins() -> None:
    err = explain(
        UV_NO_ABI,
        resolver="uv",
        framework="tensorflow",
        framework_version="2.14.1",
        user_requirements=["numpy<2"],
        target="CPython 3.11, Linux x86_64, manylinux_2_35",
    )
    assert err.message.startswith(
        "no wheel of tensorrt==8.5.3.1 fits CPython 3.11, Linux x86_64, manylinux_2_35 "
        "(wrong Python tags)\n  uv said:\n"
    )
    assert err.hint is not None
    assert err.hint.startswith("choose another --python")
    assert "relax" not in err.hint


@pytest.fixture(scope="module")
def cp310_only_index(make_module_index: Callable[..., FakeIndex]) -> FakeIndex:
    """fakefw's and-cuda extra needs a package that has a cp310 wheel only."""
    idx = make_module_index()
    idx.add_dist(
        "fakefw",
        "2.15.1",
        tag=FW_TAG,
        requires=("dep-a",),
        extras={"and-cuda": ("nvidia-old-cu11==8.5.3.1",)},
    )
    idx.add_dist("dep-a", "1.0")
    idx.add_dist("nvidia-old-cu11", "8.5.3.1", tag="cp310-none-manylinux_2_17_x86_64")
    return idx


@pytest.mark.parametrize("resolver", ["uv", "pip"])
def test_real_resolvers_without_a_wheel_for_the_python_suggest_another_python(
    cp310_only_index: FakeIndex, resolver: str, tmp_path: Path
) -> None:
    with pytest.raises(NoResolution) as err:
        lock(
            resolution("pip"),  # Python 3.11
            LockInput(Constraints(spec="fakefw==2.15", cuda_source="pip")),
            resolver=resolver,
            index_url=cp310_only_index.url,
            cache_dir=str(tmp_path / "uv-cache"),
        )
    assert err.value.message.startswith("no wheel of nvidia-old-cu11==8.5.3.1 fits CPython 3.11")
    assert f"{resolver} said:" in err.value.message
    assert err.value.exit_code == 2
    assert err.value.hint is not None and "choose another --python" in err.value.hint
    assert "relax" not in err.value.hint


# ------------------------------------------------------------------ lock --check: the whole bundle

# Render options other than the defaults, so --check must read them back from
# the bundle. Nothing is built: the base image is only a name here.
LOCAL_BASE = "envlock-test/bookworm-python:1"
THROWAWAY_CA = (
    "-----BEGIN CERTIFICATE-----\n"
    "MIIBfake+test+CA+for+envlock+lock+check+no+key+exists+for+it+anywhere=\n"
    "-----END CERTIFICATE-----\n"
)


@pytest.fixture()
def tf_index(make_index: Callable[..., FakeIndex]) -> FakeIndex:
    """A tiny 'tensorflow' 2.15.1, so the real resolve of tensorflow==2.15 locks
    from 127.0.0.1 in about a second."""
    idx = make_index()
    idx.add_dist(
        "tensorflow", "2.15.1", tag="py3-none-manylinux_2_17_x86_64", requires=("dep-a>=1,<2",)
    )
    for v in ("1.0", "1.5"):
        idx.add_dist("dep-a", v)
    return idx


@pytest.fixture()
def tf_bundle(
    tf_index: FakeIndex,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> tuple[Path, list[str]]:
    """A bundle written by `envlock lock`, and the files lock says it wrote."""
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    ca = tmp_path / "ca.pem"
    ca.write_text(THROWAWAY_CA, encoding="utf-8")
    out = tmp_path / "env"
    code = main(
        ["lock", "tensorflow==2.15", "--index-url", tf_index.url, "-o", str(out), "--json"]
        + ["--base-image", LOCAL_BASE, "--python-from", "image", "--ca-cert", str(ca)]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    return out, report["files"]


def check_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(["lock", "--check", *argv, "--json"])
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    return code, report


def state(folder: Path) -> dict[str, tuple[bytes, int, int]]:
    return {
        p.name: (p.read_bytes(), p.stat().st_mtime_ns, p.stat().st_mode)
        for p in sorted(folder.iterdir())
    }


def test_check_of_an_untouched_bundle_compares_every_file_and_writes_nothing(
    tf_bundle: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    bundle, written = tf_bundle
    (bundle / "notes.txt").write_text("mine, not envlock's\n", encoding="utf-8")
    before = state(bundle)
    code, report = check_json(capsys, str(bundle))
    assert code == 0, report
    assert report["ok"] is True and report["changes"] == []
    compared = [row["path"] for row in report["files"]]
    assert sorted(compared) == written  # exactly what lock writes, notes.txt not among them
    assert compared[:3] == ["pylock.toml", "requirements.txt", "Dockerfile"]
    assert {"bootstrap.sh", "README.md", ".dockerignore", "envlock-ca.pem", "render.json"} <= set(
        compared
    )
    assert {row["state"] for row in report["files"]} == {"same"}
    assert report["regenerate"].endswith(
        f"-o {bundle} --base-image {LOCAL_BASE} --ca-cert {bundle.parent / 'ca.pem'} "
        "--python-from image"
    )
    assert state(bundle) == before

    assert main(["lock", "--check", str(bundle)]) == 0
    out = capsys.readouterr().out
    assert out == (
        f"{bundle}: the lock is current (2 packages, tensorflow 2.15.1); "
        f"all {len(written)} files lock writes match\n"
    )
    assert state(bundle) == before


def test_envlock_check_is_the_same_check_as_lock_check(
    tf_bundle: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    bundle, written = tf_bundle
    before = state(bundle)
    assert main(["check", str(bundle)]) == 0
    out = capsys.readouterr().out
    assert out == (
        f"{bundle}: the lock is current (2 packages, tensorflow 2.15.1); "
        f"all {len(written)} files lock writes match\n"
    )
    assert main(["check", str(bundle), "--json"]) == 0
    as_check = json.loads(capsys.readouterr().out)
    assert check_json(capsys, str(bundle)) == (0, as_check)
    (bundle / "Dockerfile").write_text("FROM scratch\n", encoding="utf-8")
    assert main(["check", str(bundle)]) == 1
    assert "! Dockerfile would be rewritten" in capsys.readouterr().out
    assert state(bundle) != before  # only the hand edit: check writes nothing
    (bundle / "Dockerfile").write_bytes(before["Dockerfile"][0])


@pytest.mark.parametrize(
    ("given", "named"),
    [
        (["tensorflow==2.16"], "SPEC is not used"),
        (["--python", "3.12"], "--python is not used"),  # once ignored without a word
        (["--upgrade-package", "numpy"], "--upgrade-package is not used"),
        (["--with", "numpy==1.26.4", "--gpu", "T4"], "--gpu, --with are not used"),
        (["--exclude-newer", "2026-01-01", "--force"], "--exclude-newer, --force are not used"),
        (["--index", "pt=https://mirror.invalid/simple"], "--index is not used"),
    ],
)
def test_lock_check_refuses_every_option_that_makes_a_lock_in_one_message(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, given: list[str], named: str
) -> None:
    folder = tmp_path / "env"
    assert main(["lock", "--check", str(folder), *given]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"envlock: error: --check DIR compares {folder} with what its recorded input locks "
        f"now, so it takes none of the options that make a lock: {named}\n"
        f"  hint: envlock check {folder}\n"
    )
    assert not folder.exists()


def test_lock_check_hint_runs_as_printed_for_a_folder_with_a_space(
    tf_bundle: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The hint is a shell line: a folder with a space is quoted, and the line runs."""
    bundle, _ = tf_bundle
    folder = tmp_path / "my env"
    shutil.copytree(bundle, folder)
    assert main(["lock", "--check", str(folder), "--python", "3.12"]) == 2
    err = capsys.readouterr().err
    hint = err.splitlines()[-1].removeprefix("  hint: ")
    assert hint == f"envlock check '{folder}'"
    argv = shlex.split(hint)
    assert argv[0] == "envlock"
    assert main(argv[1:]) == 0
    assert "the lock is current" in capsys.readouterr().out


def test_check_takes_no_option_that_makes_a_lock(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["check", "env", "--python", "3.12"])
    assert e.value.code == 2
    assert capsys.readouterr().err == (
        "envlock: error: unrecognized arguments: --python 3.12\n"
        "  hint: see 'envlock check --help'\n"
    )


def test_check_names_a_hand_edited_dockerfile(
    tf_bundle: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    bundle, _ = tf_bundle
    dockerfile = bundle / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "RUN echo edited by hand\n", encoding="utf-8")
    before = state(bundle)
    code, report = check_json(capsys, str(bundle))
    assert code == 1
    assert report["ok"] is False
    assert report["changes"] == ["! Dockerfile would be rewritten"]
    assert [r["path"] for r in report["files"] if r["state"] != "same"] == ["Dockerfile"]
    assert state(bundle) == before  # the edit is still there: --check writes nothing

    (row,) = [r for r in report["files"] if r["state"] != "same"]
    assert row["diff"].startswith(f"--- {dockerfile}\n+++ {dockerfile} (lock writes)\n@@ ")
    assert row["diff"].endswith("-RUN echo edited by hand\n")
    assert report["fix"] == f"envlock render {bundle}"

    assert main(["lock", "--check", str(bundle)]) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[:3] == [
        f"{bundle}: `envlock lock` would change the bundle:",
        "  ! Dockerfile would be rewritten",
        "",
    ]
    assert row["diff"] in out  # the unified diff, whole
    assert lines[-2] == (
        f"the lock is current; only rendered files differ: envlock render {bundle}"
    )
    assert lines[-1].startswith("(a full re-lock: envlock lock tensorflow==2.15 ")
    assert state(bundle) == before


def test_check_reads_render_options_from_render_json_not_comments(
    tf_bundle: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    """The options come from render.json: a hand-edited regenerate comment is
    only that file's change, and an edited render.json decides the render."""
    bundle, _ = tf_bundle
    dockerfile = bundle / "Dockerfile"
    original = dockerfile.read_text(encoding="utf-8")
    lines = original.splitlines(keepends=True)
    assert lines[2].startswith("#   envlock render . ") and "--python-from image" in lines[2]
    lines[2] = lines[2].replace("--python-from image", "--python-from apt")
    dockerfile.write_text("".join(lines), encoding="utf-8")
    code, report = check_json(capsys, str(bundle))
    assert code == 1
    assert report["changes"] == ["! Dockerfile would be rewritten"]

    dockerfile.write_text(original, encoding="utf-8")
    recorded = json.loads((bundle / "render.json").read_text(encoding="utf-8"))
    assert recorded["python_from"] == "image"
    recorded["python_from"] = "uv"
    (bundle / "render.json").write_text(json.dumps(recorded, indent=2, sort_keys=True) + "\n")
    code, report = check_json(capsys, str(bundle))
    assert code == 1
    states = {r["path"]: r["state"] for r in report["files"]}
    assert states["render.json"] == "same" and states["Dockerfile"] == "differs"
    assert report["regenerate"].endswith("--python-from uv")


def test_check_of_a_bundle_without_render_json_uses_what_is_given(
    tf_bundle: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    """Bundles made before render.json: a note, the defaults, and the options
    given on the command line; render.json itself is reported missing."""
    bundle, _ = tf_bundle
    (bundle / "render.json").unlink()
    code, report = check_json(capsys, str(bundle))
    assert code == 1
    assert report["notes"] == [
        f"{bundle} has no render.json (bundles made before envlock recorded their render "
        "options): the options given here are used, the defaults for the rest; give "
        "--base-image, --base-digest, --ca-cert or --python-from again if the bundle was "
        "rendered with them"
    ]
    assert "! Dockerfile would be rewritten" in report["changes"]
    ca = bundle.parent / "ca.pem"
    code, report = check_json(
        capsys,
        str(bundle),
        *("--base-image", LOCAL_BASE, "--python-from", "image", "--ca-cert", str(ca)),
    )
    assert code == 1
    assert report["changes"] == ["! render.json missing"]


def test_check_names_missing_and_non_executable_files(
    tf_bundle: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    bundle, _ = tf_bundle
    (bundle / "README.md").unlink()
    (bundle / "envlock_smoke.py").unlink()
    (bundle / "bootstrap.sh").chmod(0o644)
    before = state(bundle)
    code, report = check_json(capsys, str(bundle))
    assert code == 1
    assert report["changes"] == [
        "! bootstrap.sh is not executable",
        "! README.md missing",
        "! envlock_smoke.py missing",
    ]
    assert state(bundle) == before


def test_check_after_a_new_release_names_the_lock_and_what_carries_its_digest(
    tf_bundle: tuple[Path, list[str]], tf_index: FakeIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle, _ = tf_bundle
    tf_index.add_dist("dep-a", "1.9")
    code, report = check_json(capsys, str(bundle))
    assert code == 1
    assert report["changes"][0] == "~ dep-a 1.5 -> 1.9"
    differ = {r["path"] for r in report["files"] if r["state"] == "differs"}
    # the lock files, and every rendered file that names the lock's digest
    assert differ == {
        "pylock.toml",
        "requirements.txt",
        "Dockerfile",
        "bootstrap.sh",
        "README.md",
        "expect.json",
    }
    digest = report["files"]  # unchanged files really do not carry the digest
    old_digest = hashlib.sha256((bundle / "pylock.toml").read_bytes()).hexdigest()
    for row in digest:
        if row["state"] == "same":
            assert old_digest.encode() not in (bundle / row["path"]).read_bytes(), row


def test_check_without_the_recorded_ca_file_is_bad_input(
    tf_bundle: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    bundle, _ = tf_bundle
    ca = bundle.parent / "ca.pem"
    ca.unlink()
    assert main(["lock", "--check", str(bundle)]) == 2
    err = capsys.readouterr().err
    assert f"{bundle} was rendered with --ca-cert {ca}, which is not readable here" in err
    assert f"hint: give the CA file again: envlock lock --check {bundle} --ca-cert FILE" in err
    other = bundle.parent / "elsewhere.pem"
    other.write_text(THROWAWAY_CA, encoding="utf-8")
    # the same CA from another path: the bundle's regenerate lines would name the new path
    code, report = check_json(capsys, str(bundle), "--ca-cert", str(other))
    assert code == 1
    assert report["changes"] == [
        "! Dockerfile would be rewritten",
        "! bootstrap.sh would be rewritten",
        "! README.md would be rewritten",
        "! render.json would be rewritten",
    ]


def test_no_third_party_deprecation_warning_reaches_envlocks_messages(
    index: FakeIndex, cache: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """UV_NATIVE_TLS (uv's old name for the system CA store, set by users and
    guides) made uv print a deprecation warning into every error envlock showed."""
    monkeypatch.setenv("UV_NATIVE_TLS", "1")
    with pytest.raises(NoResolution) as err:
        _lock(index, cache, with_=("dep-b==9.9",))
    assert "dep-b==9.9" in err.value.message
    assert "deprecated" not in err.value.message.lower()
    assert "UV_NATIVE_TLS" not in err.value.message
    # every uv run (lock, restore, wheelhouse installs) gets the current name
    env = uv_env()
    assert "UV_NATIVE_TLS" not in env and env["UV_SYSTEM_CERTS"] == "1"
