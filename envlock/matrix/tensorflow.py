"""``matrices/tensorflow.toml``: one row per TensorFlow 2.x release.

Each row says what the release's own Linux x86_64 wheel states: the Python
minors it ships for, Requires-Python, the CUDA and cuDNN it was built with
(``tensorflow/python/platform/build_info.py``), the compiled compute
capabilities, the ``and-cuda`` extra's requirements with the Python minors all
of them have Linux x86_64 wheels for (``and_cuda_python``; what
``--cuda-source pip`` can install) and which requirement removed which minor
(``and_cuda_python_note``), and which wheel (with its sha256) the facts were
read from. ``*_from`` fields record where CUDA, cuDNN and the capabilities
came from: build_info.py, the CUDA and cuDNN headers the wheel ships
(``cuda_config.h``, ``cudnn_version.h``: 2.22.0rc0 and later state their facts
only there), the and-cuda extra's pins or the tested-configurations table.
Two keys are written only where they differ from what every row before 2.22
says, so those rows keep their bytes: ``compute_capabilities_from`` (absent:
``"build_info"``; ``"cuda_config.h+inferred-ptx"``: the header's bare numbers,
split as every earlier release split them, all compiled but the last, which is
PTX) and ``prerelease = true`` (a release candidate, used by resolve only with
``--pre`` or a SPEC naming a pre-release). The file is written by
``envlock matrix refresh``, never by hand.

``parse`` validates a loaded TOML document; every problem is a ``DataError``
naming the file and the path inside it, e.g.
``matrices/tensorflow.toml: releases[12].cudnn: expected "X.Y", got "8"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

if TYPE_CHECKING:
    from envlock.matrix.schema import Checker

SCHEMA_VERSION = 1
GENERATED_BY = "envlock matrix refresh"

CUDA_SOURCES = ("build_info", "build_info+tested-configs", "cuda_config.h", "tested-configs")
CUDNN_SOURCES = (
    "build_info",
    "build_info+and-cuda",
    "build_info+tested-configs",
    "cudnn_version.h",
    "cuda_config.h+and-cuda",
    "tested-configs",
)
CAPABILITY_SOURCES = ("build_info", "cuda_config.h", "cuda_config.h+inferred-ptx")

# Shapes of values (schema.Shape): a regular expression a whole value matches
# and how messages write it; compiled by re on first use, when a file is validated.
_CUDA_FULL = (r"[0-9]+(\.[0-9]+){0,2}", "X[.Y[.Z]]")
_CAPABILITY = (r"(sm|compute)_[0-9]{2,3}[a-z]?", "sm_XY or compute_XY")
_SHA256 = (r"[0-9a-f]{64}", "64 lowercase hex digits")
_WHEEL = (r"tensorflow-[^-]+-[^-]+-[^-]+-[^-]+\.whl", "tensorflow-<version>-<tags>.whl")

_TOP_FIELDS = ("schema_version", "data_version", "generated_by", "releases")
_FIELDS = (
    "version",
    "prerelease",
    "python",
    "requires_python",
    "cuda",
    "cuda_full",
    "cuda_from",
    "cudnn",
    "cudnn_from",
    "cuda_build",
    "compute_capabilities",
    "compute_capabilities_from",
    "and_cuda",
    "and_cuda_python",
    "and_cuda_python_note",
    "wheel",
    "sha256",
    "uploaded",
    "yanked",
    "note",
)


@dataclass(frozen=True)
class TFRelease:
    """One TensorFlow release as its Linux x86_64 wheel describes it."""

    version: Version  # a final, post or pre-release in canonical form (validated by parse)
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
    # when the release reached the index: the earliest PEP 691 upload-time of its Linux
    # x86_64 wheels, RFC 3339 in UTC ("" when the index stated none)
    uploaded: str = ""
    compute_capabilities_from: str = "build_info"  # one of CAPABILITY_SOURCES
    prerelease: bool = False  # a release candidate (the version's own pre-release part)
    # a torch or JAX build in the shape resolve reads (envlock.matrix.builds.as_release):
    # the project, its CUDA build ("cu130", "cuda13") and the index it is on; never
    # written to tensorflow.toml
    project: str = "tensorflow"
    build: str = ""
    index: str = ""

    @property
    def label(self) -> str:
        """How messages name the release: ``tensorflow 2.15.1``, ``torch 2.11.0+cu130``."""
        if self.project == "torch" and self.build:
            return f"torch {self.version}+{self.build}"
        if self.project == "jax" and self.build:
            return f"jax {self.version} [{self.build}]"
        return f"{self.project} {self.version}"

    @property
    def cuda_wheels(self) -> str:
        """What brings the nvidia-* wheels: ``tensorflow[and-cuda]``, ``torch``, ``jax[cuda13]``."""
        if self.project == "tensorflow":
            return "tensorflow[and-cuda]"
        if self.project == "jax":
            return f"jax[{self.build}]"
        return self.project

    def to_dict(self) -> dict[str, Any]:
        """The TOML/JSON shape, fields in the schema's order; ``prerelease`` and
        ``compute_capabilities_from`` only where they are not the default."""
        out: dict[str, Any] = {
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
            "compute_capabilities_from": self.compute_capabilities_from,
            "and_cuda": list(self.and_cuda),
            "and_cuda_python": list(self.and_cuda_python),
            "and_cuda_python_note": self.and_cuda_python_note,
            "wheel": self.wheel,
            "sha256": self.sha256,
            "uploaded": self.uploaded,
            "yanked": self.yanked,
            "note": self.note,
        }
        if self.compute_capabilities_from == "build_info":
            del out["compute_capabilities_from"]
        if self.prerelease:
            out = {"version": out.pop("version"), "prerelease": True, **out}
        return out


@dataclass(frozen=True)
class TFMatrix:
    """All of tensorflow.toml, validated; releases sorted by version."""

    schema_version: int
    data_version: str
    generated_by: str
    releases: tuple[TFRelease, ...]  # sorted by version
    digest: str = ""  # sha256 hex of the file bytes ("" when parsed from a dict)

    def get(self, version: object) -> TFRelease | None:
        """The row of a release (a ``Version`` or text), if any."""
        wanted = str(version)
        for rel in self.releases:
            if str(rel.version) == wanted:
                return rel
        try:
            key = Version(wanted)
        except InvalidVersion:
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


HINT = "regenerate the file with 'envlock matrix refresh'"


def major_minor(version: str) -> str:
    """``"12.5.1"`` -> ``"12.5"``; ``"12"`` stays ``"12"``."""
    parts = version.split(".")
    return ".".join(parts[:2])


def _release(c: Checker, raw: Any, path: str) -> TFRelease:
    # packaging's requirement parser and the checker only where a file is
    # validated, not where a validated matrix is used
    from envlock.matrix.schema import MINOR, PYTHON_MINOR, UTC_INSTANT, show

    row = c.table(raw, path, _FIELDS)
    checked = c.version(row, "version", path)
    raw_version = row["version"]
    if checked.major != 2:
        raise c.fail(f"{path}.version", f"expected a 2.x release, got {show(raw_version)}")
    if checked.is_devrelease or checked.local or checked.epoch or str(checked) != raw_version:
        raise c.fail(
            f"{path}.version",
            f"expected a final, post or pre-release in canonical form (as {str(checked)!r} "
            f"without dev- or local parts), got {show(raw_version)}",
        )
    prerelease = c.boolean(row, "prerelease", path, default=False)
    if prerelease != checked.is_prerelease:
        raise c.fail(
            f"{path}.prerelease",
            f"expected {'true' if checked.is_prerelease else 'false (or absent)'} for "
            f"{show(raw_version)}",
        )

    python = c.strings(row, "python", path, PYTHON_MINOR)
    if not python:
        raise c.fail(f"{path}.python", "no Python versions")
    if list(python) != sorted(python, key=Version):
        raise c.fail(f"{path}.python", "expected distinct minors in ascending order")

    requires_python = c.string(row, "requires_python", path, empty=True)
    if requires_python:
        c.specifier(requires_python, f"{path}.requires_python")

    cuda = c.string(row, "cuda", path, MINOR)
    cuda_full = c.string(row, "cuda_full", path, _CUDA_FULL)
    if major_minor(cuda_full) != cuda and cuda_full != cuda.split(".")[0]:
        raise c.fail(
            f"{path}.cuda_full", f"{show(cuda_full)} does not start with cuda {show(cuda)}"
        )
    cuda_from = c.choice(row, "cuda_from", path, CUDA_SOURCES)
    cudnn = c.string(row, "cudnn", path, MINOR)
    cudnn_from = c.choice(row, "cudnn_from", path, CUDNN_SOURCES)

    caps = c.strings(row, "compute_capabilities", path, _CAPABILITY)
    if "compute_capabilities_from" in row:
        caps_from = c.choice(row, "compute_capabilities_from", path, CAPABILITY_SOURCES)
    else:
        caps_from = "build_info"
    and_cuda = c.strings(row, "and_cuda", path)
    for i, line in enumerate(and_cuda):
        req = c.requirement(line, f"{path}.and_cuda[{i}]")
        if req.marker is not None and "extra" in str(req.marker):
            raise c.fail(f"{path}.and_cuda[{i}]", "the extra marker must be stripped")

    and_cuda_python = c.strings(row, "and_cuda_python", path, PYTHON_MINOR)
    for i, minor in enumerate(and_cuda_python):
        if minor not in python:
            raise c.fail(
                f"{path}.and_cuda_python[{i}]",
                f"{show(minor)} is not one of the release's python minors",
            )
    if list(and_cuda_python) != [p for p in python if p in and_cuda_python]:
        raise c.fail(f"{path}.and_cuda_python", "expected distinct minors in ascending order")
    if and_cuda_python and not and_cuda:
        raise c.fail(f"{path}.and_cuda_python", "set, but the release has no and_cuda extra")

    return TFRelease(
        version=checked,
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
        and_cuda_python_note=c.string(row, "and_cuda_python_note", path, empty=True),
        wheel=c.string(row, "wheel", path, _WHEEL),
        sha256=c.string(row, "sha256", path, _SHA256),
        uploaded=_uploaded(c, row, path, UTC_INSTANT),
        yanked=c.boolean(row, "yanked", path, default=False),
        note=c.string(row, "note", path, required=False, empty=True),
        cuda_build=c.boolean(row, "cuda_build", path, default=True),
        compute_capabilities_from=caps_from,
        prerelease=prerelease,
    )


def _uploaded(c: Checker, row: Mapping[str, Any], path: str, shape: tuple[str, str]) -> str:
    """``uploaded``: "" (unknown) or an RFC 3339 instant in UTC that is a real date."""
    from datetime import datetime

    value = c.string(row, "uploaded", path, required=False, empty=True)
    if not value:
        return ""
    value = c.string(row, "uploaded", path, shape)
    try:
        datetime.strptime(value[:19], "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        raise c.fail(f"{path}.uploaded", f"{value!r} is not a real date") from None
    return value


def parse(doc: Mapping[str, Any], filename: str, digest: str = "") -> TFMatrix:
    """Validate a loaded ``tensorflow.toml`` document."""
    from envlock.matrix.schema import Checker

    c = Checker(filename, HINT)
    c.table(doc, "", _TOP_FIELDS)
    schema, data_version = c.header(
        doc, SCHEMA_VERSION, hint="use the envlock release that wrote the file, or regenerate it"
    )
    generated_by = c.string(doc, "generated_by", "", required=False) or GENERATED_BY
    rows = c.rows(doc, "releases")
    releases = [_release(c, row, f"releases[{i}]") for i, row in enumerate(rows)]
    c.distinct("releases", "version", [r.version for r in releases])
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
