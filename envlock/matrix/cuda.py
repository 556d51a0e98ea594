"""``matrices/cuda.toml``: drivers, nvidia/cuda image tags, end of life.

Per CUDA major.minor the oldest Linux driver that runs it and what is known
about the end of life of its images; per nvidia/cuda image release the Ubuntu
versions it is published for, its cuDNN flavour and, where known, the exact
cuDNN inside the cudnn-flavoured tags; the default ``python3`` of each Ubuntu
release. Every fact names its source, a key of the file's ``[sources]`` table.

``parse`` validates a loaded document; every problem is a ``DataError`` naming
the file and the path inside it, e.g.
``matrices/cuda.toml: images[3].cudnn: expected "X.Y.Z[.W]", got "8"``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from packaging.version import Version

from envlock.errors import DataError

SCHEMA_VERSION = 1

IMAGE_STATES = ("deleted", "eol")
CUDNN_FLAVOURS = ("cudnn7", "cudnn8", "cudnn9", "cudnn")
VARIANTS = ("base", "runtime", "devel")
CUDNN_VARIANTS = ("runtime", "devel")

_MINOR = r"^[0-9]+\.[0-9]+$"
_IMAGE_VERSION = r"^[0-9]+\.[0-9]+(\.[0-9]+)?$"
_DRIVER = r"^[0-9]+(\.[0-9]+){0,2}$"
_CUDNN = r"^[0-9]+\.[0-9]+\.[0-9]+(\.[0-9]+)?$"
_UBUNTU = r"^[0-9]{2}\.[0-9]{2}$"
_PYTHON = r"^3\.[0-9]+$"
_DATE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
_MONTH = r"^[0-9]{4}-[0-9]{2}$"
_BRANCH = r"^R[0-9]{3}$"
_DIGEST = r"^sha256:[0-9a-f]{64}$"
_TAG = r"^[0-9][0-9A-Za-z.\-]*$"


@dataclass(frozen=True)
class CudaRelease:
    """One CUDA major.minor."""

    version: str  # "12.2"
    driver_min: str  # "525.60.13"
    driver_min_from: str
    images: str = ""  # "" (nothing known), "deleted" or "eol"
    images_note: str = ""
    images_from: str = ""
    driver_branch: str = ""  # data-center driver branch it shipped with, "R535"
    driver_branch_from: str = ""

    @property
    def key(self) -> Version:
        """Sort key: versions ordered as PEP 440 orders them."""
        return Version(self.version)


@dataclass(frozen=True)
class DriverBranch:
    """A data-center driver branch and the month its support ends."""

    branch: str  # "R535"
    ends: str  # "2026-06"
    source: str


@dataclass(frozen=True)
class UbuntuRelease:
    """An Ubuntu release of the nvidia/cuda images and its own python3."""

    release: str  # "22.04"
    python: str  # default python3 minor, "3.10"
    source: str

    @property
    def name(self) -> str:
        """The spelling used in image tags and ``--os``: ``ubuntu22.04``."""
        return f"ubuntu{self.release}"


@dataclass(frozen=True)
class ImageRelease:
    """One nvidia/cuda image release (the version part of its tags)."""

    version: str  # as written in the tag, "12.2.2" (CUDA 10: "10.1")
    cuda: str  # major.minor, "12.2"
    os: tuple[str, ...]  # Ubuntu releases, "20.04", ...
    cudnn_flavour: str  # "cudnn8", "cudnn9" or "cudnn" (the tag says no major)
    cudnn_major: int
    cudnn: str | None  # exact cuDNN inside the cudnn-flavoured tags, when known
    cudnn_note: str
    cudnn_from: str
    source: str
    digests: tuple[tuple[str, str], ...] = ()  # (tag, "sha256:...") when known

    @property
    def key(self) -> Version:
        """Sort key: versions ordered as PEP 440 orders them."""
        return Version(self.version)

    @property
    def release(self) -> tuple[int, ...]:
        """The version's numbers as written: ``(12, 2, 2)``."""
        return Version(self.version).release

    @property
    def cudnn_key(self) -> Version | None:
        """Sort key of the exact cuDNN inside the image, when known."""
        return Version(self.cudnn) if self.cudnn else None

    def tag(self, variant: str, os: str, *, cudnn: bool) -> str:
        """``12.2.2-cudnn8-runtime-ubuntu22.04`` (``os`` is "22.04")."""
        if cudnn:
            return f"{self.version}-{self.cudnn_flavour}-{variant}-ubuntu{os}"
        return f"{self.version}-{variant}-ubuntu{os}"

    def digest(self, tag: str) -> str | None:
        for known_tag, digest in self.digests:
            if known_tag == tag:
                return digest
        return None


@dataclass(frozen=True)
class CudaMatrix:
    """All of cuda.toml, validated."""

    schema_version: int
    data_version: str
    sources: tuple[tuple[str, str], ...]
    cuda: tuple[CudaRelease, ...]  # sorted by version
    driver_branches: tuple[DriverBranch, ...]
    ubuntu: tuple[UbuntuRelease, ...]  # sorted by release
    images: tuple[ImageRelease, ...]  # sorted by version

    def release(self, minor: str) -> CudaRelease | None:
        """The row of a CUDA major.minor ("12.2")."""
        for row in self.cuda:
            if row.version == minor:
                return row
        return None

    def branch(self, name: str) -> DriverBranch | None:
        for row in self.driver_branches:
            if row.branch == name:
                return row
        return None

    def ubuntu_release(self, release: str) -> UbuntuRelease | None:
        """By "22.04" or "ubuntu22.04"."""
        wanted = release.removeprefix("ubuntu")
        for row in self.ubuntu:
            if row.release == wanted:
                return row
        return None

    def source(self, key: str) -> str:
        return dict(self.sources).get(key, key)


class _Checker:
    """Validation helpers that put the file and the path into each error."""

    def __init__(self, filename: str, sources: Sequence[str] = ()) -> None:
        self.filename = filename
        self.sources = tuple(sources)

    def fail(self, path: str, problem: str) -> DataError:
        return DataError(
            f"{self.filename}: {path}: {problem}",
            hint="fix the file or restore it from the envlock release",
        )

    def table(self, value: Any, path: str, allowed: Sequence[str]) -> Mapping[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(path, f"expected a table, got {show(value)}")
        unknown = sorted(set(value) - set(allowed))
        if unknown:
            raise self.fail(f"{path}.{unknown[0]}", "unknown field")
        return value

    def rows(self, doc: Mapping[str, Any], key: str) -> list[Any]:
        rows = doc.get(key)
        if not isinstance(rows, list) or not rows:
            raise self.fail(key, f"expected a non-empty array of tables ([[{key}]])")
        return rows

    def string(
        self,
        obj: Mapping[str, Any],
        key: str,
        path: str,
        regex: str | None = None,
        shape: str = "",
        *,
        required: bool = True,
    ) -> str:
        import re  # on first use: a cached matrix needs no pattern

        where = f"{path}.{key}" if path else key
        if key not in obj:
            if required:
                raise self.fail(where, "missing")
            return ""
        value = obj[key]
        if not isinstance(value, str):
            raise self.fail(where, f"expected a string, got {show(value)}")
        if not value.strip():
            raise self.fail(where, "must not be empty")
        if regex is not None and not re.fullmatch(regex, value):
            raise self.fail(where, f'expected "{shape}", got {show(value)}')
        return value

    def choice(
        self, obj: Mapping[str, Any], key: str, path: str, allowed: Sequence[str], *, required: bool
    ) -> str:
        value = self.string(obj, key, path, required=required)
        if value and value not in allowed:
            options = ", ".join(f'"{a}"' for a in allowed)
            raise self.fail(f"{path}.{key}", f"expected one of {options}, got {show(value)}")
        return value

    def source(self, obj: Mapping[str, Any], key: str, path: str, *, required: bool = True) -> str:
        value = self.string(obj, key, path, required=required)
        if value and value not in self.sources:
            raise self.fail(f"{path}.{key}", f"{show(value)} is not a key of [sources]")
        return value

    def strings(
        self, obj: Mapping[str, Any], key: str, path: str, regex: str, shape: str
    ) -> tuple[str, ...]:
        import re  # on first use: a cached matrix needs no pattern

        where = f"{path}.{key}"
        value = obj.get(key)
        if value is None:
            raise self.fail(where, "missing")
        if not isinstance(value, list) or not value:
            raise self.fail(where, f"expected a non-empty list of strings, got {show(value)}")
        out: list[str] = []
        for i, item in enumerate(value):
            if not isinstance(item, str) or not re.fullmatch(regex, item):
                raise self.fail(f"{where}[{i}]", f'expected "{shape}", got {show(item)}')
            if item in out:
                raise self.fail(f"{where}[{i}]", f"{show(item)} is listed twice")
            out.append(item)
        return tuple(out)

    def integer(self, obj: Mapping[str, Any], key: str, path: str) -> int:
        value = obj.get(key)
        where = f"{path}.{key}" if path else key
        if value is None:
            raise self.fail(where, "missing")
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.fail(where, f"expected an integer, got {show(value)}")
        return value


def show(value: Any) -> str:
    """A value as it would look in TOML, for messages."""
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


def check_header(c: _Checker, doc: Mapping[str, Any], schema_version: int) -> tuple[int, str]:
    """``schema_version`` and ``data_version``, shared by cuda.toml and gpus.toml."""
    schema = c.integer(doc, "schema_version", "")
    if schema != schema_version:
        raise DataError(
            f"{c.filename}: schema_version: this envlock reads schema {schema_version}, "
            f"the file has {schema}",
            hint="use the envlock release that wrote the file",
        )
    data_version = c.string(doc, "data_version", "", _DATE, "YYYY-MM-DD")
    return schema, data_version


def read_sources(c: _Checker, doc: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    raw = doc.get("sources")
    if not isinstance(raw, dict) or not raw:
        raise c.fail("sources", "expected a table of source descriptions ([sources])")
    out: list[tuple[str, str]] = []
    for key, text in raw.items():
        if not isinstance(text, str) or not text.strip():
            raise c.fail(f"sources.{key}", f"expected a description, got {show(text)}")
        out.append((key, text))
    c.sources = tuple(k for k, _ in out)
    return tuple(out)


_CUDA_FIELDS = (
    "version",
    "driver_min",
    "driver_min_from",
    "images",
    "images_note",
    "images_from",
    "driver_branch",
    "driver_branch_from",
)
_IMAGE_FIELDS = (
    "version",
    "cuda",
    "os",
    "cudnn_flavour",
    "cudnn_major",
    "cudnn",
    "cudnn_note",
    "cudnn_from",
    "from",
    "digests",
)


def _cuda_row(c: _Checker, raw: Any, path: str) -> CudaRelease:
    row = c.table(raw, path, _CUDA_FIELDS)
    images = c.choice(row, "images", path, IMAGE_STATES, required=False)
    note = c.string(row, "images_note", path, required=bool(images))
    images_from = c.source(row, "images_from", path, required=bool(images))
    if (note or images_from) and not images:
        raise c.fail(f"{path}.images", "missing (images_note/images_from need it)")
    branch = c.string(row, "driver_branch", path, _BRANCH, "RNNN", required=False)
    return CudaRelease(
        version=c.string(row, "version", path, _MINOR, "X.Y"),
        driver_min=c.string(row, "driver_min", path, _DRIVER, "NNN[.NN[.NN]]"),
        driver_min_from=c.source(row, "driver_min_from", path),
        images=images,
        images_note=note,
        images_from=images_from,
        driver_branch=branch,
        driver_branch_from=c.source(row, "driver_branch_from", path, required=bool(branch)),
    )


def _image_row(c: _Checker, raw: Any, path: str) -> ImageRelease:
    import re  # on first use: a cached matrix needs no pattern

    row = c.table(raw, path, _IMAGE_FIELDS)
    version = c.string(row, "version", path, _IMAGE_VERSION, "X.Y[.Z]")
    cuda = c.string(row, "cuda", path, _MINOR, "X.Y")
    if ".".join(version.split(".")[:2]) != cuda:
        raise c.fail(f"{path}.cuda", f"{show(cuda)} is not the major.minor of {show(version)}")
    flavour = c.choice(row, "cudnn_flavour", path, CUDNN_FLAVOURS, required=True)
    major = c.integer(row, "cudnn_major", path)
    if flavour != "cudnn" and flavour != f"cudnn{major}":
        raise c.fail(f"{path}.cudnn_major", f"{major} does not match the flavour {show(flavour)}")
    cudnn = c.string(row, "cudnn", path, _CUDNN, "X.Y.Z[.W]", required=False)
    if cudnn and int(cudnn.split(".")[0]) != major:
        raise c.fail(f"{path}.cudnn", f"{show(cudnn)} is not a cuDNN {major}")
    digests: list[tuple[str, str]] = []
    raw_digests = row.get("digests", {})
    if not isinstance(raw_digests, dict):
        raise c.fail(
            f"{path}.digests", f"expected a table of tag = digest, got {show(raw_digests)}"
        )
    for tag, digest in raw_digests.items():
        if not re.fullmatch(_TAG, tag) or not tag.startswith(version + "-"):
            raise c.fail(f"{path}.digests", f"{show(tag)} is not a tag of release {version}")
        if not isinstance(digest, str) or not re.fullmatch(_DIGEST, digest):
            raise c.fail(f"{path}.digests.{tag}", f'expected "sha256:<64 hex>", got {show(digest)}')
        digests.append((tag, digest))
    return ImageRelease(
        version=version,
        cuda=cuda,
        os=c.strings(row, "os", path, _UBUNTU, "YY.MM"),
        cudnn_flavour=flavour,
        cudnn_major=major,
        cudnn=cudnn or None,
        cudnn_note=c.string(row, "cudnn_note", path, required=False),
        cudnn_from=c.source(row, "cudnn_from", path, required=bool(cudnn)),
        source=c.source(row, "from", path),
        digests=tuple(sorted(digests)),
    )


def parse(doc: Mapping[str, Any], filename: str) -> CudaMatrix:
    """Validate a loaded ``cuda.toml`` document."""
    c = _Checker(filename)
    allowed = (
        "schema_version",
        "data_version",
        "sources",
        "cuda",
        "driver_branches",
        "ubuntu",
        "images",
    )
    unknown = sorted(set(doc) - set(allowed))
    if unknown:
        raise c.fail(unknown[0], "unknown field")
    schema, data_version = check_header(c, doc, SCHEMA_VERSION)
    sources = read_sources(c, doc)

    cuda = [_cuda_row(c, raw, f"cuda[{i}]") for i, raw in enumerate(c.rows(doc, "cuda"))]
    _no_duplicates(c, "cuda", [r.version for r in cuda])

    branches: list[DriverBranch] = []
    for i, raw in enumerate(doc.get("driver_branches", [])):
        path = f"driver_branches[{i}]"
        row = c.table(raw, path, ("branch", "ends", "from"))
        branches.append(
            DriverBranch(
                branch=c.string(row, "branch", path, _BRANCH, "RNNN"),
                ends=c.string(row, "ends", path, _MONTH, "YYYY-MM"),
                source=c.source(row, "from", path),
            )
        )
    _no_duplicates(c, "driver_branches", [b.branch for b in branches])
    known_branches = {b.branch for b in branches}
    for i, rel in enumerate(cuda):
        if rel.driver_branch and rel.driver_branch not in known_branches:
            raise c.fail(
                f"cuda[{i}].driver_branch",
                f"{show(rel.driver_branch)} has no [[driver_branches]] row",
            )

    ubuntu: list[UbuntuRelease] = []
    for i, raw in enumerate(c.rows(doc, "ubuntu")):
        path = f"ubuntu[{i}]"
        row = c.table(raw, path, ("release", "python", "from"))
        ubuntu.append(
            UbuntuRelease(
                release=c.string(row, "release", path, _UBUNTU, "YY.MM"),
                python=c.string(row, "python", path, _PYTHON, "3.X"),
                source=c.source(row, "from", path),
            )
        )
    _no_duplicates(c, "ubuntu", [u.release for u in ubuntu])
    known_os = {u.release for u in ubuntu}

    images = [_image_row(c, raw, f"images[{i}]") for i, raw in enumerate(c.rows(doc, "images"))]
    _no_duplicates(c, "images", [im.version for im in images])
    known_cuda = {r.version for r in cuda}
    for i, im in enumerate(images):
        if im.cuda not in known_cuda:
            raise c.fail(f"images[{i}].cuda", f"CUDA {im.cuda} has no [[cuda]] row")
        for j, os in enumerate(im.os):
            if os not in known_os:
                raise c.fail(f"images[{i}].os[{j}]", f"Ubuntu {os} has no [[ubuntu]] row")

    return CudaMatrix(
        schema_version=schema,
        data_version=data_version,
        sources=sources,
        cuda=tuple(sorted(cuda, key=lambda r: r.key)),
        driver_branches=tuple(branches),
        ubuntu=tuple(sorted(ubuntu, key=lambda u: Version(u.release))),
        images=tuple(sorted(images, key=lambda im: im.key)),
    )


def _no_duplicates(c: _Checker, table: str, keys: Sequence[str]) -> None:
    seen: dict[str, int] = {}
    for i, key in enumerate(keys):
        if key in seen:
            raise c.fail(
                f"{table}[{i}]", f"{show(key)} is listed twice (also {table}[{seen[key]}])"
            )
        seen[key] = i
