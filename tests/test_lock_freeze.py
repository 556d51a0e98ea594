"""-r FILE that is a ``pip freeze``: the framework line and nvidia CUDA wheels.

Against the local fake index of test_lock (framework "fakefw").
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from fixtures.index.fakeindex import FakeIndex
from test_lock import FW_TAG, resolution

from envlock.bundle.folder import LockRequest, lock_input
from envlock.errors import UsageError
from envlock.lock import lock
from envlock.lock.freeze import is_cuda_wheel, split_frozen
from envlock.model import Constraints


@pytest.fixture(scope="module")
def index(make_module_index: Callable[..., FakeIndex]) -> FakeIndex:
    idx = make_module_index()
    idx.add_dist(
        "fakefw",
        "2.15.1",
        tag=FW_TAG,
        requires=("dep-a>=1,<2",),
        extras={"and-cuda": ("nvidia-fake-cu12==12.2.1",)},
    )
    for v in ("1.0", "1.5"):
        idx.add_dist("dep-a", v)
    idx.add_dist("nvidia-fake-cu12", "12.2.1", tag="py3-none-manylinux1_x86_64")
    idx.add_dist("nvidia-fake-cu12", "12.1.0", tag="py3-none-manylinux1_x86_64")
    return idx


def _freeze(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "freeze.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _request(tmp_path: Path, freeze: Path) -> LockRequest:
    return LockRequest(
        Constraints(spec="fakefw==2.15.1"),
        output=tmp_path / "env",
        requirement_files=(str(freeze),),
    )


@pytest.mark.parametrize("source", ["system", "pip"])
def test_a_freeze_naming_the_framework_locks(index: FakeIndex, tmp_path: Path, source: str) -> None:
    freeze = _freeze(tmp_path, "dep-a==1.0", "fakefw==2.15.1", "nvidia-fake-cu12==12.1.0")
    res = resolution(source)
    notes: list[str] = []
    given = lock_input(_request(tmp_path, freeze), res, notes)
    assert given.with_requirements == ("dep-a==1.0",)
    locked = lock(res, given, index_url=index.url, cache_dir=str(tmp_path / "uv"))
    got = {p.name: p.version for p in locked.packages}
    expected = {"fakefw": "2.15.1", "dep-a": "1.0"}
    if source == "pip":  # the release's and-cuda pin, not the freeze's 12.1.0
        expected["nvidia-fake-cu12"] = "12.2.1"
    assert got == expected
    assert (
        notes[0] == f"-r {freeze}: fakefw==2.15.1 agrees with SPEC (fakefw 2.15.1); "
        "the release comes from SPEC"
    )
    assert notes[1].startswith(
        f"-r {freeze}: 1 nvidia CUDA wheel(s) left out (nvidia-fake-cu12): "
        f"CUDA source {source} decides them"
    )


def test_a_freeze_with_another_release_names_both(tmp_path: Path) -> None:
    freeze = _freeze(tmp_path, "fakefw==2.14.0", "dep-a==1.0")
    with pytest.raises(UsageError) as e:
        lock_input(_request(tmp_path, freeze), resolution())
    assert e.value.exit_code == 2
    assert e.value.message == (
        f"-r {freeze}: 'fakefw==2.14.0' conflicts with SPEC, which resolved to fakefw 2.15.1"
    )
    assert "fakefw==2.14.0" in str(e.value.hint)


def test_framework_aliases_and_extras() -> None:
    kept = split_frozen(
        [
            "tensorflow-intel==2.15.1",
            "tensorflow[and-cuda]==2.15.1",
            "tensorflow-cpu>=2.15",
            "tensorboard==2.15.2",
            "nvidia-ml-py==12.535.133",
            "nvidia-cudnn-cu12==8.9.4.25",
        ],
        framework="tensorflow",
        version="2.15.1",
        cuda_source="system",
        origin="-r f",
    )
    assert kept.kept == ("tensorboard==2.15.2", "nvidia-ml-py==12.535.133")
    with pytest.raises(UsageError, match="'tensorflow-cpu==2.14.1' conflicts with SPEC"):
        split_frozen(
            ["tensorflow-cpu==2.14.1"],
            framework="tensorflow",
            version="2.15.1",
            cuda_source="system",
            origin="-r f",
        )
    assert is_cuda_wheel("nvidia_cublas_cu11") and not is_cuda_wheel("nvidia-ml-py")


@pytest.fixture()
def tf_index(make_index: Callable[..., FakeIndex]) -> FakeIndex:
    """tensorflow 2.15.1 (cp39-cp311 wheels), and a pin whose newest release needs 3.11."""
    idx = make_index()
    for py in ("39", "310", "311"):
        idx.add_dist("tensorflow", "2.15.1", tag=f"cp{py}-cp{py}-manylinux_2_17_x86_64")
    idx.add_dist("markdown", "3.5.2")
    idx.add_dist("markdown", "3.11.3", requires_python=">=3.11")
    return idx


def test_a_freeze_of_a_newer_python_locks_for_the_python_its_pins_need(
    tf_index: FakeIndex,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A freeze made under Python 3.11 locks as it stands: resolve's default for
    2.15 is 3.10, the pins need 3.11, so the lock is for 3.11 and says why; the
    lock checks as current; an explicit --python still wins."""
    import json

    from envlock.cli import main
    from envlock.lock import read_lock

    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv"))
    freeze = _freeze(tmp_path, "Markdown==3.11.3", "tensorflow==2.15.1")
    out = tmp_path / "env"
    argv = ["lock", "tensorflow==2.15.1", "-r", str(freeze), "--index-url", tf_index.url]
    assert main([*argv, "-o", str(out), "--json"]) == 0
    locked = json.loads(capsys.readouterr().out)
    assert locked["resolution"]["python"] == "3.11"
    why = [r for r in locked["resolution"]["reasons"] if r.startswith("Python 3.11")]
    assert why == [
        "Python 3.11: the newest that tensorflow 2.15.1 and your pins allow "
        "(Markdown==3.11.3 needs Python >=3.11); wheels exist for 3.9-3.11; no Ubuntu of "
        "the image ships python3 3.11, so a standalone CPython is installed (uv python install)"
    ]
    assert read_lock(out).input.constraints.python is None  # chosen, not asked
    assert main(["lock", "--check", str(out)]) == 0
    capsys.readouterr()
    code = main([*argv, "--python", "3.10", "-o", str(tmp_path / "explicit")])
    err = capsys.readouterr().err
    assert code == 2 and "Markdown==3.11.3 needs Python >=3.11" in err
    assert "pass --python 3.11" in err
