"""The 2.22 layout: build facts from TensorFlow's CUDA and cuDNN headers."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from packaging.version import Version
from test_matrix_refresh import (
    BUILD_INFO_2_21,
    BUILD_INFO_2_22,
    CUDA_CONFIG_2_22,
    CUDNN_VERSION_2_22,
    META_2_22,
)

from envlock.errors import DataError
from envlock.index.pep691 import IndexFile
from envlock.matrix import headers, load_tensorflow
from envlock.matrix import refresh as refresh_mod

CONFIG = "tensorflow/include/third_party/gpus/cuda/cuda_config.h"
VERSION_H = "tensorflow/include/external/cuda_cudnn/include/cudnn_version.h"
WHEEL = "tensorflow-2.22.0rc0-cp313-cp313-manylinux_2_27_x86_64.whl"


def _facts(info: str, config: str | None, cudnn: str | None, meta: str = META_2_22):
    from email.parser import BytesHeaderParser

    msg = BytesHeaderParser().parsebytes(meta.encode())
    return refresh_mod.WheelFacts(
        requires_python=">=3.10",
        requires_dist=tuple(str(v) for v in msg.get_all("Requires-Dist", [])),
        build_info=refresh_mod.parse_build_info(info),
        build_info_path="tensorflow/python/platform/build_info.py",
        requests=1,
        bytes_read=1,
        headers=headers.read(
            (CONFIG, config.encode()) if config is not None else None,
            (VERSION_H, cudnn.encode()) if cudnn is not None else None,
            WHEEL,
        ),
    )


def _candidate(version: str = "2.22.0rc0") -> refresh_mod.Candidate:
    f = IndexFile(
        filename=WHEEL,
        url="https://files/x.whl",
        sha256="0" * 64,
        size=1,
        upload_time="2026-09-22T00:00:00Z",
        yanked=False,
    )
    return refresh_mod.Candidate(Version(version), (f,), ("3.13",), f)


def test_headers_are_read() -> None:
    got = headers.read(
        (CONFIG, CUDA_CONFIG_2_22.encode()), (VERSION_H, CUDNN_VERSION_2_22.encode()), WHEEL
    )
    assert (got.cuda_version, got.cudnn_major, got.cudnn_version) == ("12.5.1", "9", "9.10.0")
    assert got.capabilities == ("60", "70", "80", "89", "90")
    assert (got.cuda_config_path, got.cudnn_version_path) == (CONFIG, VERSION_H)
    assert headers.read(None, None, WHEEL) == headers.HeaderFacts()


@pytest.mark.parametrize(
    ("given", "names", "source"),
    [
        (
            ("60", "70", "80", "89", "90"),
            ("sm_60", "sm_70", "sm_80", "sm_89", "compute_90"),
            headers.SPLIT_INFERRED,
        ),
        (("3.5", "7.0"), ("sm_35", "compute_70"), headers.SPLIT_INFERRED),
        (("sm_80", "compute_90"), ("sm_80", "compute_90"), headers.SPLIT_STATED),
    ],
)
def test_the_split(given: tuple[str, ...], names: tuple[str, ...], source: str) -> None:
    assert headers.split(given) == (names, source)


def test_a_mixed_list_is_refused() -> None:
    with pytest.raises(DataError, match="mixes named and bare entries"):
        headers.split(("sm_80", "90"))


def test_a_2_22_row_comes_from_the_headers() -> None:
    row = refresh_mod.make_row(
        _candidate(), _facts(BUILD_INFO_2_22, CUDA_CONFIG_2_22, CUDNN_VERSION_2_22), None
    )
    assert (row.cuda, row.cuda_full, row.cuda_from) == ("12.5", "12.5.1", "cuda_config.h")
    assert (row.cudnn, row.cudnn_from) == ("9.10", "cudnn_version.h")
    assert row.compute_capabilities == ("sm_60", "sm_70", "sm_80", "sm_89", "compute_90")
    assert row.compute_capabilities_from == "cuda_config.h+inferred-ptx"
    assert row.prerelease and row.cuda_build
    # the row records where its facts came from, and how it is written
    text = row.to_dict()
    assert list(text)[:2] == ["version", "prerelease"]
    assert text["compute_capabilities_from"] == "cuda_config.h+inferred-ptx"


def test_without_cudnn_version_h_the_major_and_the_and_cuda_pin_give_the_minor() -> None:
    row = refresh_mod.make_row(_candidate(), _facts(BUILD_INFO_2_22, CUDA_CONFIG_2_22, None), None)
    assert (row.cudnn, row.cudnn_from) == ("9.10", "cuda_config.h+and-cuda")


def test_without_headers_or_table_the_refresh_stops_naming_the_release() -> None:
    with pytest.raises(DataError, match=r"tensorflow 2\.22\.0rc0 .*no CUDA version.*no row"):
        refresh_mod.make_row(_candidate(), _facts(BUILD_INFO_2_22, None, None), None)


def test_build_info_wins_and_agreeing_headers_change_nothing() -> None:
    """A 2.21-style wheel with both: the row is what build_info alone gives."""
    cand = _candidate("2.21.0")
    alone = refresh_mod.make_row(cand, _facts(BUILD_INFO_2_21, None, None), None)
    both_facts = _facts(BUILD_INFO_2_21, CUDA_CONFIG_2_22, CUDNN_VERSION_2_22)
    both = refresh_mod.make_row(cand, both_facts, None)
    assert both == alone
    assert both.to_dict() == alone.to_dict()
    assert "compute_capabilities_from" not in both.to_dict()
    assert refresh_mod.agree("x", both_facts.build_info, both_facts.headers) == (
        "cuda",
        "cudnn",
        "compute_capabilities",
    )


@pytest.mark.parametrize(
    ("config", "cudnn", "message"),
    [
        (
            CUDA_CONFIG_2_22.replace('"12.5.1"', '"12.8.0"'),
            CUDNN_VERSION_2_22,
            r"build_info\.py says CUDA 12\.5\.1, .*cuda_config\.h says 12\.8\.0",
        ),
        (
            CUDA_CONFIG_2_22.replace('TF_CUDNN_VERSION "9"', 'TF_CUDNN_VERSION "8"'),
            CUDNN_VERSION_2_22,
            r"build_info\.py says cuDNN 9, .*cuda_config\.h says 8",
        ),
        (
            CUDA_CONFIG_2_22,
            CUDNN_VERSION_2_22.replace("CUDNN_MAJOR 9", "CUDNN_MAJOR 8"),
            r"build_info\.py says cuDNN 9, .*cudnn_version\.h says 8\.10\.0",
        ),
        (
            CUDA_CONFIG_2_22.replace("60, 70, 80, 89, 90", "60, 70, 80, 90"),
            CUDNN_VERSION_2_22,
            r"says compute capabilities sm_60, sm_70, sm_80, sm_89, compute_90, "
            r".*cuda_config\.h says 60, 70, 80, 90",
        ),
    ],
)
def test_build_info_and_a_header_that_disagree_stop_the_refresh(
    config: str, cudnn: str, message: str
) -> None:
    with pytest.raises(DataError, match=message) as info:
        refresh_mod.make_row(_candidate("2.21.0"), _facts(BUILD_INFO_2_21, config, cudnn), None)
    assert "tensorflow 2.21.0" in info.value.message
    assert info.value.hint and "contradicts itself" in info.value.hint


def test_every_shipped_split_has_one_ptx_entry_last() -> None:
    """What the inferred split rests on: every release whose build_info states the
    split (2.3 to 2.21) compiles every entry but the last, which is PTX."""
    rows = [r for r in load_tensorflow().releases if r.compute_capabilities_from == "build_info"]
    stated = [r for r in rows if r.compute_capabilities]
    assert len(stated) > 60
    for r in stated:
        caps = r.compute_capabilities
        assert all(c.startswith("sm_") for c in caps[:-1]), r.version
        assert caps[-1].startswith("compute_"), r.version
    inferred = [r for r in load_tensorflow().releases if r not in rows]
    assert [str(r.version) for r in inferred] == ["2.22.0rc0"]
    assert inferred[0].compute_capabilities_from == headers.SPLIT_INFERRED


def test_the_optional_keys_are_validated() -> None:
    from envlock.matrix import tensorflow

    m = load_tensorflow()
    doc = m.to_dict()
    last = doc["releases"][-1]
    assert last["version"] == "2.22.0rc0" and last["prerelease"] is True
    bad = dict(last, compute_capabilities_from="guess")
    with pytest.raises(DataError, match=r"compute_capabilities_from: expected one of"):
        tensorflow.parse({**doc, "releases": [*doc["releases"][:-1], bad]}, "t.toml")
    unflagged = {k: v for k, v in last.items() if k != "prerelease"}
    with pytest.raises(DataError, match=r"prerelease: expected true for \"2\.22\.0rc0\""):
        tensorflow.parse({**doc, "releases": [*doc["releases"][:-1], unflagged]}, "t.toml")
    final = doc["releases"][-2]
    flagged = dict(final, prerelease=True)
    with pytest.raises(DataError, match=r"prerelease: expected false"):
        tensorflow.parse({**doc, "releases": [*doc["releases"][:-2], flagged, last]}, "t.toml")
    assert replace(m.releases[-1], note="") == m.releases[-1]


# ------------------------------------------------------------------ the standalone copies

# The smoke harness and doctor's probe run alone (standard library only, inside the
# image or the venv under inspection), so each carries a copy of the header reader.
_COPIES = ("envlock/smoke/harness.py", "envlock/venv/probe.py")


def _reader_block(path: str) -> str:
    """The header reader's lines of ``path``: from its comment to TF_FACTS."""
    text = (Path(__file__).resolve().parent.parent / path).read_text(encoding="utf-8")
    start = text.index("# From 2.22.0rc0 on, build_info holds")
    end = text.index("\n", text.index('TF_FACTS = ("cuda_version"', start)) + 1
    return text[start:end]


def test_the_standalone_copies_of_the_header_reader_are_identical() -> None:
    harness, probe = (_reader_block(p) for p in _COPIES)
    assert "def header_build_facts(" in harness
    assert harness == probe


@pytest.mark.parametrize("module", ["envlock.smoke.harness", "envlock.venv.probe"])
def test_the_copies_read_what_the_library_reads(module: str, tmp_path: Path) -> None:
    import importlib

    copy = importlib.import_module(module)
    for rel, text in (
        ("include/third_party/gpus/cuda/cuda_config.h", CUDA_CONFIG_2_22),
        ("include/external/cuda_cudnn/include/cudnn_version.h", CUDNN_VERSION_2_22),
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    lib = headers.read(
        (CONFIG, CUDA_CONFIG_2_22.encode()), (VERSION_H, CUDNN_VERSION_2_22.encode()), WHEEL
    )
    names, _ = headers.split(lib.capabilities)
    assert copy.header_build_facts(str(tmp_path)) == {
        "cuda_version": (lib.cuda_version, "cuda_config.h"),
        "cudnn_version": (lib.cudnn_version, "cudnn_version.h"),
        "cuda_compute_capabilities": (list(names), "cuda_config.h+inferred-ptx"),
    }
