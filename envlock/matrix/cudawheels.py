"""matrices/cuda-wheels.toml: which CUDA a distribution brings or needs, by family.

``parse`` validates the document; ``load`` reads the packaged file (cached per
process). ``CudaWheels.family_of(name)`` is the first family whose ``match``
fits the normalized name, with the CUDA major the name states (if any). The
facts of one locked distribution are derived in ``envlock.lock.gpufacts``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    from envlock.matrix.schema import Checker

FILENAME = "cuda-wheels.toml"
SCHEMA_VERSION = 1
HINT = "each [[families]] entry needs id, match, cuda and from (see the file's header)"
HOWS = ("matrix", "version", "version-major", "name", "files", "local")
_FIELDS = ("id", "match", "cuda", "member", "cudnn", "from")
_MEMBER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./-]*\.py")


@dataclass(frozen=True)
class Family:
    """One [[families]] entry."""

    id: str
    pattern: re.Pattern[str]
    cuda: str  # one of HOWS
    member: str | None  # "torch/version.py" (cuda = "local")
    cudnn_from_version: bool
    sources: tuple[str, ...]

    def name_major(self, name: str) -> str | None:
        """The CUDA major the name states (the ``major`` group), if the pattern has one."""
        m = self.pattern.fullmatch(name)
        if m is None or "major" not in m.groupdict():
            return None
        return m.group("major")


@dataclass(frozen=True)
class CudaWheels:
    schema_version: int
    data_version: str
    sources: tuple[tuple[str, str], ...]
    families: tuple[Family, ...]

    def family_of(self, name: str) -> Family | None:
        for family in self.families:
            if family.pattern.fullmatch(name):
                return family
        return None


def _family(c: Checker, raw: Any, path: str) -> Family:
    row = c.table(raw, path, _FIELDS)
    ident = c.string(row, "id", path, (r"[a-z0-9][a-z0-9-]*", "a lowercase id"))
    text = c.string(row, "match", path)
    try:
        pattern = re.compile(text)
    except re.error as e:
        raise c.fail(f"{path}.match", f"not a regular expression: {e}") from None
    if set(pattern.groupindex) - {"major"}:
        raise c.fail(f"{path}.match", "the only group a pattern may name is `major`")
    how = c.choice(row, "cuda", path, HOWS)
    if how == "name" and "major" not in pattern.groupindex:
        raise c.fail(f"{path}.cuda", '"name" needs a group named `major` in match')
    member = None
    if "member" in row:
        if how != "local":
            raise c.fail(f"{path}.member", 'only a cuda = "local" family reads a member')
        member = c.string(row, "member", path, (_MEMBER.pattern, "a path of a .py member"))
        if ".." in member.split("/"):
            raise c.fail(f"{path}.member", "a member path has no .. part")
    cudnn = c.choice(row, "cudnn", path, ("version",), required=False)
    sources = c.strings(row, "from", path, non_empty=True)
    for i, key in enumerate(sources):
        if key not in c.source_keys:
            raise c.fail(f"{path}.from[{i}]", f"{key!r} is not a key of [sources]")
    return Family(ident, pattern, how, member, cudnn == "version", sources)


def parse(doc: Mapping[str, Any], filename: str) -> CudaWheels:
    """Validate a loaded ``cuda-wheels.toml`` document."""
    from envlock.matrix.schema import Checker

    c = Checker(filename, HINT)
    c.table(doc, "", ("schema_version", "data_version", "sources", "families"))
    schema, data_version = c.header(doc, SCHEMA_VERSION)
    sources = c.sources(doc)
    rows = c.rows(doc, "families")
    families = tuple(_family(c, raw, f"families[{i}]") for i, raw in enumerate(rows))
    c.distinct("families", "id", [f.id for f in families])
    return CudaWheels(schema, data_version, sources, families)


def load_file(path: Path | None = None) -> CudaWheels:
    from envlock.matrix import read_toml

    doc, _digest, shown = read_toml(FILENAME, path)
    return parse(doc, shown)


@functools.lru_cache(maxsize=1)
def load() -> CudaWheels:
    """The packaged cuda-wheels.toml, validated; cached per process."""
    return load_file()
