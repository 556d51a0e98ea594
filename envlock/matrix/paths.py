"""matrices/paths.toml: what each GPU architecture asks of the tools around a
framework build (the first CUDA whose ptxas knows its sm target, the PTX ISA it
needs, the first cuDNN with device code for it) and the execution paths known
to fail on some GPUs, with sources.

``parse`` validates the document; ``load`` reads the packaged file (cached).
``envlock.resolve.paths`` turns these facts into one verdict per path.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

if TYPE_CHECKING:
    from pathlib import Path

    from envlock.matrix.schema import Checker

FILENAME = "paths.toml"
SCHEMA_VERSION = 1
HINT = (
    "each [[archs]] row needs compute_capability, cuda, ptx and from; each [[failures]] "
    "row framework, compute_capability, path, effect and from"
)
PATHS = ("kernels", "ptx-jit", "xla", "cudnn")
_CAPABILITY = (r"[0-9]+\.[0-9]", "X.Y")
_MINOR = (r"[0-9]+\.[0-9]+", "X.Y")
_ARCH_FIELDS = ("compute_capability", "cuda", "ptx", "cudnn", "from")
_FAILURE_FIELDS = ("framework", "compute_capability", "path", "effect", "from")


@dataclass(frozen=True)
class Arch:
    """One compute capability and what its code needs."""

    compute_capability: str  # "12.0"
    cuda: str  # the first CUDA whose ptxas knows sm_120, "12.8"
    ptx: str  # the PTX ISA its target needs, "8.7"
    cudnn: str | None  # the first cuDNN with device code for it, "9.7"; None: any
    sources: tuple[str, ...]

    @property
    def sm(self) -> int:
        major, minor = self.compute_capability.split(".")
        return int(major) * 10 + int(minor)


@dataclass(frozen=True)
class PathFailure:
    """A path that fails for ``framework`` releases on GPUs in ``compute_capability``."""

    framework: str  # a requirement, "tensorflow>=2.16"
    compute_capability: str  # a specifier, ">=12.0,<13"
    path: str
    effect: str
    sources: tuple[str, ...]

    def applies(self, framework: str, version: str, capability: str) -> bool:
        req = Requirement(self.framework)
        if canonicalize_name(req.name) != canonicalize_name(framework):
            return False
        if not req.specifier.contains(version, prereleases=True):
            return False
        return SpecifierSet(self.compute_capability).contains(capability)


@dataclass(frozen=True)
class PathsMatrix:
    schema_version: int
    data_version: str
    sources: tuple[tuple[str, str], ...]
    archs: tuple[Arch, ...]
    failures: tuple[PathFailure, ...]

    def arch(self, capability: str) -> Arch | None:
        """The row of this compute capability, else the newest row of the same
        major below it (8.7 is read as 8.6); None when none is known."""
        wanted = Version(capability)
        best: Arch | None = None
        for row in self.archs:
            have = Version(row.compute_capability)
            newer = best is None or have > Version(best.compute_capability)
            if have.major == wanted.major and have <= wanted and newer:
                best = row
        return best

    def urls(self, keys: tuple[str, ...]) -> tuple[str, ...]:
        """The source texts' leading URLs, for a verdict's sources."""
        table = dict(self.sources)
        return tuple(table[k].split(" ", 1)[0] for k in keys if k in table)


def _source_keys(c: Checker, row: Mapping[str, Any], path: str) -> tuple[str, ...]:
    keys = c.strings(row, "from", path, non_empty=True)
    for i, key in enumerate(keys):
        if key not in c.source_keys:
            raise c.fail(f"{path}.from[{i}]", f"{key!r} is not a key of [sources]")
    return keys


def _arch(c: Checker, raw: Any, path: str) -> Arch:
    row = c.table(raw, path, _ARCH_FIELDS)
    return Arch(
        compute_capability=c.string(row, "compute_capability", path, _CAPABILITY),
        cuda=c.string(row, "cuda", path, _MINOR),
        ptx=c.string(row, "ptx", path, _MINOR),
        cudnn=c.string(row, "cudnn", path, _MINOR) if "cudnn" in row else None,
        sources=_source_keys(c, row, path),
    )


def _failure(c: Checker, raw: Any, path: str) -> PathFailure:
    row = c.table(raw, path, _FAILURE_FIELDS)
    framework = c.string(row, "framework", path)
    c.requirement(framework, f"{path}.framework")
    capability = c.string(row, "compute_capability", path)
    if not list(c.specifier(capability, f"{path}.compute_capability")):
        raise c.fail(f"{path}.compute_capability", "must not be empty")
    return PathFailure(
        framework=framework,
        compute_capability=capability,
        path=c.choice(row, "path", path, PATHS),
        effect=c.string(row, "effect", path).strip(),
        sources=_source_keys(c, row, path),
    )


def parse(doc: Mapping[str, Any], filename: str) -> PathsMatrix:
    """Validate a loaded ``paths.toml`` document."""
    from envlock.matrix.schema import Checker

    c = Checker(filename, HINT)
    c.table(doc, "", ("schema_version", "data_version", "sources", "archs", "failures"))
    schema, data_version = c.header(doc, SCHEMA_VERSION)
    sources = c.sources(doc)
    for key, text in sources:
        if not text.startswith("https://"):
            raise c.fail(f"sources.{key}", "must start with the source's https:// URL")
    archs = tuple(_arch(c, raw, f"archs[{i}]") for i, raw in enumerate(c.rows(doc, "archs")))
    seen: set[str] = set()
    for i, arch in enumerate(archs):
        if arch.compute_capability in seen:
            raise c.fail(f"archs[{i}].compute_capability", "appears twice")
        seen.add(arch.compute_capability)
    failures = tuple(
        _failure(c, raw, f"failures[{i}]")
        for i, raw in enumerate(c.rows(doc, "failures", required=False))
    )
    return PathsMatrix(schema, data_version, sources, archs, failures)


def load_file(path: Path | None = None) -> PathsMatrix:
    from envlock.matrix import read_toml

    doc, _digest, shown = read_toml(FILENAME, path)
    return parse(doc, shown)


@functools.lru_cache(maxsize=1)
def load() -> PathsMatrix:
    """The packaged paths.toml, validated; cached per process."""
    return load_file()
