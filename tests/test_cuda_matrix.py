"""matrices/cuda.toml: the shipped file is valid and says what the sources say;
every kind of damage is a DataError naming the file and the path."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from packaging.version import Version

from envlock.errors import DataError
from envlock.matrix import cuda, load, read_toml

FILE = "matrices/cuda.toml"


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    data, _digest, shown = read_toml("cuda.toml")
    assert shown == FILE
    return data


@pytest.fixture(scope="module")
def cm(doc: dict[str, Any]) -> cuda.CudaMatrix:
    return cuda.parse(doc, FILE)


def test_load_gives_the_parsed_cuda_matrix(cm: cuda.CudaMatrix) -> None:
    loaded = load().cuda
    assert isinstance(loaded, cuda.CudaMatrix)
    assert loaded == cm
    assert cm.schema_version == 1
    assert cm.data_version == "2026-12-06"


@pytest.mark.parametrize(
    ("minor", "driver"),
    [
        ("10.0", "410.48"),
        ("10.1", "418.39"),
        ("10.2", "440.33"),
        ("11.0", "450.80.02"),
        ("11.2", "450.80.02"),
        ("11.8", "450.80.02"),
        ("12.0", "525.60.13"),
        ("12.2", "525.60.13"),
        ("12.3", "525.60.13"),
        ("12.5", "525.60.13"),
        ("12.9", "525.60.13"),
    ],
)
def test_minimum_drivers_from_the_compatibility_table(
    cm: cuda.CudaMatrix, minor: str, driver: str
) -> None:
    row = cm.release(minor)
    assert row is not None
    assert row.driver_min == driver
    assert row.driver_min_from == "compat"


@pytest.mark.parametrize("minor", ["13.0", "13.1", "13.2"])
def test_cuda_13_minimum_driver_from_the_release_notes(cm: cuda.CudaMatrix, minor: str) -> None:
    """Table 2 of the CUDA 13.2 Update 2 release notes: 13.x runs on a >= 580 driver."""
    row = cm.release(minor)
    assert row is not None
    assert row.driver_min == "580"
    assert row.driver_min_from == "toolkit-driver-table-13"
    assert ">= 580" in cm.source("toolkit-driver-table-13")


@pytest.mark.parametrize(
    ("version", "cudnn", "source"),
    [
        ("12.6.0", "9.3.0.75", "nvidia-dockerfile-mirrors"),
        ("12.8.0", "9.7.0.66", "nvidia-dockerfile-mirrors"),
        ("12.9.0", "9.9.0.52", "nvidia-dockerfile-mirrors"),
        ("12.9.1", "9.10.2.21", "nvidia-dockerfile-mirrors"),
        ("13.0.0", "9.12.0.46", "nvidia-dockerfile-mirrors"),
        ("13.0.1", "9.13.0.50", "cudnn-13-0-1"),
        ("13.1.1", "9.17.1.4", "cudnn-13-1-1"),
    ],
)
def test_exact_cudnn_read_in_nvidia_dockerfiles_or_their_copies(
    cm: cuda.CudaMatrix, version: str, cudnn: str, source: str
) -> None:
    image = next(im for im in cm.images if im.version == version)
    assert image.cudnn == cudnn
    assert image.cudnn_from == source
    assert cudnn in cm.source(source)


def test_cuda_13_images(cm: cuda.CudaMatrix) -> None:
    """replicate/cog's list of 2026-05-05: 13.x cudnn tags on Ubuntu 22.04 and 24.04 only,
    no 13.1.0; the releases whose cuDNN no copy of NVIDIA's file gave are left out."""
    thirteen = {im.version: im for im in cm.images if im.cuda.startswith("13.")}
    assert list(thirteen) == ["13.0.0", "13.0.1", "13.1.1", "13.2.0", "13.2.1"]
    for image in thirteen.values():
        assert image.os == ("22.04", "24.04")
        assert (image.cudnn_flavour, image.cudnn_major, image.source) == ("cudnn", 9, "cog")
        assert image.version in cm.source("cog")
    assert [v for v, im in thirteen.items() if im.cudnn is None] == []
    # NV_CUDNN_VERSION of NVIDIA's dist/<version>/ubuntu2404 runtime/cudnn Dockerfiles
    # (13.2.x: mirror commits 3c965d3a and f577282f; the rest: the sources they name)
    assert {v: im.cudnn for v, im in thirteen.items()} == {
        "13.0.0": "9.12.0.46",
        "13.0.1": "9.13.0.50",
        "13.1.1": "9.17.1.4",
        "13.2.0": "9.20.0.48",
        "13.2.1": "9.20.0.48",
    }


@pytest.mark.parametrize(
    ("version", "cudnn"),
    [
        ("11.8.0", "8.9.6.50"),
        ("12.1.1", "8.9.0.131"),
        ("12.2.2", "8.9.6.50"),
        ("12.4.1", "9.1.0.70"),
        ("12.5.1", "9.2.1.18"),
        ("12.6.1", "9.3.0.75"),
        ("12.6.2", "9.5.1.17"),
        ("12.6.3", "9.5.1.17"),
        ("12.8.1", "9.8.0.87"),
    ],
)
def test_exact_cudnn_inside_images_matches_the_reference_table(
    cm: cuda.CudaMatrix, version: str, cudnn: str
) -> None:
    image = next(im for im in cm.images if im.version == version)
    assert image.cudnn == cudnn
    assert image.cudnn_from == "nvidia-dockerfiles"


def test_cudnn_flavours_follow_the_tag_scheme(cm: cuda.CudaMatrix) -> None:
    """cudnn8 for 11.0.3-12.2.2, cudnn9 for 12.3.x, unversioned from 12.4.1 on."""
    for image in cm.images:
        v = Version(image.version)
        if v.major == 10:
            assert image.cudnn_flavour == "cudnn7"
        elif v < Version("12.3"):
            assert image.cudnn_flavour == "cudnn8", image.version
        elif v < Version("12.4"):
            assert image.cudnn_flavour == "cudnn9", image.version
        else:
            assert image.cudnn_flavour == "cudnn" and image.cudnn_major == 9, image.version
    assert not [im for im in cm.images if im.cuda == "12.3" and im.cudnn_major == 8]


def test_ubuntu_releases_by_cuda_release(cm: cuda.CudaMatrix) -> None:
    by_version = {im.version: im.os for im in cm.images}
    assert by_version["11.2.2"] == ("16.04", "18.04", "20.04")
    assert by_version["11.8.0"] == ("18.04", "20.04", "22.04")
    assert by_version["12.5.1"] == ("20.04", "22.04")
    assert by_version["12.6.3"] == ("20.04", "22.04", "24.04")
    assert {u.release: u.python for u in cm.ubuntu} == {
        "16.04": "3.5",
        "18.04": "3.6",
        "20.04": "3.8",
        "22.04": "3.10",
        "24.04": "3.12",
    }


def test_tags_and_their_shape(cm: cuda.CudaMatrix) -> None:
    im = next(im for im in cm.images if im.version == "12.2.2")
    assert im.tag("runtime", "22.04", cudnn=True) == "12.2.2-cudnn8-runtime-ubuntu22.04"
    assert im.tag("base", "20.04", cudnn=False) == "12.2.2-base-ubuntu20.04"
    old = next(im for im in cm.images if im.version == "10.1")
    assert old.tag("runtime", "18.04", cudnn=True) == "10.1-cudnn7-runtime-ubuntu18.04"
    assert all(im.digests == () for im in cm.images)  # none known here


def test_every_fact_names_a_known_source(doc: dict[str, Any]) -> None:
    keys = set(doc["sources"])
    for table in ("cuda", "images", "ubuntu", "driver_branches"):
        for row in doc[table]:
            for field, value in row.items():
                if field == "from" or field.endswith("_from"):
                    assert value in keys, (table, row, field)


def test_end_of_life_and_branches(cm: cuda.CudaMatrix) -> None:
    assert {r.version for r in cm.cuda if r.images == "deleted"} == {"10.0", "10.1", "10.2"}
    assert all(cm.release(f"11.{m}").images == "eol" for m in range(9))  # type: ignore[union-attr]
    r122 = cm.release("12.2")
    assert r122 is not None and r122.driver_branch == "R535"
    branch = cm.branch("R535")
    assert branch is not None and branch.ends == "2026-06"
    # NVIDIA's data-center drivers page (v620 edition): R580 ends June 2028 (an
    # earlier edition said August 2028), R595 March 2027, R620 September 2029
    assert {b.branch: b.ends for b in cm.driver_branches} == {
        "R535": "2026-06", "R570": "2026-02", "R580": "2028-06", "R595": "2027-03",
        "R620": "2029-09",
    }  # fmt: skip
    assert {r.version: r.driver_branch for r in cm.cuda if r.driver_branch} == {
        "12.2": "R535", "12.8": "R570", "13.0": "R580", "13.2": "R595"
    }  # fmt: skip


def _damaged(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    target: Any = out
    for key in path[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return out


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("schema_version",), 2, "matrices/cuda.toml: schema_version: this envlock reads schema 1"),
        (("data_version",), "yesterday", 'data_version: expected "YYYY-MM-DD", got "yesterday"'),
        (("cuda", 3, "driver_min"), "new", 'cuda[3].driver_min: expected "NNN[.NN[.NN]]"'),
        (("cuda", 3, "driver_min_from"), "rumour", 'cuda[3].driver_min_from: "rumour" is not'),
        (("cuda", 0, "images"), "gone", 'cuda[0].images: expected one of "deleted", "eol"'),
        (("cuda", 1, "version"), "10.0", 'cuda[1].version: "10.0" is listed twice (also cuda[0])'),
        (("cuda", 2, "colour"), "red", "cuda[2].colour: unknown field"),
        (("images", 4, "cudnn"), "8", 'images[4].cudnn: expected "X.Y.Z[.W]", got "8"'),
        (("images", 4, "cudnn_major"), "8", 'images[4].cudnn_major: expected an integer, got "8"'),
        (("images", 4, "cudnn_flavour"), "cudnn9", "images[4].cudnn_major: 8 does not match"),
        (("images", 4, "cuda"), "11.9", 'images[4].cuda: "11.9" is not the major.minor'),
        (("images", 4, "os"), ["19.10"], "images[4].os[0]: Ubuntu 19.10 has no [[ubuntu]] row"),
        (("images", 4, "os"), [], "images[4].os: expected a non-empty list"),
        (("images", 4, "from"), _DELETE, "images[4].from: missing"),
        (("images", 4, "digests"), {"x": "sha256:00"}, 'images[4].digests: "x" is not a tag'),
        (("ubuntu", 0, "python"), "3", 'ubuntu[0].python: expected "3.X", got "3"'),
        (("driver_branches", 0, "ends"), "June", 'driver_branches[0].ends: expected "YYYY-MM"'),
        (("images",), [], "images: expected a non-empty array of tables"),
        (("sources",), {}, "sources: expected a table of source descriptions"),
    ],
)
def test_damage_is_reported_with_file_and_path(
    doc: dict[str, Any], path: tuple[Any, ...], value: Any, message: str
) -> None:
    with pytest.raises(DataError) as err:
        cuda.parse(_damaged(doc, path, value), FILE)
    assert message in err.value.message
    assert err.value.message.startswith("matrices/cuda.toml: ")
    assert err.value.exit_code == 2
    assert err.value.hint


def test_image_of_unknown_cuda_is_refused(doc: dict[str, Any]) -> None:
    damaged = copy.deepcopy(doc)
    damaged["cuda"] = [r for r in damaged["cuda"] if r["version"] != "12.6"]
    with pytest.raises(DataError, match=r"images\[\d+\]\.cuda: CUDA 12.6 has no \[\[cuda\]\] row"):
        cuda.parse(damaged, FILE)


def test_digests_are_read_when_present(doc: dict[str, Any]) -> None:
    damaged = copy.deepcopy(doc)
    row = next(r for r in damaged["images"] if r["version"] == "12.2.2")
    digest = "sha256:" + "ab" * 32
    row["digests"] = {"12.2.2-cudnn8-runtime-ubuntu22.04": digest}
    parsed = cuda.parse(damaged, FILE)
    image = next(im for im in parsed.images if im.version == "12.2.2")
    assert image.digest("12.2.2-cudnn8-runtime-ubuntu22.04") == digest
    assert image.digest("12.2.2-cudnn8-runtime-ubuntu20.04") is None


# ---------------------------------------------------------------- driver floors (issue 14)

# The Linux driver of each toolkit's GA release, as NVIDIA's CUDA Toolkit release
# notes list it (table "CUDA Toolkit and Corresponding Driver Versions"; the source
# toolkit-driver-table of cuda.toml).
TOOLKIT_DRIVERS = {
    "10.0": "410.48", "10.1": "418.39", "10.2": "440.33", "11.0": "450.36.06",
    "11.1": "455.23", "11.2": "460.27.03", "11.3": "465.19.01", "11.4": "470.42.01",
    "11.5": "495.29.05", "11.6": "510.39.01", "11.7": "515.43.04", "11.8": "520.61.05",
    "12.0": "525.60.13", "12.1": "530.30.02", "12.2": "535.54.03", "12.3": "545.23.06",
    "12.4": "550.54.14", "12.5": "555.42.02", "12.6": "560.28.03", "12.8": "570.26",
    "12.9": "575.51.03", "13.0": "580.65.06", "13.1": "590.44.01", "13.2": "595.45.04",
}  # fmt: skip

# NVIDIA_REQUIRE_CUDA exactly as the cited copies of NVIDIA's Dockerfiles carry it
# (require-12-6-3: dist/12.6.3/ubuntu2404/base; require-12-2-2: the 12.2.2 image).
_DC = "unknown grid tesla nvidia quadro quadrortx nvidiartx vapps vpc vcs vws cloudgaming"
_OLD = "tesla unknown nvidia nvidiartx geforce geforcertx quadro quadrortx titan titanrtx"
REQUIRE_12_6_3 = "cuda>=12.6 " + " ".join(
    f"brand={b},driver>={n},driver<{n + 1}" for n in (470, 535, 550) for b in _DC.split()
)
REQUIRE_12_2_2 = "cuda>=12.2 " + " ".join(
    f"brand={b},driver>={n},driver<{n + 1}" for n in (470, 525) for b in _OLD.split()
)


def test_toolkit_drivers_match_the_release_notes_and_each_other(cm: cuda.CudaMatrix) -> None:
    assert {r.version: r.toolkit_driver for r in cm.cuda} == TOOLKIT_DRIVERS
    rows = list(cm.cuda)
    for row in rows:
        table = "toolkit-driver-table" + ("-13" if row.version.startswith("13.") else "")
        assert row.toolkit_driver_from == table
        if table != "toolkit-driver-table":
            assert row.toolkit_driver in cm.source(table)
        # minor-version compatibility asks no more than the toolkit's own driver, except
        # for 11.0, whose GA driver (450.36.06) predates the 11.x floor (450.80.02)
        if row.version != "11.0":
            assert Version(row.driver_min) <= Version(row.toolkit_driver)
        if row.driver_branch:  # R535 for 12.2: the toolkit shipped with that branch
            assert Version(row.toolkit_driver).major == int(row.driver_branch[1:])
    for older, newer in zip(rows, rows[1:], strict=False):
        assert Version(older.toolkit_driver) < Version(newer.toolkit_driver)
    # a CUDA major's minimum is on the branch of its first toolkit's driver
    for row in rows:
        first = next(r for r in rows if r.version.split(".")[0] == row.version.split(".")[0])
        if Version(row.version) >= Version("11.0"):
            assert Version(row.driver_min).major == Version(first.toolkit_driver).major


def test_images_require_cuda_against_their_sources_and_the_toolkit_table(
    cm: cuda.CudaMatrix,
) -> None:
    from envlock.matrix.require import MARKET_BRANDS, parse_require

    recorded = {im.version: im for im in cm.images if im.require_cuda}
    assert set(recorded) == {
        "11.8.0", "12.0.0", "12.2.2", "12.3.2", "12.6.3", "12.8.0", "12.9.1",
        "13.0.0", "13.0.1", "13.1.1", "13.2.0", "13.2.1",
    }  # fmt: skip
    assert recorded["12.6.3"].require_cuda == REQUIRE_12_6_3
    assert recorded["12.2.2"].require_cuda == REQUIRE_12_2_2
    sources = dict(cm.sources)
    for version, image in recorded.items():
        assert image.require_cuda_from == "require-" + version.replace(".", "-")
        assert version in sources[image.require_cuda_from]
        require = parse_require(image.require_cuda)
        assert require.cuda == image.cuda
        toolkit = cm.release(image.cuda)
        assert toolkit is not None
        # every excepted branch is older than the image's own toolkit driver (else the
        # exception would be pointless) and not older than 450 (forward compatibility)
        branches = require.branches(MARKET_BRANDS["datacenter"] | MARKET_BRANDS["geforce"])
        assert branches and all(450 <= b < Version(toolkit.toolkit_driver).major for b in branches)
        # data-center GPUs get every exception GeForce gets
        assert set(require.branches(MARKET_BRANDS["geforce"])) <= set(
            require.branches(MARKET_BRANDS["datacenter"])
        )
    # the images from 12.6 on dropped GeForce from the exceptions
    assert recorded["12.6.3"].require_cuda.count("geforce") == 0
    assert recorded["12.2.2"].require_cuda.count("brand=geforce,") == 2
    # the branches each image excepts, as NVIDIA's files (or copies) carry them
    excepted = {
        "12.9.1": (535, 550, 560, 565, 570),
        "13.0.0": (535, 550, 565, 570, 575),
        "13.0.1": (535, 550, 565, 570, 575),
        "13.1.1": (535, 550, 570, 575, 580),
        "13.2.0": (535, 570, 580, 590),
        "13.2.1": (535, 570, 580, 590),
    }
    for version, numbers in excepted.items():
        alternatives = (
            f"brand={b},driver>={n},driver<{n + 1}" for n in numbers for b in _DC.split()
        )
        want = f"cuda>={recorded[version].cuda} " + " ".join(alternatives)
        assert recorded[version].require_cuda == want


def test_require_cuda_is_validated(doc: dict[str, Any]) -> None:
    damaged = copy.deepcopy(doc)
    image = next(im for im in damaged["images"] if im["version"] == "12.6.3")
    image["require_cuda"] = "cuda>=12.5 brand=tesla,driver>=535,driver<536"
    with pytest.raises(DataError, match=r"require_cuda: asks for CUDA 12.5, not 12.6"):
        cuda.parse(damaged, FILE)
    image["require_cuda"] = "cuda>=12.6 brand=tesla;driver>=535"
    with pytest.raises(DataError, match=r"require_cuda: 'brand=tesla;driver>=535' is not a cond"):
        cuda.parse(damaged, FILE)
    image["require_cuda"] = REQUIRE_12_6_3
    image["require_cuda_from"] = "nowhere"
    with pytest.raises(DataError, match=r"require_cuda_from: \"nowhere\" is not a key of"):
        cuda.parse(damaged, FILE)
    del image["require_cuda_from"]
    with pytest.raises(DataError, match=r"require_cuda_from: missing"):
        cuda.parse(damaged, FILE)
