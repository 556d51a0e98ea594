"""TensorFlow's published "tested build configurations" (``matrices/tf-tested-configs.toml``).

The table is upstream documentation copied into envlock: per release series
the Python range, cuDNN and CUDA that TensorFlow says it tested. envlock uses
it where a wheel does not say enough (no CUDA, or only the major of cuDNN/CUDA)
and to cross-check what the wheels say (``envlock matrix check``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import Version

from envlock.matrix.schema import MINOR, Checker

FILENAME = "tf-tested-configs.toml"
SCHEMA_VERSION = 1

_ITEM = re.compile(r"^\s*([0-9]+)\.([0-9]+)\s*(?:-\s*([0-9]+)\.([0-9]+)\s*)?$")


def parse_python_range(text: str) -> tuple[str, ...]:
    """``"2.7, 3.5-3.7"`` -> ``("2.7", "3.5", "3.6", "3.7")``, sorted, distinct.

    Items are ``X.Y`` or ``X.Y-X.Z`` (one major per range, low <= high),
    separated by commas. Raises ValueError naming the bad item.
    """
    minors: set[tuple[int, int]] = set()
    if not text.strip():
        raise ValueError("empty Python range")
    for item in text.split(","):
        m = _ITEM.match(item)
        if not m:
            raise ValueError(f"{item.strip()!r} is not X.Y or X.Y-X.Z")
        major, low = int(m.group(1)), int(m.group(2))
        if m.group(3) is None:
            minors.add((major, low))
            continue
        major_hi, high = int(m.group(3)), int(m.group(4))
        if major_hi != major:
            raise ValueError(f"{item.strip()!r} spans two major versions")
        if high < low:
            raise ValueError(f"{item.strip()!r} runs backwards")
        minors.update((major, n) for n in range(low, high + 1))
    return tuple(f"{a}.{b}" for a, b in sorted(minors))


def format_python_range(minors: Iterable[str]) -> str:
    """The inverse of ``parse_python_range``:
    ``["3.5", "3.6", "3.7", "3.9"]`` -> ``"3.5-3.7, 3.9"``."""
    pairs = sorted({(int(a), int(b)) for a, b in (m.split(".") for m in minors)})
    parts: list[str] = []
    i = 0
    while i < len(pairs):
        j = i
        while (
            j + 1 < len(pairs)
            and pairs[j + 1][0] == pairs[i][0]
            and pairs[j + 1][1] == pairs[j][1] + 1
        ):
            j += 1
        lo, hi = pairs[i], pairs[j]
        parts.append(f"{lo[0]}.{lo[1]}" if i == j else f"{lo[0]}.{lo[1]}-{hi[0]}.{hi[1]}")
        i = j + 1
    return ", ".join(parts)


@dataclass(frozen=True)
class TestedConfig:
    version: Version
    python: str  # as the table writes it, "3.9-3.12"
    python_minors: tuple[str, ...]  # expanded, "3.9", ..., "3.12"
    cudnn: str  # major.minor
    cuda: str  # major.minor
    compiler: str
    bazel: str


@dataclass(frozen=True)
class TestedConfigs:
    source: str
    data_version: str
    configs: tuple[TestedConfig, ...]  # sorted by version

    def for_release(self, version: Version) -> TestedConfig | None:
        """The row for ``version``: its own, else the newest of its series not above it,
        else the oldest of its series (the table lists 2.16.1 for the 2.16 series)."""
        series = [
            c for c in self.configs if (c.version.major, c.version.minor) == version.release[:2]
        ]
        if not series:
            return None
        for c in series:
            if c.version == version:
                return c
        below = [c for c in series if c.version <= version]
        return below[-1] if below else series[0]


HINT = "the file copies TensorFlow's tested-configurations table; restore it from git"
_TOP_FIELDS = ("schema_version", "data_version", "source", "configs")
_FIELDS = ("version", "python", "compiler", "bazel", "cudnn", "cuda")


def _config(c: Checker, raw: Any, path: str) -> TestedConfig:
    row = c.table(raw, path, _FIELDS)
    version = c.version(row, "version", path)
    python = c.string(row, "python", path)
    try:
        minors = parse_python_range(python)
    except ValueError as e:
        raise c.fail(f"{path}.python", str(e)) from None
    return TestedConfig(
        version=version,
        python=python,
        python_minors=minors,
        cudnn=c.string(row, "cudnn", path, MINOR),
        cuda=c.string(row, "cuda", path, MINOR),
        compiler=c.string(row, "compiler", path),
        bazel=c.string(row, "bazel", path),
    )


def parse(doc: Mapping[str, Any], filename: str) -> TestedConfigs:
    c = Checker(filename, HINT)
    c.table(doc, "", _TOP_FIELDS)
    _schema, data_version = c.header(doc, SCHEMA_VERSION, hint=HINT)
    source = c.string(doc, "source", "")
    configs = [_config(c, raw, f"configs[{i}]") for i, raw in enumerate(c.rows(doc, "configs"))]
    c.distinct("configs", "version", [t.version for t in configs])
    configs.sort(key=lambda t: t.version)
    return TestedConfigs(source=source, data_version=data_version, configs=tuple(configs))


def load(path: Path | None = None) -> TestedConfigs:
    from envlock.matrix import read_toml

    doc, _digest, shown = read_toml(FILENAME, path)
    return parse(doc, shown)


def python3_minors(minors: Sequence[str]) -> tuple[str, ...]:
    return tuple(m for m in minors if m.startswith("3."))
