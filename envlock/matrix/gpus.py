"""``matrices/gpus.toml``: compute capability and datasheet peaks per GPU model.

Smoke benchmarks report measured throughput as a fraction of these peaks;
``envlock resolve`` uses the compute capability to warn when a GPU is served
only through PTX JIT or not at all. ``GpuMatrix.find`` matches the name a
driver reports ("Tesla V100-SXM2-16GB") to a row ("Tesla V100-SXM2").

``[[names]]`` holds the names people use for a GPU ("T4", "A100", "RTX 4090")
with one compute capability and a market (data-center, GeForce, workstation:
which of the nvidia/cuda images' driver exceptions apply); ``GpuMatrix.lookup``
reads a name given on the command line or reported by the driver, and
``GpuMatrix.nearest`` suggests known names for one it does not know.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envlock.matrix.schema import Checker

SCHEMA_VERSION = 1
HINT = "fix the file or restore it from the envlock release"

_CAPABILITY = (r"[0-9]+\.[0-9]", "X.Y")  # schema.Shape
_PEAKS = ("fp32_tflops", "tf32_tflops", "fp16_tflops", "bf16_tflops", "memory_bandwidth_tbs")
_FIELDS = ("name", "form_factor", "compute_capability", *_PEAKS, "from")
_NAME_FIELDS = ("name", "aliases", "compute_capability", "market", "from")
MARKETS = ("datacenter", "geforce", "workstation")
# words people add to a GPU's name or leave out, ignored when names are compared
_NOISE = frozenset({"nvidia", "tesla", "geforce"})


def _compared(name: str) -> str:
    """A reported name as ``GpuMatrix.find`` compares it: "NVIDIA  H200 (x)" -> "nvidia h200"."""
    return " ".join(name.split("(")[0].split()).casefold()


def name_words(text: str) -> tuple[str, ...]:
    """A GPU name as compared: "NVIDIA GeForce RTX-4090" -> ("rtx", "4090")."""
    spaced = text.casefold().replace("-", " ").replace("_", " ")
    return tuple(word for word in spaced.split() if word not in _NOISE)


@dataclass(frozen=True)
class GpuName:
    """A name people use for GPUs of one compute capability ("A100")."""

    name: str  # "A100"
    aliases: tuple[str, ...]  # other names of the same entry ("A800")
    compute_capability: str  # "8.0"
    market: str  # "datacenter", "geforce", "workstation"
    source: str


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
    names: tuple[GpuName, ...] = ()

    def lookup(self, given: str) -> GpuName | None:
        """The entry for a name: the same words (ignoring case, dashes, spaces
        between words and NVIDIA/Tesla/GeForce), else the longest entry whose
        words begin the given ones ("A100-SXM4-40GB" is an A100, "A1000" is not)."""
        words = name_words(given)
        if not words:
            return None
        joined = "".join(words)
        best: tuple[int, GpuName] | None = None
        for entry in self.names:
            for spelling in (entry.name, *entry.aliases):
                known = name_words(spelling)
                if known == words or "".join(known) == joined:
                    return entry
                if words[: len(known)] == known and (best is None or len(known) > best[0]):
                    best = (len(known), entry)
        return best[1] if best else None

    def nearest(self, given: str, limit: int = 3) -> list[str]:
        """Known names closest to ``given`` (for "unknown GPU" messages)."""
        import difflib

        spellings = {"".join(name_words(s)): s for e in self.names for s in (e.name, *e.aliases)}
        close = difflib.get_close_matches(
            "".join(name_words(given)), list(spellings), n=limit, cutoff=0.5
        )
        return [spellings[c] for c in close]

    def find(self, reported: str) -> GpuModel | None:
        """The row for a reported name: exact (ignoring case, runs of spaces and a
        parenthesised suffix), else the longest row name the reported one starts
        with, followed by a space or a dash. The smoke harness's ``find_peak``
        matches the same way (tests/test_smoke_parity.py)."""
        wanted = _compared(reported)
        best: GpuModel | None = None
        for gpu in self.gpus:
            name = _compared(gpu.name)
            if wanted == name:
                return gpu
            if (
                wanted.startswith(name)
                and wanted[len(name)] in " -"
                and (best is None or len(gpu.name) > len(best.name))
            ):
                best = gpu
        return best


def _gpu(c: Checker, raw: Any, path: str) -> GpuModel:
    row = c.table(raw, path, _FIELDS)
    return GpuModel(
        name=c.string(row, "name", path),
        form_factor=c.string(row, "form_factor", path),
        compute_capability=c.string(row, "compute_capability", path, _CAPABILITY),
        fp32_tflops=c.positive_number(row, "fp32_tflops", path),
        tf32_tflops=c.optional_positive_number(row, "tf32_tflops", path),
        fp16_tflops=c.optional_positive_number(row, "fp16_tflops", path),
        bf16_tflops=c.optional_positive_number(row, "bf16_tflops", path),
        memory_bandwidth_tbs=c.positive_number(row, "memory_bandwidth_tbs", path),
        source=c.source(row, "from", path),
    )


def _name(c: Checker, raw: Any, path: str) -> GpuName:
    row = c.table(raw, path, _NAME_FIELDS)
    return GpuName(
        name=c.string(row, "name", path),
        aliases=c.strings(row, "aliases", path) if "aliases" in row else (),
        compute_capability=c.string(row, "compute_capability", path, _CAPABILITY),
        market=c.choice(row, "market", path, MARKETS),
        source=c.source(row, "from", path),
    )


def parse(doc: Mapping[str, Any], filename: str) -> GpuMatrix:
    """Validate a loaded ``gpus.toml`` document."""
    from envlock.matrix.schema import Checker

    c = Checker(filename, HINT)
    c.table(doc, "", ("schema_version", "data_version", "sources", "gpus", "names"))
    schema, data_version = c.header(doc, SCHEMA_VERSION)
    sources = c.sources(doc)
    gpus = [_gpu(c, raw, f"gpus[{i}]") for i, raw in enumerate(c.rows(doc, "gpus"))]
    # names match case-insensitively (GpuMatrix.find), so they differ in more than case
    c.distinct("gpus", "name", [g.name for g in gpus], key=str.casefold)
    names = [
        _name(c, raw, f"names[{i}]") for i, raw in enumerate(c.rows(doc, "names", required=False))
    ]
    # every spelling names one entry: "A100" cannot mean two compute capabilities
    seen: dict[str, int] = {}
    for i, entry in enumerate(names):
        for spelling in (entry.name, *entry.aliases):
            key = "".join(name_words(spelling))
            if key in seen:
                raise c.fail(
                    f"names[{i}]",
                    f'"{spelling}" names names[{seen[key]}] too (names compare without case, '
                    f"spaces, dashes and the words NVIDIA, Tesla, GeForce)",
                )
            seen[key] = i
    return GpuMatrix(
        schema_version=schema,
        data_version=data_version,
        sources=sources,
        gpus=tuple(gpus),
        names=tuple(names),
    )
