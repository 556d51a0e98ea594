"""matrices/gpus.toml: the shipped peaks, name matching, and damage reports."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from envlock.errors import DataError
from envlock.matrix import gpus, load, read_toml

FILE = "matrices/gpus.toml"


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    return read_toml("gpus.toml")[0]


@pytest.fixture(scope="module")
def gm(doc: dict[str, Any]) -> gpus.GpuMatrix:
    return gpus.parse(doc, FILE)


def test_load_gives_the_parsed_gpu_matrix(gm: gpus.GpuMatrix) -> None:
    assert load().gpus == gm
    assert len(gm.gpus) == 11


def test_datasheet_values(gm: gpus.GpuMatrix) -> None:
    h200 = gm.find("NVIDIA H200")
    assert h200 is not None
    assert (h200.compute_capability, h200.fp32_tflops, h200.tf32_tflops) == ("9.0", 67.0, 495.0)
    assert (h200.bf16_tflops, h200.memory_bandwidth_tbs, h200.sm) == (989.0, 4.8, 90)
    t4 = gm.find("Tesla T4")
    assert t4 is not None
    assert (t4.compute_capability, t4.fp16_tflops, t4.tf32_tflops, t4.bf16_tflops) == (
        "7.5",
        65.0,
        None,
        None,
    )
    assert t4.to_dict()["source"] == "datasheets"


@pytest.mark.parametrize(
    ("reported", "row"),
    [
        ("NVIDIA H200", "NVIDIA H200"),
        ("nvidia  h200", "NVIDIA H200"),
        ("Tesla V100-SXM2-16GB", "Tesla V100-SXM2"),
        ("Tesla V100-SXM2-32GB", "Tesla V100-SXM2"),
        ("NVIDIA A10", "NVIDIA A10"),
        ("NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB"),
        ("NVIDIA A100-SXM4-40GB", None),  # no row: 40 GB SXM differs in bandwidth
        ("NVIDIA A1000", None),
        ("NVIDIA GeForce RTX 4090", None),
    ],
)
def test_find_matches_reported_names(gm: gpus.GpuMatrix, reported: str, row: str | None) -> None:
    found = gm.find(reported)
    assert (found.name if found else None) == row


@pytest.mark.parametrize(
    ("index", "field", "value", "message"),
    [
        (0, "compute_capability", "9", 'gpus[0].compute_capability: expected "X.Y", got "9"'),
        (1, "fp32_tflops", -1, "gpus[1].fp32_tflops: expected a positive number, got -1"),
        (1, "fp32_tflops", "fast", 'gpus[1].fp32_tflops: expected a positive number, got "fast"'),
        (2, "from", "blog", 'gpus[2].from: "blog" is not a key of [sources]'),
        (3, "name", "NVIDIA H200", 'gpus[3].name: "NVIDIA H200" is listed twice (also gpus[0])'),
        (4, "clock", 1, "gpus[4].clock: unknown field"),
    ],
)
def test_damage_is_reported_with_file_and_path(
    doc: dict[str, Any], index: int, field: str, value: Any, message: str
) -> None:
    damaged = copy.deepcopy(doc)
    damaged["gpus"][index][field] = value
    with pytest.raises(DataError) as err:
        gpus.parse(damaged, FILE)
    assert err.value.message == f"{FILE}: {message}"


def test_missing_required_peak(doc: dict[str, Any]) -> None:
    damaged = copy.deepcopy(doc)
    del damaged["gpus"][5]["memory_bandwidth_tbs"]
    with pytest.raises(DataError, match=r"gpus\[5\]\.memory_bandwidth_tbs: missing"):
        gpus.parse(damaged, FILE)


# ---------------------------------------------------------------- names (issue 14)


@pytest.mark.parametrize(
    ("given", "name", "capability", "market"),
    [
        ("T4", "T4", "7.5", "datacenter"),
        ("Tesla T4", "T4", "7.5", "datacenter"),
        ("l4", "L4", "8.9", "datacenter"),
        ("A10G", "A10G", "8.6", "datacenter"),
        ("NVIDIA A10", "A10", "8.6", "datacenter"),
        ("A100", "A100", "8.0", "datacenter"),
        ("NVIDIA A100-SXM4-40GB", "A100", "8.0", "datacenter"),  # both sizes: one capability
        ("nvidia a100-pcie-80gb", "A100", "8.0", "datacenter"),
        ("H100", "H100", "9.0", "datacenter"),
        ("NVIDIA H100 80GB HBM3", "H100", "9.0", "datacenter"),
        ("h200", "H200", "9.0", "datacenter"),
        ("B200", "B200", "10.0", "datacenter"),
        ("V100", "V100", "7.0", "datacenter"),
        ("Tesla V100-SXM2-16GB", "V100", "7.0", "datacenter"),
        ("P100", "P100", "6.0", "datacenter"),
        ("RTX 4090", "RTX 4090", "8.9", "geforce"),
        ("rtx4090", "RTX 4090", "8.9", "geforce"),
        ("NVIDIA GeForce RTX 4090", "RTX 4090", "8.9", "geforce"),
        ("GeForce RTX 3090", "RTX 3090", "8.6", "geforce"),
        ("NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada", "8.9", "workstation"),
    ],
)
def test_lookup_short_and_reported_names(
    gm: gpus.GpuMatrix, given: str, name: str, capability: str, market: str
) -> None:
    found = gm.lookup(given)
    assert found is not None
    assert (found.name, found.compute_capability, found.market) == (name, capability, market)


@pytest.mark.parametrize("given", ["auto", "A1000", "NVIDIA", "L40X", "", "9.x"])
def test_lookup_refuses_what_is_not_a_known_gpu(gm: gpus.GpuMatrix, given: str) -> None:
    assert gm.lookup(given) is None


def test_nearest_names_for_an_unknown_one(gm: gpus.GpuMatrix) -> None:
    assert gm.nearest("A1000")[:2] == ["A100", "A10"]
    assert gm.nearest("H1OO") == ["H100"]
    assert gm.nearest("zzz") == []


def test_a_spelling_may_name_one_entry_only(doc: dict[str, Any]) -> None:
    damaged = copy.deepcopy(doc)
    damaged["names"][0]["aliases"] = ["Tesla A-100"]  # the same words as A100, once normalized
    with pytest.raises(DataError, match=r'names\[6\]: "A100" names names\[0\] too'):
        gpus.parse(damaged, FILE)
    damaged = copy.deepcopy(doc)
    damaged["names"][0]["market"] = "consumer"
    with pytest.raises(DataError, match=r"names\[0\]\.market: expected one of"):
        gpus.parse(damaged, FILE)
