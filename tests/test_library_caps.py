"""Per-GPU library caps (issue 26): matrices/libraries.toml, its validation, the
cap derivation for P100, V100, T4, A100 and H100, and a lock through a local
index (127.0.0.1, real uv and pip) that meets the caps, says why, and warns
without --gpu. No network.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fixtures.index.fakeindex import FakeIndex

from envlock.errors import DataError, NoResolution
from envlock.lock import lock, pylock_text, read_lock
from envlock.matrix import libraries, load_gpus, load_tensorflow, read_toml
from envlock.model import Constraints, Gpu, LockInput, Resolution

V100_CAP = "nvidia-cudnn-cu12<9.11"
XLA_CAP = "nvidia-cudnn-cu12!=9.5.*"


@pytest.fixture(scope="module")
def shipped() -> libraries.LibraryMatrix:
    return libraries.load()


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    data, _digest, _shown = read_toml(libraries.FILENAME)
    return data


def _and_cuda(version: str) -> tuple[str, ...]:
    rel = next(r for r in load_tensorflow().releases if str(r.version) == version)
    return tuple(rel.and_cuda)


def _gpu(name: str) -> tuple[str, str]:
    entry = load_gpus().lookup(name)
    assert entry is not None, name
    return name, entry.compute_capability


# ------------------------------------------------------------------ the file


def test_shipped_file_validates_and_every_source_is_a_url(
    shipped: libraries.LibraryMatrix,
) -> None:
    assert shipped.caps, "libraries.toml lists no caps"
    for cap in shipped.caps:
        urls = shipped.urls(cap)
        assert urls and all(u.startswith("https://") for u in urls), cap
    by_versions = {c.versions: c for c in shipped.caps}
    volta = by_versions[">=9.11"]
    assert (volta.cap, volta.kind, volta.path) == ("<9.11", "dropped", "cudnn")
    assert "https://github.com/conda-forge/tensorflow-feedstock/pull/457" in shipped.urls(volta)
    xla = by_versions["==9.5.*"]
    assert (xla.cap, xla.kind, xla.path, xla.works_from) == (
        "!=9.5.*",
        "broken",
        "xla",
        "9.24.0.43",
    )
    assert "https://github.com/aws/deep-learning-containers/pull/6432" in shipped.urls(xla)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["caps"][0].update(versions=">=9.5,<9.6"), "expected one clause"),
        (lambda d: d["caps"][0].update(versions="~=9.5"), "no one-clause complement"),
        (lambda d: d["caps"][0].update(versions="nine"), "not a version specifier"),
        (lambda d: d["caps"][0].update(package="NVIDIA_cudnn_cu12"), "normalized name"),
        (lambda d: d["caps"][0].update(kind="gone"), 'expected one of "dropped", "broken"'),
        (lambda d: d["caps"][0].update(path="tensor-cores"), 'expected one of "kernels"'),
        (lambda d: d["caps"][0].update(compute_capability="seven"), "not a version specifier"),
        (lambda d: d["caps"][0].update(framework="tensorflow=2.21"), "not a requirement"),
        (lambda d: d["caps"][0].update(works_from="9.24.0.43"), 'only a "broken" entry'),
        (lambda d: d["caps"][1].update(works_from="9.5.1.17"), "is inside versions"),
        (lambda d: d["caps"][0].update(**{"from": ["nowhere"]}), "is not a key of [sources]"),
        (lambda d: d["caps"][0].update(**{"from": []}), "expected a non-empty list"),
        (lambda d: d["caps"][0].update(extra="x"), "extra"),
        (lambda d: d["caps"][0].pop("effect"), "caps[0].effect: missing"),
        (lambda d: d["sources"].update(bad="a description without its URL"), "https:// URL"),
        (lambda d: d.update(schema_version=2), "this envlock reads schema 1"),
        (lambda d: d.update(caps=[]), "non-empty array of tables"),
    ],
)
def test_a_damaged_file_is_a_data_error_naming_the_place(
    doc: dict[str, Any], edit: Callable[[dict[str, Any]], Any], message: str
) -> None:
    damaged = copy.deepcopy(doc)
    edit(damaged)
    with pytest.raises(DataError) as err:
        libraries.parse(damaged, "matrices/libraries.toml")
    assert err.value.message.startswith("matrices/libraries.toml: ")
    assert message in err.value.message


def test_matrix_check_reads_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from envlock.matrix.check import check_all

    assert "matrices/libraries.toml" in check_all().files
    broken = tmp_path / "libraries.toml"
    broken.write_text("schema_version = 1\n", encoding="utf-8")

    def read(name: str, path: Path | None = None) -> Any:
        assert name == libraries.FILENAME
        return real(name, broken)

    from envlock import matrix

    real = matrix.read_toml
    monkeypatch.setattr(matrix, "read_toml", read)
    with pytest.raises(DataError, match="data_version"):
        libraries.load_file()


# ------------------------------------------------------------------ derivation


@pytest.mark.parametrize(
    ("gpu", "version", "expected"),
    [
        # pre-Turing: cuDNN 9.11+ has no device code; on 2.21.0 the XLA range too
        ("P100", "2.21.0", (V100_CAP, XLA_CAP)),
        ("V100", "2.21.0", (V100_CAP, XLA_CAP)),
        ("T4", "2.21.0", (XLA_CAP,)),
        ("A100", "2.21.0", (XLA_CAP,)),
        ("H100", "2.21.0", (XLA_CAP,)),
        # 2.20.0 admits cuDNN 9.x too; the XLA entry names 2.21.0 only
        ("V100", "2.20.0", (V100_CAP,)),
        ("P100", "2.20.0", (V100_CAP,)),
        ("H100", "2.20.0", ()),
        # 2.15.1's and-cuda pins cuDNN 8.9.4.25: nothing to cap
        ("V100", "2.15.1", ()),
        ("P100", "2.15.1", ()),
    ],
)
def test_caps_for_each_gpu(
    shipped: libraries.LibraryMatrix, gpu: str, version: str, expected: tuple[str, ...]
) -> None:
    applied = libraries.caps_for(shipped, "tensorflow", version, _and_cuda(version), [_gpu(gpu)])
    assert libraries.constraints_of(applied) == expected
    for a in applied:
        assert a.gpus == (gpu,)
        assert a.reason().startswith(f"{a.cap.constraint} for {gpu}: ")
        assert all(url in a.reason() for url in a.urls)


def test_several_gpus_take_every_cap_once_and_name_who_needs_it(
    shipped: libraries.LibraryMatrix,
) -> None:
    gpus = [_gpu("H100"), _gpu("V100"), _gpu("P100")]
    applied = libraries.caps_for(shipped, "tensorflow", "2.21.0", _and_cuda("2.21.0"), gpus)
    assert libraries.constraints_of(applied) == (V100_CAP, XLA_CAP)
    assert {a.cap.constraint: a.gpus for a in applied} == {
        V100_CAP: ("V100", "P100"),
        XLA_CAP: ("H100", "V100", "P100"),
    }


def test_a_package_outside_and_cuda_or_another_framework_gets_no_cap(
    shipped: libraries.LibraryMatrix,
) -> None:
    assert libraries.caps_for(shipped, "tensorflow", "2.21.0", (), [_gpu("V100")]) == ()
    assert (
        libraries.caps_for(
            shipped, "tensorflow", "2.21.0", ("nvidia-cudnn-cu12<9",), [_gpu("V100")]
        )
        == ()
    )
    torch = libraries.caps_for(shipped, "torch", "2.9.0", _and_cuda("2.21.0"), [_gpu("V100")])
    assert libraries.constraints_of(torch) == (V100_CAP,)  # the drop is any framework's


def test_unverified_when_the_cap_excludes_the_verified_version(
    shipped: libraries.LibraryMatrix,
) -> None:
    v100 = libraries.caps_for(shipped, "tensorflow", "2.21.0", _and_cuda("2.21.0"), [_gpu("V100")])
    (line,) = libraries.unverified(v100, {"nvidia-cudnn-cu12": "9.10.2.21"})
    assert line.startswith(
        "unverified: nvidia-cudnn-cu12 9.10.2.21 is outside the known-bad ==9.5.*"
    )
    assert "below 9.24.0.43" in line and f"which {V100_CAP} for V100 excludes" in line
    h100 = libraries.caps_for(shipped, "tensorflow", "2.21.0", _and_cuda("2.21.0"), [_gpu("H100")])
    assert libraries.unverified(h100, {"nvidia-cudnn-cu12": "9.28.0.42"}) == ()
    assert libraries.unverified(h100, {"nvidia-cudnn-cu12": "9.24.0.43"}) == ()


def test_without_gpu_a_locked_version_in_a_range_warns_naming_the_gpus(
    shipped: libraries.LibraryMatrix,
) -> None:
    gpus = load_gpus()
    (line,) = libraries.warnings_without_gpu(
        shipped, "tensorflow", "2.21.0", {"nvidia-cudnn-cu12": "9.28.0.42"}, gpus
    )
    assert line.startswith("nvidia-cudnn-cu12 9.28.0.42 is in >=9.11, which does not work on ")
    named = libraries.affected_gpu_names(shipped.caps[0], gpus)
    assert "V100" in named and "P100" in named
    assert "T4" not in named and "A100" not in named and "H100" not in named
    assert f"--gpu {named[-1]}" in line
    assert (
        libraries.warnings_without_gpu(
            shipped, "tensorflow", "2.21.0", {"nvidia-cudnn-cu12": "9.10.2.21"}, gpus
        )
        == ()
    )
    (bad,) = libraries.warnings_without_gpu(
        shipped, "tensorflow", "2.21.0", {"nvidia-cudnn-cu12": "9.5.1.17"}, gpus
    )
    assert "does not work on every GPU" in bad


# ------------------------------------------------------------------ a lock (local index)

CUDNN = ("9.5.1.17", "9.10.2.21", "9.24.0.43", "9.28.0.42")
TF_TAG = "cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64"


@pytest.fixture(scope="module")
def index(make_module_index: Callable[..., FakeIndex]) -> FakeIndex:
    idx = make_module_index()
    idx.add_dist(
        "tensorflow",
        "2.21.0",
        tag=TF_TAG,
        extras={"and-cuda": ("nvidia-cudnn-cu12<10.0,>=9.3.0.75",)},
    )
    for v in CUDNN:
        idx.add_dist("nvidia-cudnn-cu12", v, tag="py3-none-manylinux_2_27_x86_64")
    return idx


def _resolution() -> Resolution:
    return Resolution.from_dict(
        {
            "framework": "tensorflow",
            "version": "2.21.0",
            "python": "3.11",
            "python_supported": ["3.11"],
            "cuda": "12.5",
            "cudnn": "9.3",
            "driver_min": "525.60.13",
            "compute_capabilities": ["sm_60", "sm_70", "sm_80", "compute_90"],
            "cuda_source": "pip",
            "os": "ubuntu22.04",
            "base_image": "nvidia/cuda:12.5.1-base-ubuntu22.04",
            "base_image_digest": None,
            "cuda_image_version": "12.5.1",
            "image_cudnn": None,
            "and_cuda": ["nvidia-cudnn-cu12<10.0,>=9.3.0.75"],
            "requires_python": ">=3.10",
            "matrix_version": "2026-11-30",
            "matrix_digest": "0" * 64,
            "reasons": ["tensorflow 2.21.0: as asked"],
        }
    )


def _lock_for(idx: FakeIndex, tmp_path: Path, *gpus: Gpu, resolver: str = "uv") -> Any:
    constraints = Constraints(spec="tensorflow[and-cuda]==2.21.0", gpus=tuple(gpus))
    return lock(
        _resolution(),
        LockInput(constraints),
        resolver=resolver,
        index_url=idx.url,
        cache_dir=str(tmp_path / "uv-cache"),
    )


def _cudnn(lk: Any) -> str:
    return {p.name: p.version for p in lk.packages}["nvidia-cudnn-cu12"]


@pytest.mark.parametrize("resolver", ["uv", "pip"])
def test_lock_for_v100_pins_a_cudnn_that_runs_on_volta_and_says_why(
    index: FakeIndex, tmp_path: Path, resolver: str
) -> None:
    lk = _lock_for(index, tmp_path, Gpu("V100"), resolver=resolver)
    assert _cudnn(lk) == "9.10.2.21"  # the newest below 9.11 outside 9.5.*
    why = lk.resolution.cap_reasons  # as data, and the same lines among the reasons
    assert why == libraries.cap_reasons(lk.resolution.reasons)
    assert [w.split(" for ")[0] for w in why] == [V100_CAP, XLA_CAP]
    assert "https://github.com/conda-forge/tensorflow-feedstock/pull/457" in why[0]
    assert lk.resolution.reasons[0] == "tensorflow 2.21.0: as asked"
    (unverified,) = lk.resolution.warnings
    assert unverified.startswith("unverified: nvidia-cudnn-cu12 9.10.2.21 ")
    assert lk.top_requirements == ("tensorflow[and-cuda]==2.21.0",)  # caps are constraints


def test_lock_for_t4_or_a_capability_keeps_the_newest(index: FakeIndex, tmp_path: Path) -> None:
    lk = _lock_for(index, tmp_path, Gpu("T4"))
    assert _cudnn(lk) == "9.28.0.42"
    assert lk.resolution.warnings == ()
    assert [w.split(" for ")[0] for w in libraries.cap_reasons(lk.resolution.reasons)] == [XLA_CAP]
    pascal = _lock_for(index, tmp_path, Gpu("", compute_capability="6.1"))
    assert _cudnn(pascal) == "9.10.2.21"
    assert "for compute capability 6.1: " in libraries.cap_reasons(pascal.resolution.reasons)[0]


def test_lock_without_gpu_warns_and_names_the_gpus(index: FakeIndex, tmp_path: Path) -> None:
    lk = _lock_for(index, tmp_path)
    assert _cudnn(lk) == "9.28.0.42"
    assert libraries.cap_reasons(lk.resolution.reasons) == lk.resolution.cap_reasons == ()
    (warning,) = lk.resolution.warnings
    assert warning.startswith("nvidia-cudnn-cu12 9.28.0.42 is in >=9.11, which does not work on ")
    assert "V100" in warning and "P100" in warning


def test_the_recorded_lock_derives_the_same_caps_again(index: FakeIndex, tmp_path: Path) -> None:
    """lock --check recomputes from the recorded input: the caps come back."""
    first = _lock_for(index, tmp_path, Gpu("V100"))
    folder = tmp_path / "bundle"
    folder.mkdir()
    (folder / "pylock.toml").write_text(pylock_text(first), encoding="utf-8")
    recorded = read_lock(folder)
    assert recorded.input.constraints.gpus == (Gpu("V100"),)
    again = lock(
        _resolution(),
        recorded.input,
        index_url=index.url,
        cache_dir=str(tmp_path / "uv-cache"),
    )
    assert pylock_text(again) == pylock_text(first)
    assert _cudnn(again) == "9.10.2.21"


def test_an_earlier_lock_above_the_cap_is_no_preference(index: FakeIndex, tmp_path: Path) -> None:
    previous = _lock_for(index, tmp_path)  # 9.28.0.42, made without --gpu
    constraints = Constraints(spec="tensorflow[and-cuda]==2.21.0", gpus=(Gpu("V100"),))
    for resolver in ("uv", "pip"):
        lk = lock(
            _resolution(),
            LockInput(constraints),
            resolver=resolver,
            index_url=index.url,
            cache_dir=str(tmp_path / "uv-cache"),
            previous=previous,
        )
        assert _cudnn(lk) == "9.10.2.21", resolver


@pytest.mark.parametrize("resolver", ["uv", "pip"])
def test_a_pin_against_a_cap_names_the_cap_and_its_source(
    index: FakeIndex, tmp_path: Path, resolver: str
) -> None:
    constraints = Constraints(spec="tensorflow[and-cuda]==2.21.0", gpus=(Gpu("V100"),))
    with pytest.raises(NoResolution) as err:
        lock(
            _resolution(),
            LockInput(constraints, with_requirements=("nvidia-cudnn-cu12==9.28.0.42",)),
            resolver=resolver,
            index_url=index.url,
            cache_dir=str(tmp_path / "uv-cache"),
        )
    assert err.value.message.startswith(
        f"your pin nvidia-cudnn-cu12==9.28.0.42 conflicts with the library cap {V100_CAP} "
        "of this lock for V100 (compute capability 7.0): "
    )
    assert "https://github.com/conda-forge/tensorflow-feedstock/pull/457" in err.value.message
    assert err.value.hint is not None and f"--with '{V100_CAP}'" in err.value.hint
