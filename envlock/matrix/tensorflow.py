"""``matrices/tensorflow.toml``: one row per TensorFlow 2.x release.

Each row says what the release's own Linux x86_64 wheel states: the Python
minors it ships for, Requires-Python, the CUDA and cuDNN it was built with
(``tensorflow/python/platform/build_info.py``), the compiled compute
capabilities, the ``and-cuda`` extra's requirements with the Python minors all
of them have Linux x86_64 wheels for (``and_cuda_python``; what
``--cuda-source pip`` can install) and which requirement removed which minor
(``and_cuda_python_note``), and which wheel (with its sha256) the facts were
read from. ``*_from`` fields record where CUDA and cuDNN
came from. The file is written by ``envlock matrix refresh``, never by hand.

``parse`` validates a loaded TOML document; every problem is a ``DataError``
naming the file and the path inside it, e.g.
``matrices/tensorflow.toml: releases[12].cudnn: expected "X.Y", got "8"``.
"""

from __future__ import annotations

from envlock.errors import DataError
from envlock.record import record
from envlock.versions import Ver

TYPE_CHECKING = False  # typing is not imported at run time (start-up: see envlock.record)
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

SCHEMA_VERSION = 1
GENERATED_BY = "envlock matrix refresh"

CUDA_SOURCES = ("build_info", "build_info+tested-configs", "tested-configs")
CUDNN_SOURCES = (
    "build_info",
    "build_info+and-cuda",
    "build_info+tested-configs",
    "tested-configs",
)

# Patterns as text: re compiles (and caches) them on first use, when a file is
# validated, not on import (a cached, validated matrix needs none of them).
_MINOR = r"^[0-9]+\.[0-9]+$"
_PYTHON = r"^3\.[0-9]+$"
_CUDA_FULL = r"^[0-9]+(\.[0-9]+){0,2}$"
_CAPABILITY = r"^(sm|compute)_[0-9]{2,3}[a-z]?$"
_SHA256 = r"^[0-9a-f]{64}$"
_DATE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
_WHEEL = r"^tensorflow-[^-]+-[^-]+-[^-]+-[^-]+\.whl$"

_FIELDS = (
    "version",
    "python",
    "requires_python",
    "cuda",
    "cuda_full",
    "cuda_from",
    "cudnn",
    "cudnn_from",
    "cuda_build",
    "compute_capabilities",
    "and_cuda",
    "and_cuda_python",
    "and_cuda_python_note",
    "wheel",
    "sha256",
    "yanked",
    "note",
)


@record
class TFRelease:
    """One TensorFlow release as its Linux x86_64 wheel describes it."""

    version: Ver  # final or post release (envlock.versions; validated with packaging)
    python: tuple[str, ...]  # "3.9", "3.10", ... sorted by minor
    requires_python: str
    cuda: str  # major.minor
    cuda_full: str  # as build_info states it ("12.5.1", "10" for 2.2), else the table's value
    cuda_from: str  # one of CUDA_SOURCES
    cudnn: str  # major.minor
    cudnn_from: str  # one of CUDNN_SOURCES
    compute_capabilities: tuple[str, ...]  # as compiled; () when the wheel does not say
    and_cuda: tuple[str, ...]  # Requires-Dist of the and-cuda extra, marker stripped
    wheel: str  # the file the facts were read from
    sha256: str
    yanked: bool = False
    note: str = ""
    cuda_build: bool = True  # build_info's is_cuda_build (2.0.x wheels are CPU builds)
    # the minors of ``python`` for which every applicable and-cuda requirement has a
    # Linux x86_64 wheel on the index (what ``--cuda-source pip`` can install)
    and_cuda_python: tuple[str, ...] = ()
    and_cuda_python_note: str = ""  # which requirement removed which minor ("" when none)

    def to_dict(self) -> dict[str, Any]:
        """The TOML/JSON shape, fields in the schema's order."""
        return {
            "version": str(self.version),
            "python": list(self.python),
            "requires_python": self.requires_python,
            "cuda": self.cuda,
            "cuda_full": self.cuda_full,
            "cuda_from": self.cuda_from,
            "cudnn": self.cudnn,
            "cudnn_from": self.cudnn_from,
            "cuda_build": self.cuda_build,
            "compute_capabilities": list(self.compute_capabilities),
            "and_cuda": list(self.and_cuda),
            "and_cuda_python": list(self.and_cuda_python),
            "and_cuda_python_note": self.and_cuda_python_note,
            "wheel": self.wheel,
            "sha256": self.sha256,
            "yanked": self.yanked,
            "note": self.note,
        }



@record
class TFMatrix:
    """All of tensorflow.toml, validated; releases sorted by version."""

    schema_version: int
    data_version: str
    generated_by: str
    releases: tuple[TFRelease, ...]  # sorted by version
    digest: str = ""  # sha256 hex of the file bytes ("" when parsed from a dict)

    def get(self, version: object) -> TFRelease | None:
        """The row of a release (a ``Ver``, a packaging ``Version`` or text), if any."""
        wanted = str(version)
        for rel in self.releases:
            if str(rel.version) == wanted:
                return rel
        try:
            key = Ver(wanted)
        except ValueError:
            return None
        for rel in self.releases:
            if rel.version == key:
                return rel
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "data_version": self.data_version,
            "generated_by": self.generated_by,
            "releases": [r.to_dict() for r in self.releases],
        }


class _Checker:
    """Validation helpers that put the file and the path into each error."""

    def __init__(self, filename: str) -> None:
        self.filename = filename

    def fail(self, path: str, problem: str, hint: str | None = None) -> DataError:
        return DataError(
            f"{self.filename}: {path}: {problem}",
            hint=hint or "regenerate the file with 'envlock matrix refresh'",
        )

    def string(self, obj: Mapping[str, Any], key: str, path: str, *, empty: bool = False) -> str:
        if key not in obj:
            raise self.fail(f"{path}.{key}" if path else key, "missing")
        value = obj[key]
        where = f"{path}.{key}" if path else key
        if not isinstance(value, str):
            raise self.fail(where, f"expected a string, got {_show(value)}")
        if not empty and not value.strip():
            raise self.fail(where, "must not be empty")
        return value

    def pattern(self, obj: Mapping[str, Any], key: str, path: str, regex: str, shape: str) -> str:
        import re  # on first use: a cached matrix needs no pattern

        value = self.string(obj, key, path)
        if not re.match(regex, value):
            raise self.fail(f"{path}.{key}", f'expected "{shape}", got {_show(value)}')
        return value

    def choice(self, obj: Mapping[str, Any], key: str, path: str, allowed: Sequence[str]) -> str:
        value = self.string(obj, key, path)
        if value not in allowed:
            options = ", ".join(f'"{a}"' for a in allowed)
            raise self.fail(f"{path}.{key}", f"expected one of {options}, got {_show(value)}")
        return value

    def strings(
        self,
        obj: Mapping[str, Any],
        key: str,
        path: str,
        regex: str | None = None,
        shape: str = "",
    ) -> tuple[str, ...]:
        import re  # on first use: a cached matrix needs no pattern

        where = f"{path}.{key}"
        if key not in obj:
            raise self.fail(where, "missing")
        value = obj[key]
        if not isinstance(value, list):
            raise self.fail(where, f"expected a list of strings, got {_show(value)}")
        out: list[str] = []
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise self.fail(f"{where}[{i}]", f"expected a string, got {_show(item)}")
            if regex is not None and not re.match(regex, item):
                raise self.fail(f"{where}[{i}]", f'expected "{shape}", got {_show(item)}')
            out.append(item)
        return tuple(out)


def _show(value: Any) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a table"
    return type(value).__name__


def major_minor(version: str) -> str:
    """``"12.5.1"`` -> ``"12.5"``; ``"12"`` stays ``"12"``."""
    parts = version.split(".")
    return ".".join(parts[:2])


def _release(c: _Checker, row: Any, path: str) -> TFRelease:
    # packaging's requirement parser (markers, tags, logging, subprocess, ...)
    # only where a file is validated, not where a validated matrix is used
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    if not isinstance(row, dict):
        raise c.fail(path, f"expected a table, got {_show(row)}")
    unknown = sorted(set(row) - set(_FIELDS))
    if unknown:
        raise c.fail(f"{path}.{unknown[0]}", "unknown field")

    raw_version = c.string(row, "version", path)
    try:
        checked = Version(raw_version)
    except InvalidVersion:
        raise c.fail(f"{path}.version", f"not a version: {_show(raw_version)}") from None
    if checked.major != 2:
        raise c.fail(f"{path}.version", f"expected a 2.x release, got {_show(raw_version)}")
    try:
        version = Ver(raw_version)
    except ValueError:
        raise c.fail(
            f"{path}.version",
            f"expected a final or post release in canonical form (as {str(checked)!r} "
            f"without pre-, dev- or local parts), got {_show(raw_version)}",
        ) from None

    python = c.strings(row, "python", path, _PYTHON, "3.X")
    if not python:
        raise c.fail(f"{path}.python", "no Python versions")
    keys = [Version(p) for p in python]
    if keys != sorted(set(keys)):
        raise c.fail(f"{path}.python", "expected distinct minors in ascending order")

    requires_python = c.string(row, "requires_python", path, empty=True)
    if requires_python:
        try:
            SpecifierSet(requires_python)
        except InvalidSpecifier:
            raise c.fail(
                f"{path}.requires_python", f"not a version specifier: {_show(requires_python)}"
            ) from None

    cuda = c.pattern(row, "cuda", path, _MINOR, "X.Y")
    cuda_full = c.pattern(row, "cuda_full", path, _CUDA_FULL, "X[.Y[.Z]]")
    if major_minor(cuda_full) != cuda and cuda_full != cuda.split(".")[0]:
        raise c.fail(
            f"{path}.cuda_full", f"{_show(cuda_full)} does not start with cuda {_show(cuda)}"
        )
    cuda_from = c.choice(row, "cuda_from", path, CUDA_SOURCES)
    cudnn = c.pattern(row, "cudnn", path, _MINOR, "X.Y")
    cudnn_from = c.choice(row, "cudnn_from", path, CUDNN_SOURCES)

    caps = c.strings(row, "compute_capabilities", path, _CAPABILITY, "sm_XY or compute_XY")
    and_cuda = c.strings(row, "and_cuda", path)
    for i, line in enumerate(and_cuda):
        try:
            req = Requirement(line)
        except InvalidRequirement as e:
            raise c.fail(f"{path}.and_cuda[{i}]", f"not a requirement: {e}") from None
        if req.marker is not None and "extra" in str(req.marker):
            raise c.fail(f"{path}.and_cuda[{i}]", "the extra marker must be stripped")

    and_cuda_python = c.strings(row, "and_cuda_python", path, _PYTHON, "3.X")
    for i, minor in enumerate(and_cuda_python):
        if minor not in python:
            raise c.fail(
                f"{path}.and_cuda_python[{i}]",
                f"{_show(minor)} is not one of the release's python minors",
            )
    if list(and_cuda_python) != [p for p in python if p in and_cuda_python]:
        raise c.fail(f"{path}.and_cuda_python", "expected distinct minors in ascending order")
    if and_cuda_python and not and_cuda:
        raise c.fail(f"{path}.and_cuda_python", "set, but the release has no and_cuda extra")
    and_cuda_python_note = c.string(row, "and_cuda_python_note", path, empty=True)

    wheel = c.pattern(row, "wheel", path, _WHEEL, "tensorflow-<version>-<tags>.whl")
    sha256 = c.pattern(row, "sha256", path, _SHA256, "64 lowercase hex digits")
    yanked = row.get("yanked", False)
    if not isinstance(yanked, bool):
        raise c.fail(f"{path}.yanked", f"expected true or false, got {_show(yanked)}")
    note = c.string(row, "note", path, empty=True) if "note" in row else ""
    cuda_build = row.get("cuda_build", True)
    if not isinstance(cuda_build, bool):
        raise c.fail(f"{path}.cuda_build", f"expected true or false, got {_show(cuda_build)}")

    return TFRelease(
        version=version,
        python=python,
        requires_python=requires_python,
        cuda=cuda,
        cuda_full=cuda_full,
        cuda_from=cuda_from,
        cudnn=cudnn,
        cudnn_from=cudnn_from,
        compute_capabilities=caps,
        and_cuda=and_cuda,
        and_cuda_python=and_cuda_python,
        and_cuda_python_note=and_cuda_python_note,
        wheel=wheel,
        sha256=sha256,
        yanked=yanked,
        note=note,
        cuda_build=cuda_build,
    )


def parse(doc: Mapping[str, Any], filename: str, digest: str = "") -> TFMatrix:
    """Validate a loaded ``tensorflow.toml`` document."""
    c = _Checker(filename)
    schema = doc.get("schema_version")
    if schema is None:
        raise c.fail("schema_version", "missing")
    if not isinstance(schema, int) or isinstance(schema, bool):
        raise c.fail("schema_version", f"expected an integer, got {_show(schema)}")
    if schema != SCHEMA_VERSION:
        raise c.fail(
            "schema_version",
            f"this envlock reads schema {SCHEMA_VERSION}, the file has {schema}",
            hint="use the envlock release that wrote the file, or regenerate it",
        )
    data_version = c.pattern(doc, "data_version", "", _DATE, "YYYY-MM-DD")
    generated_by = c.string(doc, "generated_by", "") if "generated_by" in doc else GENERATED_BY
    rows = doc.get("releases")
    if not isinstance(rows, list) or not rows:
        raise c.fail("releases", "expected a non-empty array of tables ([[releases]])")
    releases = [_release(c, row, f"releases[{i}]") for i, row in enumerate(rows)]
    seen: dict[Ver, int] = {}
    for i, rel in enumerate(releases):
        if rel.version in seen:
            raise c.fail(
                f"releases[{i}].version",
                f"{rel.version} is listed twice (also releases[{seen[rel.version]}])",
            )
        seen[rel.version] = i
    releases.sort(key=lambda r: r.version)
    return TFMatrix(
        schema_version=schema,
        data_version=data_version,
        generated_by=generated_by,
        releases=tuple(releases),
        digest=digest,
    )


def _toml_value(value: Any) -> str:
    """One value as tomli-w writes it; arrays stay on one line, one row per table.

    tomli-w puts every item of a non-empty array on a line of its own and has
    no option for inline arrays, so only the array brackets are joined here.
    """
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    import tomli_w

    return tomli_w.dumps({"v": value})[len("v = ") : -1]


HEADER = (
    "# TensorFlow releases as their Linux x86_64 wheels describe them.\n"
    "# Written by 'envlock matrix refresh' from the package index; do not edit by hand.\n"
    "# Regenerate: envlock matrix refresh -o matrices/tensorflow.toml\n"
    "# Check:      envlock matrix check\n"
)


def dumps(matrix: TFMatrix) -> str:
    """The file text: header, top-level keys, one [[releases]] table per row."""
    lines = [HEADER.rstrip("\n")]
    lines.append(f"schema_version = {matrix.schema_version}")
    lines.append(f"data_version = {_toml_value(matrix.data_version)}")
    lines.append(f"generated_by = {_toml_value(matrix.generated_by)}")
    for rel in sorted(matrix.releases, key=lambda r: r.version):
        lines.append("")
        lines.append("[[releases]]")
        for key, value in rel.to_dict().items():
            lines.append(f"{key} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"
