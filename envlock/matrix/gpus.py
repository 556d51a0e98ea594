"""``matrices/gpus.toml``: compute capability and datasheet peaks per GPU model.

Smoke benchmarks report measured throughput as a fraction of these peaks;
``envlock resolve`` uses the compute capability to warn when a GPU is served
only through PTX JIT or not at all. ``GpuMatrix.find`` matches the name a
driver reports ("Tesla V100-SXM2-16GB") to a row ("Tesla V100-SXM2").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from envlock.matrix.cuda import _Checker, check_header, read_sources, show

SCHEMA_VERSION = 1

_CAPABILITY = r"^[0-9]+\.[0-9]$"
_PEAKS = ("fp32_tflops", "tf32_tflops", "fp16_tflops", "bf16_tflops", "memory_bandwidth_tbs")
_FIELDS = ("name", "form_factor", "compute_capability", *_PEAKS, "from")


@dataclass(frozen=True)
class GpuModel:
    """One GPU model: compute capability and datasheet peaks."""

    name: str  # as nvidia-smi shows it (or the stem of it), "NVIDIA H200"
    form_factor: str  # "SXM", "PCIe"
    compute_capability: str  # "9.0"
    fp32_tflops: float
    tf32_tflops: float | None  # None: the datasheet gives none
    fp16_tflops: float | None
    bf16_tflops: float | None
    memory_bandwidth_tbs: float
    source: str

    @property
    def sm(self) -> int:
        """Compute capability as the number in ``sm_XY``: "9.0" -> 90."""
        major, minor = self.compute_capability.split(".")
        return int(major) * 10 + int(minor)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "form_factor": self.form_factor,
            "compute_capability": self.compute_capability,
            "fp32_tflops": self.fp32_tflops,
            "tf32_tflops": self.tf32_tflops,
            "fp16_tflops": self.fp16_tflops,
            "bf16_tflops": self.bf16_tflops,
            "memory_bandwidth_tbs": self.memory_bandwidth_tbs,
            "source": self.source,
        }


@dataclass(frozen=True)
class GpuMatrix:
    """All of gpus.toml, validated."""

    schema_version: int
    data_version: str
    sources: tuple[tuple[str, str], ...]
    gpus: tuple[GpuModel, ...]

    def find(self, reported: str) -> GpuModel | None:
        """The row for a reported name: exact (ignoring case), else the longest
        row name the reported one starts with, followed by a space or a dash."""
        wanted = " ".join(reported.split()).casefold()
        best: GpuModel | None = None
        for gpu in self.gpus:
            name = gpu.name.casefold()
            if wanted == name:
                return gpu
            if (
                wanted.startswith(name)
                and wanted[len(name)] in " -"
                and (best is None or len(gpu.name) > len(best.name))
            ):
                best = gpu
        return best


def _peak(
    c: _Checker, row: Mapping[str, Any], key: str, path: str, *, required: bool
) -> float | None:
    if key not in row:
        if required:
            raise c.fail(f"{path}.{key}", "missing")
        return None
    value = row[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise c.fail(f"{path}.{key}", f"expected a positive number, got {show(value)}")
    return float(value)


def parse(doc: Mapping[str, Any], filename: str) -> GpuMatrix:
    """Validate a loaded ``gpus.toml`` document."""
    c = _Checker(filename)
    unknown = sorted(set(doc) - {"schema_version", "data_version", "sources", "gpus"})
    if unknown:
        raise c.fail(unknown[0], "unknown field")
    schema, data_version = check_header(c, doc, SCHEMA_VERSION)
    sources = read_sources(c, doc)
    gpus: list[GpuModel] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(c.rows(doc, "gpus")):
        path = f"gpus[{i}]"
        row = c.table(raw, path, _FIELDS)
        name = c.string(row, "name", path)
        if name.casefold() in seen:
            raise c.fail(
                f"{path}.name", f"{show(name)} is listed twice (also gpus[{seen[name.casefold()]}])"
            )
        seen[name.casefold()] = i
        fp32 = _peak(c, row, "fp32_tflops", path, required=True)
        bandwidth = _peak(c, row, "memory_bandwidth_tbs", path, required=True)
        assert fp32 is not None and bandwidth is not None
        gpus.append(
            GpuModel(
                name=name,
                form_factor=c.string(row, "form_factor", path),
                compute_capability=c.string(row, "compute_capability", path, _CAPABILITY, "X.Y"),
                fp32_tflops=fp32,
                tf32_tflops=_peak(c, row, "tf32_tflops", path, required=False),
                fp16_tflops=_peak(c, row, "fp16_tflops", path, required=False),
                bf16_tflops=_peak(c, row, "bf16_tflops", path, required=False),
                memory_bandwidth_tbs=bandwidth,
                source=c.source(row, "from", path),
            )
        )
    return GpuMatrix(
        schema_version=schema, data_version=data_version, sources=sources, gpus=tuple(gpus)
    )
