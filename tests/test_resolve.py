"""resolve() over the real matrices: every TensorFlow minor, every constraint,
and what it says when nothing fits."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from packaging.version import Version

from envlock.errors import DataError, NoResolution, UsageError
from envlock.matrix import Matrix, load, tensorflow
from envlock.resolve import Constraints, Gpu, resolve

# minor -> (release, python, cuda, cudnn, cuda_source, base image); Python: the newest
# the release has wheels for that the image's Ubuntu ships as python3 (issue 14)
EXPECTED = {
    "2.2": ("2.2.3", "3.8", "10.1", "7.6", "system", "10.1-cudnn7-runtime-ubuntu18.04"),
    "2.3": ("2.3.4", "3.8", "10.1", "7.6", "system", "10.1-cudnn7-runtime-ubuntu18.04"),
    "2.4": ("2.4.4", "3.8", "11.0", "8.0", "system", "11.0.3-cudnn8-runtime-ubuntu20.04"),
    "2.5": ("2.5.3", "3.8", "11.2", "8.1", "system", "11.2.2-cudnn8-runtime-ubuntu20.04"),
    "2.6": ("2.6.5", "3.8", "11.2", "8.1", "system", "11.2.2-cudnn8-runtime-ubuntu20.04"),
    "2.7": ("2.7.4", "3.8", "11.2", "8.1", "system", "11.2.2-cudnn8-runtime-ubuntu20.04"),
    "2.8": ("2.8.4", "3.8", "11.2", "8.1", "system", "11.2.2-cudnn8-runtime-ubuntu20.04"),
    "2.9": ("2.9.3", "3.8", "11.2", "8.1", "system", "11.2.2-cudnn8-runtime-ubuntu20.04"),
    "2.10": ("2.10.1", "3.8", "11.2", "8.1", "system", "11.2.2-cudnn8-runtime-ubuntu20.04"),
    "2.11": ("2.11.1", "3.8", "11.2", "8.1", "system", "11.2.2-cudnn8-runtime-ubuntu20.04"),
    "2.12": ("2.12.1", "3.10", "11.8", "8.6", "system", "11.8.0-cudnn8-runtime-ubuntu22.04"),
    "2.13": ("2.13.1", "3.10", "11.8", "8.6", "system", "11.8.0-cudnn8-runtime-ubuntu22.04"),
    "2.14": ("2.14.1", "3.10", "11.8", "8.7", "system", "11.8.0-cudnn8-runtime-ubuntu22.04"),
    "2.15": ("2.15.1", "3.10", "12.2", "8.9", "system", "12.2.2-cudnn8-runtime-ubuntu22.04"),
    "2.16": ("2.16.2", "3.10", "12.3", "8.9", "pip", "12.3.2-base-ubuntu22.04"),
    "2.17": ("2.17.1", "3.10", "12.3", "8.9", "pip", "12.3.2-base-ubuntu22.04"),
    "2.18": ("2.18.1", "3.12", "12.5", "9.3", "system", "12.6.3-cudnn-runtime-ubuntu24.04"),
    "2.19": ("2.19.1", "3.12", "12.5", "9.3", "system", "12.6.3-cudnn-runtime-ubuntu24.04"),
    "2.20": ("2.20.0", "3.12", "12.5", "9.3", "system", "12.6.3-cudnn-runtime-ubuntu24.04"),
    "2.21": ("2.21.0", "3.12", "12.5", "9.3", "system", "12.6.3-cudnn-runtime-ubuntu24.04"),
}


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    return load()


def test_every_minor_in_the_matrix_is_covered(matrix: Matrix) -> None:
    minors = {f"{r.version.major}.{r.version.minor}" for r in matrix.tensorflow.releases}
    # 2.0: CPU-only wheels; 2.1: Python 3.5-3.7 only (tests/test_resolve_python_floor.py)
    # 2.22: a release candidate only (tests/test_prerelease.py)
    assert minors == set(EXPECTED) | {"2.0", "2.1", "2.22"}


@pytest.mark.parametrize("minor", sorted(EXPECTED, key=Version))
def test_each_minor(matrix: Matrix, minor: str) -> None:
    version, python, cuda, cudnn, source, tag = EXPECTED[minor]
    res = resolve(Constraints(spec=f"tensorflow=={minor}"), matrix)
    assert (res.version, res.python, res.cuda, res.cudnn, res.cuda_source) == (
        version,
        python,
        cuda,
        cudnn,
        source,
    )
    assert res.base_image == f"nvidia/cuda:{tag}"
    assert res.os == "ubuntu" + tag.rsplit("ubuntu", 1)[1]
    rel = matrix.tensorflow.get(version)
    assert rel is not None
    assert res.python_supported == rel.python
    # the Ubuntu's own python3 when the release has a wheel for it, else the newest wheel
    shipped = res.os_python in rel.python and Version(res.os_python or "0") >= Version("3.8")
    assert res.python == (res.os_python if shipped else rel.python[-1])
    assert res.compute_capabilities == rel.compute_capabilities
    assert res.and_cuda == rel.and_cuda
    assert res.requires_python == rel.requires_python
    assert res.matrix_version == matrix.data_version
    assert res.matrix_digest == matrix.digest
    drivers = {"12": "525.60.13", "11": "450.80.02", "10": "418.39"}
    assert res.driver_min == drivers[cuda.split(".")[0]]
    assert res.reasons and res.reasons[0].startswith(f"tensorflow {version}: the newest release")
    if source == "system":
        # the image's cuDNN has the compiled major and at least the compiled minor
        assert res.image_cudnn is not None or minor == "2.4"
        if res.image_cudnn:
            assert Version(res.image_cudnn).major == Version(cudnn).major
            assert Version(res.image_cudnn) >= Version(cudnn)
        assert "-cudnn" in tag and "-runtime-" in tag
    else:
        assert res.image_cudnn is None and "-base-" in tag
        assert any(r.startswith("nvidia-cudnn-cu12") for r in res.and_cuda)


def test_2_0_wheels_are_cpu_only(matrix: Matrix) -> None:
    with pytest.raises(NoResolution) as err:
        resolve(Constraints(spec="tensorflow==2.0"), matrix)
    assert "2.0.x wheels are CPU-only builds" in err.value.message
    # 2.1 is a GPU build, but only for Pythons older than the smoke harness runs on
    assert err.value.hint == "the nearest GPU build is tensorflow>=2.2"


def test_plain_tensorflow_is_the_newest(matrix: Matrix) -> None:
    res = resolve(Constraints(), matrix)
    newest = max(r.version for r in matrix.tensorflow.releases if not r.prerelease)
    assert res.version == str(newest)


def test_newer_cudnn_minor_needed_skips_the_same_cuda_minor_image(matrix: Matrix) -> None:
    """2.18+ are built with cuDNN 9.3; 12.5.1-cudnn carries 9.2.1 and must not be used."""
    res = resolve(Constraints(spec="tensorflow==2.18", os="ubuntu22.04"), matrix)
    assert res.base_image == "nvidia/cuda:12.6.3-cudnn-runtime-ubuntu22.04"
    assert res.image_cudnn == "9.5.1.17"
    assert res.cuda_image_version == "12.6.3"
    text = "\n".join(res.reasons)
    assert "12.5.1-cudnn carries cuDNN 9.2.1.18, older than the 9.3" in text
    assert "minor-version compatibility" in text
    # without --driver nothing is judged, but the image's own requirement is said
    assert "NVIDIA_REQUIRE_CUDA asks for a driver that supports CUDA 12.6 (>= 560.28.03)" in text
    assert not any("NVIDIA_DISABLE_REQUIRE" in w for w in res.warnings)


def test_2_16_system_source_fails_with_the_alternatives(matrix: Matrix) -> None:
    with pytest.raises(NoResolution) as err:
        resolve(Constraints(spec="tensorflow==2.16", cuda_source="system"), matrix)
    assert "no nvidia/cuda cudnn image carries cuDNN 8.x >= 8.9 with CUDA 12.3" in err.value.message
    assert err.value.hint is not None
    assert "tensorflow>=2.18" in err.value.hint
    assert "--cuda-source pip (nvidia/cuda:12.3.2-base-ubuntu22.04)" in err.value.hint


def test_2_16_default_falls_back_to_pip_with_a_warning(matrix: Matrix) -> None:
    res = resolve(Constraints(spec="tensorflow==2.16"), matrix)
    assert res.cuda_source == "pip"
    assert res.warnings[0].startswith("CUDA source pip, not system: no nvidia/cuda cudnn image")


def test_and_cuda_extra_means_pip(matrix: Matrix) -> None:
    res = resolve(Constraints(spec="tensorflow[and-cuda]==2.15"), matrix)
    assert (res.cuda_source, res.base_image) == ("pip", "nvidia/cuda:12.2.2-base-ubuntu22.04")
    with pytest.raises(UsageError, match=r"asks for \[and-cuda\] but --cuda-source is system"):
        resolve(Constraints(spec="tensorflow[and-cuda]==2.15", cuda_source="system"), matrix)


def test_pip_source_needs_the_and_cuda_extra(matrix: Matrix) -> None:
    with pytest.raises(NoResolution) as err:
        resolve(Constraints(spec="tensorflow==2.13", cuda_source="pip"), matrix)
    assert err.value.message == (
        "nothing fits: tensorflow 2.13.x: no and-cuda extra to take CUDA from "
        "(the nvidia-* CUDA wheels start with tensorflow 2.14)"
    )
    assert err.value.hint == (
        "use tensorflow>=2.14; or --cuda-source system "
        "(nvidia/cuda:11.8.0-cudnn8-runtime-ubuntu22.04)"
    )


@pytest.mark.parametrize(
    ("spec", "version"),
    [
        ("tensorflow==2.15", "2.15.1"),
        ("tensorflow==2.15.0", "2.15.0"),
        ("tensorflow==2.15.0.post1", "2.15.0.post1"),
        ("tensorflow==2.15.*", "2.15.1"),
        ("tensorflow~=2.13.0", "2.13.1"),
        ("tensorflow~=2.13", "2.21.0"),
        ("tensorflow>=2.14,<2.17", "2.16.2"),
        ("tensorflow<2.15", "2.14.1"),
        ("tensorflow!=2.21.0", "2.20.0"),
        ("tensorflow==2.15.1", "2.15.1"),
        ("tensorflow===2.15.1", "2.15.1"),
        ("TensorFlow==2.15", "2.15.1"),
        ("  tensorflow  ==  2.12  ", "2.12.1"),
    ],
)
def test_spec_semantics(matrix: Matrix, spec: str, version: str) -> None:
    assert resolve(Constraints(spec=spec), matrix).version == version


def _with_release(matrix: Matrix, version: str, **changes: object) -> Matrix:
    """The real matrix with one row changed or a row added (copied from another)."""
    tf = matrix.tensorflow
    rows = list(tf.releases)
    like = str(changes.pop("like", version))
    base = next(r for r in rows if str(r.version) == like)
    new = replace(base, version=Version(version), **changes)
    rows = [r for r in rows if r.version != new.version] + [new]
    rows.sort(key=lambda r: r.version)
    return replace(matrix, tensorflow=replace(tf, releases=tuple(rows)))


def test_yanked_release_only_when_pinned_exactly(matrix: Matrix) -> None:
    m = _with_release(matrix, "2.15.1", yanked=True)
    assert resolve(Constraints(spec="tensorflow==2.15"), m).version == "2.15.0.post1"
    pinned = resolve(Constraints(spec="tensorflow==2.15.1"), m)
    assert pinned.version == "2.15.1"
    assert any("yanked" in w for w in pinned.warnings)


def test_a_prerelease_spec_the_matrix_lacks_says_which_it_has(matrix: Matrix) -> None:
    with pytest.raises(NoResolution) as err:
        resolve(Constraints(spec="tensorflow==2.23.0rc0"), matrix)
    assert err.value.message == "no tensorflow release matches 'tensorflow==2.23.0rc0'"
    assert err.value.hint == (
        "the matrix's pre-releases are tensorflow 2.6.0rc0 to 2.22.0rc0; "
        "the matrix has tensorflow 2.0.0 to 2.21.0"
    )
    # a dev-release row is refused when the matrix is read
    doc = matrix.tensorflow.to_dict()
    doc["releases"][-1]["version"] = "2.23.0.dev20260101"
    with pytest.raises(DataError, match=r"version: expected a final, post or pre-release"):
        tensorflow.parse(doc, "matrices/tensorflow.toml")


def test_python_constraint(matrix: Matrix) -> None:
    res = resolve(Constraints(spec="tensorflow", python="3.9"), matrix)
    assert res.python == "3.9"
    rel = matrix.tensorflow.get(res.version)
    assert rel is not None and "3.9" in rel.python
    newer = [r for r in matrix.tensorflow.releases if r.version > rel.version]
    assert newer and all("3.9" not in r.python for r in newer)
    assert any(r.startswith("newer tensorflow") and "--python 3.9" in r for r in res.reasons)


def test_python_error_names_the_range_and_the_way_out(matrix: Matrix) -> None:
    with pytest.raises(NoResolution) as err:
        resolve(Constraints(spec="tensorflow==2.15", python="3.12"), matrix)
    assert err.value.message == (
        "nothing fits: tensorflow 2.15.x supports Python 3.9-3.11; there is no Python 3.12 wheel"
    )
    assert err.value.hint == (
        "for Python 3.12 use tensorflow>=2.16; "
        "or drop --python to get the newest Python the release supports"
    )
    with pytest.raises(NoResolution) as err:
        resolve(Constraints(spec="tensorflow>=2.14", python="3.8"), matrix)
    assert (err.value.hint or "").startswith("for Python 3.8 use tensorflow==2.13")


def test_driver_constraint(matrix: Matrix) -> None:
    res = resolve(Constraints(spec="tensorflow", driver="470.82.01"), matrix)
    assert res.version == "2.14.1" and res.cuda == "11.8"
    assert Version(res.driver_min) <= Version("470.82.01")
    with pytest.raises(NoResolution) as err:
        resolve(Constraints(spec="tensorflow>=2.15", driver="470.82.01"), matrix)
    assert err.value.message == (
        "nothing fits: tensorflow 2.15.0-2.21.0: CUDA 12.x builds need driver >= 525.60.13, "
        "and the driver is 470.82.01"
    )
    assert err.value.hint == (
        "with driver 470.82.01 use tensorflow==2.14; or upgrade the driver to >= 525.60.13"
    )
    assert resolve(Constraints(spec="tensorflow", driver="525.60.13"), matrix).version == "2.21.0"


def test_cuda_and_cudnn_constraints(matrix: Matrix) -> None:
    assert resolve(Constraints(cuda="11.8"), matrix).version == "2.14.1"
    assert resolve(Constraints(cuda="11"), matrix).version == "2.14.1"
    assert resolve(Constraints(cudnn="8.6"), matrix).version == "2.13.1"
    assert resolve(Constraints(cudnn="8"), matrix).version == "2.17.1"
    with pytest.raises(NoResolution, match=r"tensorflow 2.15.x was built with CUDA 12.2, not 11.8"):
        resolve(Constraints(spec="tensorflow==2.15", cuda="11.8"), matrix)


def test_os_constraint(matrix: Matrix) -> None:
    res = resolve(Constraints(spec="tensorflow==2.15", os="ubuntu20.04"), matrix)
    assert res.base_image == "nvidia/cuda:12.2.2-cudnn8-runtime-ubuntu20.04"
    assert res.os_python == "3.8"
    # no 12.2 image on 24.04: the default source moves to pip, an explicit system fails
    res = resolve(Constraints(spec="tensorflow==2.15", os="ubuntu24.04"), matrix)
    assert res.cuda_source == "pip" and res.os == "ubuntu24.04"
    with pytest.raises(NoResolution) as err:
        resolve(
            Constraints(spec="tensorflow==2.15", os="ubuntu24.04", cuda_source="system"), matrix
        )
    assert "12.2.2 (ubuntu20.04, ubuntu22.04)" in err.value.message
    assert "drop --os (nvidia/cuda:12.2.2-cudnn8-runtime-ubuntu22.04)" in (err.value.hint or "")


def test_os_prefers_the_one_whose_python_is_the_chosen_one(matrix: Matrix) -> None:
    res = resolve(Constraints(spec="tensorflow==2.18"), matrix)
    assert (res.python, res.os, res.os_python) == ("3.12", "ubuntu24.04", "3.12")
    res = resolve(Constraints(spec="tensorflow==2.18", python="3.10"), matrix)
    assert (res.os, res.os_python) == ("ubuntu22.04", "3.10")
    assert any("its own python3 is 3.10" in r for r in res.reasons)


def test_end_of_life_warnings(matrix: Matrix) -> None:
    old = resolve(Constraints(spec="tensorflow==2.3"), matrix)
    assert any("is gone: CUDA 10 images were deleted" in w for w in old.warnings)
    eol = resolve(Constraints(spec="tensorflow==2.14"), matrix)
    assert any("is end-of-life" in w and "pin it by digest" in w for w in eol.warnings)
    r535 = resolve(Constraints(spec="tensorflow==2.15"), matrix)
    assert any("driver branch R535, supported until 2026-06" in w for w in r535.warnings)


def test_gpu_warnings(matrix: Matrix) -> None:
    hopper = Gpu(name="NVIDIA H200")
    res = resolve(Constraints(spec="tensorflow==2.15", gpus=(hopper,)), matrix)
    assert any(
        "GPU NVIDIA H200 (compute capability 9.0) has no compiled kernels" in w
        and "JIT-compiled from compute_80 PTX" in w
        for w in res.warnings
    )
    res = resolve(Constraints(spec="tensorflow==2.21", gpus=(hopper,)), matrix)
    # 2.17+ carry compute_90 PTX but no sm_90 binary: still JIT, from Hopper's own PTX
    assert any("H200" in w and "from compute_90 PTX" in w for w in res.warnings)
    ampere = Gpu(name="NVIDIA A10")  # 8.6 runs sm_80 binaries (2.17+), JIT before that
    res = resolve(Constraints(spec="tensorflow==2.21", gpus=(ampere,)), matrix)
    assert not any("A10" in w for w in res.warnings)
    res = resolve(Constraints(spec="tensorflow==2.15", gpus=(ampere,)), matrix)
    assert any("GPU NVIDIA A10 (compute capability 8.6)" in w for w in res.warnings)
    kepler = Gpu(name="", compute_capability="3.0")
    res = resolve(Constraints(spec="tensorflow==2.21", gpus=(kepler,)), matrix)
    assert any("a GPU (compute capability 3.0) is not supported" in w for w in res.warnings)
    ada = Gpu(name="NVIDIA GeForce RTX 4090")  # 8.9: sm_89 kernels from 2.17 on
    res = resolve(Constraints(spec="tensorflow==2.21", gpus=(ada,)), matrix)
    assert not any("RTX 4090" in w for w in res.warnings)
    with pytest.raises(UsageError, match="'NVIDIA Quadro X9' is not a GPU envlock knows"):
        resolve(Constraints(spec="tensorflow==2.21", gpus=(Gpu(name="NVIDIA Quadro X9"),)), matrix)


@pytest.mark.parametrize(
    ("constraints", "message", "hint"),
    [
        (Constraints(spec=""), "SPEC is empty", "e.g. 'tensorflow==2.15'"),
        (Constraints(spec="numpy==2.1"), "is a requirement on 'numpy'", "tensorflow==2.15"),
        (Constraints(spec="tensorflow-gpu==2.4"), "requirement on 'tensorflow-gpu'", "since 2.1"),
        (Constraints(spec="tensorflow=2.15"), "is not a valid requirement", "'tensorflow==2.15'?"),
        (Constraints(spec="tensorflow[gpu]"), "the extra 'gpu'", "[and-cuda]"),
        (Constraints(spec="tensorflow; python_version>'3'"), "environment marker", "--python"),
        (Constraints(spec="tensorflow @ file:///x.whl"), "names a URL", "tensorflow"),
        (Constraints(python="3"), "--python '3' is not a CPython minor (3.X)", "--python 3.11"),
        (Constraints(python="python3.11"), "--python 'python3.11'", "--python 3.11"),
        (Constraints(cuda="12.x"), "--cuda '12.x' is not a CUDA version", "--cuda 12.2"),
        (Constraints(cudnn="eight"), "--cudnn 'eight'", "--cudnn 8.9"),
        (Constraints(driver="latest"), "--driver 'latest' is not a driver version", "535.104.05"),
        (Constraints(driver="5"), "--driver '5'", "535.104.05"),
        (Constraints(os="jammy"), "--os 'jammy' is not a known Ubuntu release", "ubuntu22.04"),
        (Constraints(os="ubuntu19.10"), "--os 'ubuntu19.10'", "ubuntu24.04"),
        (Constraints(cuda_source="conda"), "--cuda-source 'conda'", "pip"),
    ],
)
def test_bad_input_is_one_usage_error(
    matrix: Matrix, constraints: Constraints, message: str, hint: str
) -> None:
    with pytest.raises(UsageError) as err:
        resolve(constraints, matrix)
    assert type(err.value) is UsageError
    assert message in err.value.message
    assert hint in (err.value.hint or "")
    assert "\n" not in err.value.message


def test_no_release_matches(matrix: Matrix) -> None:
    with pytest.raises(NoResolution) as err:
        resolve(Constraints(spec="tensorflow==2.22"), matrix)
    assert err.value.message == "no tensorflow release matches 'tensorflow==2.22'"
    assert err.value.hint == (
        "tensorflow 2.22.0rc0 is a pre-release, used only with --pre or when pinned "
        "(tensorflow==2.22.0rc0); the matrix has tensorflow 2.0.0 to 2.21.0"
    )


def test_matrix_cache_gives_the_same_matrix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, matrix: Matrix
) -> None:
    from envlock.resolve import load_matrix

    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(tmp_path / "cache"))
    first = load_matrix()  # parsed, then written
    files = list((tmp_path / "cache").glob("matrix-*.marshal"))
    assert len(files) == 1
    assert first == matrix
    second = load_matrix()  # read back
    assert second == matrix and second is not first
    # a damaged cache file is ignored and replaced
    files[0].write_bytes(b"not a pickle")
    assert load_matrix() == matrix
    assert files[0].read_bytes() != b"not a pickle"
    # an unwritable cache folder is not an error
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", "/proc/envlock-cache")
    assert load_matrix() == matrix


def test_detected_driver_cuda_removes_the_require_warning(matrix: Matrix) -> None:
    new = resolve(
        Constraints(spec="tensorflow==2.18", driver="580.159.04", driver_cuda="13.0"), matrix
    )
    assert not any("NVIDIA_DISABLE_REQUIRE" in w for w in new.warnings)
    assert any(
        r.startswith("driver 580.159.04, which supports CUDA 13.0: host venv: runs; container")
        and "refused" not in r
        for r in new.reasons
    )
    old = resolve(
        Constraints(spec="tensorflow==2.18", driver="555.42.06", driver_cuda="12.5"), matrix
    )
    assert any("NVIDIA_DISABLE_REQUIRE" in w for w in old.warnings)
    with pytest.raises(UsageError, match="the driver's CUDA version 'thirteen' is not X.Y"):
        resolve(Constraints(driver="580.159.04", driver_cuda="thirteen"), matrix)


# ---------------------------------------------------------------- the and-cuda extra's Pythons


def test_2_14_pip_source_takes_the_newest_python_the_and_cuda_extra_installs_on(
    matrix: Matrix,
) -> None:
    rel = matrix.tensorflow.get("2.14.1")
    assert rel is not None
    # from the index: tensorrt==8.5.3.1 has no cp311 wheel
    assert rel.and_cuda_python == ("3.9", "3.10")
    assert rel.and_cuda_python_note == "tensorrt==8.5.3.1: no cp311 wheel"
    for c in (
        Constraints(spec="tensorflow==2.14", cuda_source="pip"),
        Constraints(spec="tensorflow[and-cuda]==2.14"),
    ):
        res = resolve(c, matrix)
        assert (res.version, res.python, res.cuda_source) == ("2.14.1", "3.10", "pip")
        # python_supported keeps meaning "minors with a tensorflow wheel"
        assert res.python_supported == ("3.9", "3.10", "3.11")
        assert res.base_image == "nvidia/cuda:11.8.0-base-ubuntu22.04"
        assert res.os_python == "3.10"  # ubuntu22.04's own python3 now fits
        assert (
            "Python 3.10: the newest of 3.9-3.10 (the release's wheels) that an Ubuntu of the "
            "image ships as its own python3 (ubuntu22.04), so no standalone CPython is needed; "
            "ubuntu20.04 ships 3.8, ubuntu18.04 ships 3.6, which the release has no wheel for; "
            "every tensorflow[and-cuda] requirement has Linux x86_64 wheels for 3.9-3.10 "
            "(tensorrt==8.5.3.1: no cp311 wheel); tensorflow itself has wheels for 3.9-3.11"
        ) in res.reasons
    # an explicit Python the extra does install on is kept
    res = resolve(Constraints(spec="tensorflow==2.14", cuda_source="pip", python="3.9"), matrix)
    assert res.python == "3.9"


def test_2_14_pip_source_with_python_3_11_names_the_missing_wheel(matrix: Matrix) -> None:
    with pytest.raises(NoResolution) as err:
        resolve(Constraints(spec="tensorflow==2.14", cuda_source="pip", python="3.11"), matrix)
    assert err.value.exit_code == 2
    assert err.value.message == (
        "nothing fits: tensorflow 2.14.x: the and-cuda extra cannot be installed on "
        "Python 3.11 (tensorrt==8.5.3.1: no cp311 wheel) (after --python 3.11)"
    )
    assert err.value.hint == (
        "--python 3.10 or 3.9 (every tensorflow[and-cuda] 2.14.1 requirement has Linux "
        "x86_64 wheels for 3.9-3.10); or use tensorflow>=2.15; or --cuda-source system "
        "(nvidia/cuda:11.8.0-cudnn8-runtime-ubuntu22.04)"
    )
    # with [and-cuda] in the SPEC, the way to the system source is to drop it
    with pytest.raises(NoResolution) as err:
        resolve(Constraints(spec="tensorflow[and-cuda]==2.14", python="3.11"), matrix)
    assert err.value.hint is not None
    assert err.value.hint.startswith("--python 3.10 or 3.9 ")
    assert err.value.hint.endswith(
        "; or drop [and-cuda] for CUDA from the image "
        "(nvidia/cuda:11.8.0-cudnn8-runtime-ubuntu22.04)"
    )
    assert "--cuda-source system" not in err.value.hint


def test_system_source_is_unaffected_by_the_and_cuda_extra(matrix: Matrix) -> None:
    for c in (
        Constraints(spec="tensorflow==2.14", python="3.11"),
        Constraints(spec="tensorflow==2.14", python="3.11", cuda_source="system"),
    ):
        res = resolve(c, matrix)
        assert (res.python, res.cuda_source) == ("3.11", "system")
    # by default: ubuntu22.04's own python3 (issue 14), not the newest wheel
    assert resolve(Constraints(spec="tensorflow==2.14"), matrix).python == "3.10"


def test_a_release_whose_and_cuda_extra_installs_nowhere(matrix: Matrix) -> None:
    rel = matrix.tensorflow.get("2.15.0")
    assert rel is not None and rel.and_cuda_python == ()
    with pytest.raises(NoResolution) as err:
        resolve(Constraints(spec="tensorflow==2.15.0", cuda_source="pip"), matrix)
    assert err.value.message.startswith(
        "nothing fits: tensorflow 2.15.0: the and-cuda extra cannot be installed on any "
        "Python (tensorrt==8.6.1.post1: only an sdist, no Linux x86_64 wheel"
    )
    # the series still resolves with the pip source: 2.15.1 has no tensorrt pin
    res = resolve(Constraints(spec="tensorflow==2.15", cuda_source="pip"), matrix)
    assert (res.version, res.python) == ("2.15.1", "3.10")


def test_pip_fallback_python_follows_the_and_cuda_extra(matrix: Matrix) -> None:
    """The 2.16/2.17 fallback to pip picks its Python from and_cuda_python too."""
    grown = replace(
        matrix.tensorflow,
        releases=tuple(
            replace(
                r,
                and_cuda_python=tuple(p for p in r.and_cuda_python if p not in ("3.10", "3.12")),
                and_cuda_python_note="tensorrt==1: no cp310 or cp312 wheel",
            )
            if str(r.version) == "2.16.2"
            else r
            for r in matrix.tensorflow.releases
        ),
    )
    m = replace(matrix, tensorflow=grown)
    res = resolve(Constraints(spec="tensorflow==2.16.2"), m)
    # ubuntu22.04's 3.10 has no and-cuda wheels here: a standalone 3.11
    assert (res.cuda_source, res.python) == ("pip", "3.11")
    assert res.python_supported[-1] == "3.12"
