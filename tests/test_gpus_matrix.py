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


def test_load_gives_the_parsed_gpu_matrix(gm: gpus.GpuMatrix, doc: dict[str, Any]) -> None:
    assert load().gpus == gm
    # each [[gpus]] row of the file is one model, in the file's order, as written
    # (what is true of every row, not how many there are: a new row is a data change)
    assert [g.name for g in gm.gpus] == [row["name"] for row in doc["gpus"]]
    for gpu, row in zip(gm.gpus, doc["gpus"], strict=True):
        written = {k: row.get(k) for k in gpu.to_dict() if k != "source"}
        assert gpu.to_dict() == written | {"source": row["from"]}
        assert gpu.source in dict(gm.sources), gpu.name


def test_every_gpu_row_agrees_with_its_name_and_has_the_peaks_a_benchmark_needs(
    gm: gpus.GpuMatrix,
) -> None:
    for gpu in gm.gpus:
        # the names table knows the model, with the same compute capability, and a
        # driver that reports the row's name gets that row
        entry = gm.lookup(gpu.name)
        assert entry is not None, gpu.name
        assert entry.compute_capability == gpu.compute_capability, gpu.name
        assert gm.find(gpu.name) == gpu
        # dense datasheet peaks: tensor cores (FP16) above plain FP32; TF32 and BF16
        # from Ampere (sm_80) on only, TF32 between the two, BF16 at FP16's rate
        assert gpu.fp32_tflops > 0 and gpu.memory_bandwidth_tbs > 0, gpu.name
        assert gpu.fp16_tflops is not None and gpu.fp16_tflops > gpu.fp32_tflops, gpu.name
        ampere_on = gpu.sm >= 80
        assert (gpu.tf32_tflops is not None) == ampere_on, gpu.name
        assert (gpu.bf16_tflops is not None) == ampere_on, gpu.name
        if ampere_on:
            assert gpu.fp32_tflops < gpu.tf32_tflops < gpu.fp16_tflops, gpu.name
            assert gpu.bf16_tflops == gpu.fp16_tflops, gpu.name


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
    ("name", "capability"),
    [
        ("NVIDIA H200", "9.0"),
        ("NVIDIA H100 80GB HBM3", "9.0"),
        ("NVIDIA H100 PCIe", "9.0"),
        ("NVIDIA A100-SXM4-80GB", "8.0"),
        ("NVIDIA A100-PCIE-40GB", "8.0"),
        ("NVIDIA L4", "8.9"),
        ("NVIDIA A10", "8.6"),
        ("Tesla V100-SXM2", "7.0"),
        ("Tesla T4", "7.5"),
        ("NVIDIA B200", "10.0"),
        ("NVIDIA GB200", "10.0"),
    ],
)
def test_a_named_row_has_its_compute_capability(
    gm: gpus.GpuMatrix, name: str, capability: str
) -> None:
    """The rows smoke benchmarks are measured against stay, each with its compute
    capability (a row removed fails here; a row added needs no test edit)."""
    row = gm.find(name)
    assert row is not None and row.name == name
    assert row.compute_capability == capability


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
