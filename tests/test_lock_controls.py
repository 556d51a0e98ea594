"""The lock controls users of uv and pip-tools expect, without the real index.

``--exclude-newer DATE`` (uv's flag, pip's ``--uploaded-prior-to``; the instant
in UTC, recorded in the lock and reused by ``--check``; resolve leaves out
TensorFlow releases uploaded later), ``--upgrade-package NAME`` (the rest of
DIR's lock stays) and the dependency graph behind the ``# via`` lines. uv and
pip are the real resolvers; the index is the local PEP 691 fake, whose files
carry upload times.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest
from fixtures.index.fakeindex import FakeIndex, make_dist

from envlock.bundle.folder import LockRequest, lock_folder
from envlock.errors import NoResolution, UsageError
from envlock.instant import exclude_newer, uploaded_before
from envlock.lock import lock, parse_pylock, pylock_text, requirements_text
from envlock.lock.pip import check_exclude_newer, pip_version
from envlock.lock.pylock import regenerate_command, resolve_argv
from envlock.lock.uv import compile_command, dependencies_of, parse_annotated
from envlock.model import Lock, LockInput, Resolution
from envlock.resolve import Constraints, resolve

FW_TAG = "cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64"


def resolution() -> Resolution:
    return Resolution.from_dict(
        {
            "framework": "fakefw",
            "version": "2.15.1",
            "python": "3.11",
            "python_supported": ["3.11"],
            "cuda": "12.2",
            "cudnn": "8.9",
            "driver_min": "525.60.13",
            "compute_capabilities": ["sm_80"],
            "cuda_source": "system",
            "os": "ubuntu22.04",
            "base_image": "nvidia/cuda:12.2.2-cudnn8-runtime-ubuntu22.04",
            "base_image_digest": None,
            "cuda_image_version": "12.2.2",
            "image_cudnn": "8.9.6.50",
            "and_cuda": [],
            "requires_python": ">=3.9",
            "matrix_version": "2026-11-30",
            "matrix_digest": "0" * 64,
            "reasons": ["newest 2.15 release"],
        }
    )


@pytest.fixture(scope="module")
def index(make_module_index: Callable[..., FakeIndex]) -> FakeIndex:
    """fakefw needs dep-a (1.0 in January, 1.5 in February, 1.9 in April 2024) and
    dep-c (1.0 in January, 1.1 in April); dep-a 1.9 needs dep-c>=1.1."""
    idx = make_module_index()
    idx.add_dist("fakefw", "2.15.1", tag=FW_TAG, requires=("dep-a>=1,<2", "dep-c"))
    for version, when, requires in (
        ("1.0", "2024-01-10T08:00:00.000000Z", ()),
        ("1.5", "2024-02-10T08:00:00.000000Z", ()),
        ("1.9", "2024-04-10T08:00:00.000000Z", ("dep-c>=1.1",)),
    ):
        wheel = idx.add(make_dist("dep-a", version, requires=requires))
        wheel.upload_time = when
    for version, when in (("1.0", "2024-01-10T08:00:00Z"), ("1.1", "2024-04-10T08:00:00Z")):
        idx.add(make_dist("dep-c", version)).upload_time = when
    return idx


def _lock(
    idx: FakeIndex,
    tmp_path: Path,
    *,
    resolver: str = "uv",
    before: str | None = None,
    previous: Lock | None = None,
    upgrade: tuple[str, ...] = (),
) -> Lock:
    return lock(
        resolution(),
        LockInput(Constraints(spec="fakefw==2.15", exclude_newer=before)),
        resolver=resolver,
        index_url=idx.url,
        cache_dir=str(tmp_path / "uv-cache"),
        previous=previous,
        upgrade=upgrade,
    )


def versions(lk: Lock) -> dict[str, str]:
    return {p.name: p.version for p in lk.packages}


# ------------------------------------------------------------ the instant


@pytest.mark.parametrize(
    ("given", "instant"),
    [
        ("2024-03-10", "2024-03-10T00:00:00Z"),  # a date: the start of that day in UTC
        ("2024-03-10T12:30:00Z", "2024-03-10T12:30:00Z"),
        ("2024-03-10T14:00:00+02:00", "2024-03-10T12:00:00Z"),
        ("2024-03-09T23:00:00-03:00", "2024-03-10T02:00:00Z"),
        ("2024-03-10t00:00:00.5z", "2024-03-10T00:00:00.500000Z"),
    ],
)
def test_exclude_newer_is_one_instant_in_utc(given: str, instant: str) -> None:
    assert exclude_newer(given) == instant


@pytest.mark.parametrize(
    "given", ["yesterday", "2024-13-01", "2024-02-30", "2024-03-10T12:00", "10.03.2024", ""]
)
def test_a_bad_exclude_newer_is_exit_2_with_an_example(given: str) -> None:
    with pytest.raises(UsageError) as e:
        exclude_newer(given)
    assert e.value.exit_code == 2
    assert "--exclude-newer 2024-03-10" in (e.value.hint or "")


def test_upload_times_are_compared_strictly_and_unknown_is_not_before() -> None:
    assert uploaded_before("2024-03-09T23:59:59.999999Z", "2024-03-10T00:00:00Z")
    assert not uploaded_before("2024-03-10T00:00:00Z", "2024-03-10T00:00:00Z")
    assert not uploaded_before("", "2024-03-10T00:00:00Z")


def test_uv_gets_the_instant_as_its_flag_not_a_bare_date() -> None:
    from envlock.lock.uv import uv_env
    from envlock.lockplatform import Target

    cmd = compile_command(
        "r.in", "out.toml", Target.for_lock("3.11", None), "http://x/simple",
        offline=False, exclude_newer="2024-03-10T00:00:00Z",
    )  # fmt: skip
    i = cmd.index("--exclude-newer")
    assert cmd[i + 1] == "2024-03-10T00:00:00Z"
    # the environment variable stays out: only the flag decides
    import os

    os.environ["UV_EXCLUDE_NEWER"] = "2020-01-01"
    try:
        assert "UV_EXCLUDE_NEWER" not in uv_env()
    finally:
        del os.environ["UV_EXCLUDE_NEWER"]


def test_uv_never_downloads_an_interpreter_for_a_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    """A lock targets --python-version with wheels only: uv must not fetch a managed
    Python for it, even when the user's environment allows downloads."""
    from envlock.lock.uv import uv_env

    monkeypatch.setenv("UV_PYTHON_DOWNLOADS", "automatic")
    assert uv_env()["UV_PYTHON_DOWNLOADS"] == "never"


# ------------------------------------------------------------ lock --exclude-newer


def test_uv_locks_only_files_uploaded_before_the_instant(index: FakeIndex, tmp_path: Path) -> None:
    assert versions(_lock(index, tmp_path))["dep-a"] == "1.9"
    assert versions(_lock(index, tmp_path, before="2024-03-01T00:00:00Z"))["dep-a"] == "1.5"
    lk = _lock(index, tmp_path, before="2024-02-01T00:00:00Z")
    assert versions(lk) == {"dep-a": "1.0", "dep-c": "1.0", "fakefw": "2.15.1"}
    # recorded in the lock, written into its regenerate line, read back the same
    assert lk.input.exclude_newer == "2024-02-01T00:00:00Z"
    text = pylock_text(lk)
    assert 'exclude_newer = "2024-02-01T00:00:00Z"' in text
    assert parse_pylock(text, "x").input.exclude_newer == "2024-02-01T00:00:00Z"
    assert "--exclude-newer 2024-02-01T00:00:00Z" in regenerate_command(lk)
    assert resolve_argv(lk.input)[-2:] == ["--exclude-newer", "2024-02-01T00:00:00Z"]
    assert "uploaded before 2024-02-01T00:00:00Z" in requirements_text(lk)


def test_pip_without_uploaded_prior_to_says_which_pip_has_it() -> None:
    with pytest.raises(UsageError) as e:
        check_exclude_newer("25.3")
    assert e.value.exit_code == 2
    assert "pip 26.0 or newer" in e.value.message and "25.3" in e.value.message
    check_exclude_newer("26.0")  # no error


def test_pip_resolver_with_exclude_newer(index: FakeIndex, tmp_path: Path) -> None:
    from packaging.version import Version

    if Version(pip_version()) < Version("26.0"):
        with pytest.raises(UsageError) as e:
            _lock(index, tmp_path, resolver="pip", before="2024-02-01T00:00:00Z")
        assert "--uploaded-prior-to" in e.value.message
    else:  # pragma: no cover - a pip that has the option
        lk = _lock(index, tmp_path, resolver="pip", before="2024-02-01T00:00:00Z")
        assert versions(lk)["dep-a"] == "1.0"


@pytest.fixture(scope="module")
def pip_with_uploaded_prior_to(tmp_path_factory: pytest.TempPathFactory) -> str:
    """An interpreter whose pip has --uploaded-prior-to (26.0+), from the configured index:
    a Python's bundled pip is older."""
    from venv_support import tool_venv

    return str(tool_venv(tmp_path_factory.mktemp("pip26") / "venv", "pip>=26.0") / "python")


@pytest.mark.network
def test_pip_26_resolver_locks_only_files_uploaded_before_the_instant(
    index: FakeIndex,
    tmp_path: Path,
    pip_with_uploaded_prior_to: str,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    import sys

    from packaging.version import Version

    # envlock runs pip as "sys.executable -m pip": make that the pip 26 interpreter
    monkeypatch.setattr(sys, "executable", pip_with_uploaded_prior_to)
    pip_version.cache_clear()  # read once per process; this test changes the pip
    request.addfinalizer(pip_version.cache_clear)
    assert Version(pip_version()) >= Version("26.0")
    assert versions(_lock(index, tmp_path, resolver="pip"))["dep-a"] == "1.9"
    early = _lock(index, tmp_path, resolver="pip", before="2024-03-01T00:00:00Z")
    assert versions(early) == {"dep-a": "1.5", "dep-c": "1.0", "fakefw": "2.15.1"}
    lk = _lock(index, tmp_path, resolver="pip", before="2024-02-01T00:00:00Z")
    assert versions(lk) == {"dep-a": "1.0", "dep-c": "1.0", "fakefw": "2.15.1"}
    assert lk.input.exclude_newer == "2024-02-01T00:00:00Z"
    assert lk.resolver == "pip" and Version(lk.resolver_version) >= Version("26.0")
    # the same answer as uv's for the same instant
    assert versions(lk) == versions(_lock(index, tmp_path, before="2024-02-01T00:00:00Z"))


# ------------------------------------------------------------ --upgrade-package


@pytest.mark.parametrize("resolver", ["uv", "pip"])
def test_upgrade_package_moves_only_that_package(
    index: FakeIndex, tmp_path: Path, resolver: str
) -> None:
    old = _lock(index, tmp_path, before="2024-02-01T00:00:00Z")
    assert versions(old)["dep-a"] == "1.0" and versions(old)["dep-c"] == "1.0"
    # without --upgrade-package the earlier pins hold, though newer files exist now
    kept = _lock(index, tmp_path, resolver=resolver, previous=old)
    assert versions(kept) == versions(old)
    # dep-c moves alone; dep-a stays
    moved = _lock(index, tmp_path, resolver=resolver, previous=old, upgrade=("dep-c",))
    assert versions(moved) == {"dep-a": "1.0", "dep-c": "1.1", "fakefw": "2.15.1"}


def test_upgrade_package_brings_what_it_forces_with_uv(index: FakeIndex, tmp_path: Path) -> None:
    old = _lock(index, tmp_path, before="2024-02-01T00:00:00Z")
    moved = _lock(index, tmp_path, previous=old, upgrade=("DEP_A",))
    # dep-a 1.9 needs dep-c>=1.1: dep-c moves with it
    assert versions(moved) == {"dep-a": "1.9", "dep-c": "1.1", "fakefw": "2.15.1"}


def test_upgrade_package_names_a_locked_package(index: FakeIndex, tmp_path: Path) -> None:
    old = _lock(index, tmp_path, before="2024-02-01T00:00:00Z")
    for bad, words in (("numpy", "has no package numpy"), ("dep a", "not a project name")):
        with pytest.raises(UsageError) as e:
            _lock(index, tmp_path, previous=old, upgrade=(bad,))
        assert words in e.value.message
    with pytest.raises(UsageError, match="needs the existing lock"):
        _lock(index, tmp_path, upgrade=("dep-a",))


def test_upgrade_package_without_a_lock_in_dir_is_exit_2(index: FakeIndex, tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    request = LockRequest(
        Constraints(spec="fakefw==2.15"), output=out, index_url=index.url, upgrade=("dep-a",)
    )
    with pytest.raises(UsageError) as e:
        lock_folder(request, resolution())
    assert e.value.exit_code == 2
    assert "pylock.toml does not exist" in e.value.message
    assert "envlock lock 'fakefw==2.15' -o" in (e.value.hint or "")
    assert not (out / "pylock.toml").exists()


# ------------------------------------------------------------ the graph


def test_uv_annotations_become_the_dependency_graph() -> None:
    text = (
        "certifi==2024.2.2         # via requests\n"
        "idna==3.6                 # via requests\n"
        "requests==2.31.0          # via -r requirements.in\n"
        "urllib3==2.2.1            # via requests, -r requirements.in, -c pins.txt\n"
    )
    graph = parse_annotated(text)
    assert graph["urllib3"] == ("2.2.1", ("requests",))
    assert graph["requests"] == ("2.31.0", ())
    assert dependencies_of(graph)["requests"] == ("certifi", "idna", "urllib3")


def test_via_lines_follow_the_graph(index: FakeIndex, tmp_path: Path) -> None:
    lk = _lock(index, tmp_path, before="2024-02-01T00:00:00Z")
    lk = dataclasses.replace(lk, top_requirements=(*lk.top_requirements, "dep-c"))
    text = requirements_text(lk)
    assert "dep-a==1.0 \\\n    --hash=sha256:" in text
    block = text.split("dep-c==1.0")[1].split("fakefw==")[0]
    assert block.endswith("    # via\n    #   --with\n    #   fakefw\n")
    assert text.rstrip().endswith("# via SPEC")


# ------------------------------------------------------------ resolve


def test_resolve_leaves_out_releases_uploaded_later() -> None:
    # 2.15.0.post1 reached the index in December 2023, 2.15.1 on 2024-03-08
    early = resolve(Constraints(spec="tensorflow==2.15", exclude_newer="2024-03-01T00:00:00Z"))
    assert early.version == "2.15.0.post1"
    late = resolve(Constraints(spec="tensorflow==2.15", exclude_newer="2024-03-10T00:00:00Z"))
    assert late.version == "2.15.1"
    newest = resolve(Constraints(spec="tensorflow", exclude_newer="2024-03-10T00:00:00Z"))
    assert newest.version == "2.16.1"  # uploaded 2024-03-09; 2.16.2 came in June


def test_resolve_says_exclude_newer_removed_every_release() -> None:
    with pytest.raises(NoResolution) as e:
        resolve(Constraints(spec="tensorflow>=2.16", exclude_newer="2024-03-01T00:00:00Z"))
    text = e.value.message + " " + " ".join([e.value.hint or ""])
    assert "not before 2024-03-01T00:00:00Z" in text
    assert "--exclude-newer" in text
