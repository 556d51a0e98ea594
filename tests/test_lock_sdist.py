"""envlock lock when a dependency has no wheel, only a source distribution.

With ``--only-binary`` envlock locks binary wheels only (uv and pip run with
--only-binary :all:), so a dependency of which the index serves only an sdist
for the target must end in one clear "no wheel" error (exit 2, the package
named in the message and the hint), with both resolvers; the pip resolver
refuses it without the flag too. Without it, uv locks the sdist (#41): see
test_lock_sdist_locked.py. The index is the local fake one (real HTTP, real
tar.gz sdists and zip wheels); uv and pip are real.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from fixtures.index.fakeindex import FakeIndex

from envlock.cli import main


@pytest.fixture(scope="module")
def sdist_index(make_module_index: Callable[..., FakeIndex]) -> FakeIndex:
    """A tiny 'tensorflow' 2.15.1 that needs src-only, of which the index has only
    sdists (and, for 1.1, a macOS wheel that does not fit the target either)."""
    idx = make_module_index()
    idx.add_dist(
        "tensorflow",
        "2.15.1",
        tag="py3-none-manylinux_2_17_x86_64",
        requires=("dep-a", "src-only>=1"),
    )
    idx.add_dist("dep-a", "1.0")
    idx.add_sdist("src-only", "1.0", requires=("dep-a",))
    idx.add_sdist("src-only", "1.1")
    idx.add_dist("src-only", "1.1", tag="cp311-cp311-macosx_12_0_arm64")
    return idx


def test_fake_index_serves_an_sdist_with_its_hash_in_json_and_html(
    sdist_index: FakeIndex,
) -> None:
    from envlock.index import http, pep691

    sdist = sdist_index.wheels["src_only-1.0.tar.gz"]
    assert (sdist.project, sdist.version, sdist.is_sdist) == ("src-only", "1.0", True)
    sess = http.session()
    try:
        files = pep691.project_files(sess, sdist_index.url, "src-only")
        assert files is not None
        listed = {f.filename: f for f in files}
        assert sorted(listed) == [
            "src_only-1.0.tar.gz",
            "src_only-1.1-cp311-cp311-macosx_12_0_arm64.whl",
            "src_only-1.1.tar.gz",
        ]
        got = sess.get(listed["src_only-1.0.tar.gz"].url, timeout=10).content
    finally:
        sess.close()
    assert listed["src_only-1.0.tar.gz"].sha256 == hashlib.sha256(got).hexdigest()
    assert listed["src_only-1.0.tar.gz"].size == len(got)
    with tarfile.open(fileobj=io.BytesIO(got)) as tar:
        pkg_info = tar.extractfile("src_only-1.0/PKG-INFO")
        assert pkg_info is not None
        assert "Requires-Dist: dep-a" in pkg_info.read().decode()
        assert "src_only-1.0/pyproject.toml" in tar.getnames()
    # the PEP 503 page: every file once, its sha256 in the link's fragment
    with urllib.request.urlopen(f"{sdist_index.url}/src-only/", timeout=10) as resp:
        assert resp.headers["Content-Type"] == "text/html"
        page = resp.read().decode()
    for name, f in listed.items():
        assert page.count(f'href="../../files/{name}#sha256={f.sha256}"') == 1


def _lock(
    index: FakeIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *extra: str
) -> tuple[int, Path]:
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    out = tmp_path / "env"
    code = main(["lock", "tensorflow==2.15", "--index-url", index.url, "-o", str(out), *extra])
    return code, out


@pytest.mark.parametrize("resolver", ["uv", "pip"])
def test_lock_of_a_dependency_with_only_an_sdist_says_no_wheel(
    sdist_index: FakeIndex,
    resolver: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    code, out = _lock(sdist_index, tmp_path, monkeypatch, "--resolver", resolver, "--only-binary")
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    first = err.splitlines()[0]
    # uv names the project ("all versions of src-only"), pip the requirement
    wanted = {"uv": "src-only", "pip": "src-only>=1"}[resolver]
    assert first.startswith(f"envlock: error: no wheel of {wanted} fits CPython 3.")
    assert first.endswith(
        "; the index offers src-only for it only as a source distribution (sdist), "
        "and --only-binary locks binary wheels only"
    )
    assert f"{resolver} said:" in err
    hint = [line for line in err.splitlines() if line.startswith("  hint: ")]
    assert len(hint) == 1
    assert hint[0].lstrip().startswith("hint: lock without --only-binary (its sdist is locked")
    assert "build a wheel of src-only for this target (pip wheel --no-deps src-only)" in hint[0]
    assert "or choose another tensorflow release" in hint[0]
    assert not out.exists()


def test_pinning_a_version_that_has_only_an_sdist_is_not_called_a_conflict(
    sdist_index: FakeIndex,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    code, out = _lock(
        sdist_index, tmp_path, monkeypatch, "--with", "src-only==1.1", "--only-binary"
    )
    err = capsys.readouterr().err
    assert code == 2, err
    first = err.splitlines()[0]
    assert first.startswith("envlock: error: no wheel of src-only==1.1 fits CPython 3.")
    assert "conflict" not in first
    assert "build a wheel of src-only" in err
    assert not out.exists()


def test_the_pip_resolver_refuses_an_sdist_without_only_binary_and_names_uv(
    sdist_index: FakeIndex,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    code, out = _lock(sdist_index, tmp_path, monkeypatch, "--resolver", "pip")
    err = capsys.readouterr().err
    assert code == 2, err
    first = err.splitlines()[0]
    assert first.startswith("envlock: error: no wheel of src-only>=1 fits CPython 3.")
    assert first.endswith("and the pip resolver locks binary wheels only")
    assert "hint: lock with --resolver uv (its sdist is locked and built on install)" in err
    assert not out.exists()
