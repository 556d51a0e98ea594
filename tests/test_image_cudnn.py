"""The exact cuDNN inside the nvidia/cuda cudnn images resolve picks (issue #25).

TensorFlow loads cuDNN only when its major equals the one it was built with and
its minor is at least as new, so an answer is true only when the base image's
recorded cuDNN is >= the release's (major equal). 2.22.0rc0 is built with
cuDNN 9.10: of the CUDA 12 images only 12.9.1 (9.10.2.21) carries one.
"""

from __future__ import annotations

import pytest
from packaging.version import Version

from envlock.matrix import Matrix, load, read_toml
from envlock.model import Constraints
from envlock.resolve import resolve


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    return load()


def _fits(image_cudnn: str | None, built_with: str) -> bool:
    if image_cudnn is None:
        return False
    have, need = Version(image_cudnn), Version(built_with)
    return have.major == need.major and have >= need


@pytest.mark.parametrize(
    ("os_name", "tag"),
    [
        (None, "nvidia/cuda:12.9.1-cudnn-runtime-ubuntu24.04"),
        ("ubuntu22.04", "nvidia/cuda:12.9.1-cudnn-runtime-ubuntu22.04"),
        ("ubuntu20.04", "nvidia/cuda:12.9.1-cudnn-runtime-ubuntu20.04"),
    ],
)
def test_2_22_0rc0_gets_the_image_with_cudnn_9_10(
    matrix: Matrix, os_name: str | None, tag: str
) -> None:
    res = resolve(Constraints(spec="tensorflow==2.22.0rc0", os=os_name), matrix)
    assert (res.version, res.cudnn, res.cuda_source) == ("2.22.0rc0", "9.10", "system")
    assert res.base_image == tag
    assert res.cuda_image_version == "12.9.1"
    assert res.image_cudnn == "9.10.2.21"
    assert _fits(res.image_cudnn, res.cudnn)
    assert not [w for w in res.warnings if "is not recorded" in w]
    text = "\n".join(res.reasons)
    # the newest image below 9.10 is named as refused, not used
    assert "nvidia/cuda:12.9.0-cudnn carries cuDNN 9.9.0.52, older than the 9.10" in text
    assert "nvidia/cuda:12.6.0-cudnn carries cuDNN 9.3.0.75, older than the 9.10" in text


@pytest.mark.parametrize("spec", ["tensorflow==2.19.0", "tensorflow==2.20.0", "tensorflow==2.21.0"])
def test_cudnn_9_3_builds_get_an_image_with_a_recorded_newer_cudnn(
    matrix: Matrix, spec: str
) -> None:
    res = resolve(Constraints(spec=spec), matrix)
    assert res.cudnn == "9.3"
    assert res.cuda_source == "system"
    assert _fits(res.image_cudnn, res.cudnn), (res.base_image, res.image_cudnn)
    assert not [w for w in res.warnings if "is not recorded" in w]


def test_the_recorded_cudnn_is_the_one_its_source_names() -> None:
    """Each row filled from NVIDIA's Dockerfile history says the value its source quotes."""
    doc, _digest, _shown = read_toml("cuda.toml")
    source = doc["sources"]["nvidia-dockerfile-mirrors"]
    rows = {
        im["version"]: im
        for im in doc["images"]
        if im.get("cudnn_from") == "nvidia-dockerfile-mirrors"
    }
    assert sorted(rows, key=Version) == ["12.6.0", "12.8.0", "12.9.0", "12.9.1", "13.0.0"]
    for version, row in rows.items():
        assert f"{version} {row['cudnn']}-1 " in source, version
        assert Version(row["cudnn"]).major == row["cudnn_major"]


def test_every_unversioned_cudnn_image_has_its_cudnn_recorded(matrix: Matrix) -> None:
    """The plain "cudnn" tags (12.4.1 on) say no cuDNN at all: each one's is recorded,
    but for the CUDA 13 releases whose NVIDIA Dockerfile no copy was found of (cuda.toml
    names them; no TensorFlow release is built with CUDA 13, so resolve picks none)."""
    unknown = [
        im.version for im in matrix.cuda.images if im.cudnn_flavour == "cudnn" and im.cudnn is None
    ]
    assert unknown == []
    assert not [r for r in matrix.tensorflow.releases if r.cuda and r.cuda.startswith("13.")]
