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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from packaging.version import Version

from envlock.model import ImageEndOfLife

if TYPE_CHECKING:
    from envlock.matrix.schema import Checker

SCHEMA_VERSION = 1

IMAGE_STATES = ("deleted", "eol")
CUDNN_FLAVOURS = ("cudnn7", "cudnn8", "cudnn9", "cudnn")
VARIANTS = ("base", "runtime", "devel")
CUDNN_VARIANTS = ("runtime", "devel")

# Shapes of values (schema.Shape): a regular expression a whole value matches
# and how messages write it; compiled by re on first use, when a file is validated.
_IMAGE_VERSION = (r"[0-9]+\.[0-9]+(\.[0-9]+)?", "X.Y[.Z]")
_DRIVER = (r"[0-9]+(\.[0-9]+){0,2}", "NNN[.NN[.NN]]")
_CUDNN = (r"[0-9]+\.[0-9]+\.[0-9]+(\.[0-9]+)?", "X.Y.Z[.W]")
_UBUNTU = (r"[0-9]{2}\.[0-9]{2}", "YY.MM")
_MONTH = (r"[0-9]{4}-[0-9]{2}", "YYYY-MM")
_BRANCH = (r"R[0-9]{3}", "RNNN")
_DIGEST = r"sha256:[0-9a-f]{64}"
_TAG = r"[0-9][0-9A-Za-z.\-]*"

HINT = "fix the file or restore it from the envlock release"
_TOP_FIELDS = (
    "schema_version",
    "data_version",
    "sources",
    "cuda",
    "driver_branches",
    "ubuntu",
    "images",
)


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
    toolkit_driver: str = ""  # Linux driver of the toolkit's GA release, "535.54.03"
    toolkit_driver_from: str = ""

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
    require_cuda: str = ""  # the image's NVIDIA_REQUIRE_CUDA, "" when not recorded
    require_cuda_from: str = ""

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

    def end_of_life(self, minor: str) -> ImageEndOfLife | None:
        """The end of life of the nvidia/cuda images of CUDA ``minor`` ("12.2"):
        deleted, end-of-life, supported until its driver branch ends, or None
        when cuda.toml says nothing about it."""
        row = self.release(minor)
        if row is None:
            return None
        if row.images in ("deleted", "eol"):
            return ImageEndOfLife(row.version, row.images, row.images_note)
        branch = self.branch(row.driver_branch) if row.driver_branch else None
        if branch is None:
            return None
        return ImageEndOfLife(row.version, "supported", branch=branch.branch, ends=branch.ends)

    def ubuntu_release(self, release: str) -> UbuntuRelease | None:
        """By "22.04" or "ubuntu22.04"."""
        wanted = release.removeprefix("ubuntu")
        for row in self.ubuntu:
            if row.release == wanted:
                return row
        return None

    def source(self, key: str) -> str:
        return dict(self.sources).get(key, key)


_CUDA_FIELDS = (
    "version",
    "driver_min",
    "driver_min_from",
    "images",
    "images_note",
    "images_from",
    "driver_branch",
    "driver_branch_from",
    "toolkit_driver",
    "toolkit_driver_from",
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
    "require_cuda",
    "require_cuda_from",
)


def _cuda_row(c: Checker, raw: Any, path: str) -> CudaRelease:
    from envlock.matrix.schema import MINOR

    row = c.table(raw, path, _CUDA_FIELDS)
    images = c.choice(row, "images", path, IMAGE_STATES, required=False)
    note = c.string(row, "images_note", path, required=bool(images))
    images_from = c.source(row, "images_from", path, required=bool(images))
    if (note or images_from) and not images:
        raise c.fail(f"{path}.images", "missing (images_note/images_from need it)")
    branch = c.string(row, "driver_branch", path, _BRANCH, required=False)
    toolkit = c.string(row, "toolkit_driver", path, _DRIVER, required=False)
    return CudaRelease(
        version=c.string(row, "version", path, MINOR),
        driver_min=c.string(row, "driver_min", path, _DRIVER),
        driver_min_from=c.source(row, "driver_min_from", path),
        images=images,
        images_note=note,
        images_from=images_from,
        driver_branch=branch,
        driver_branch_from=c.source(row, "driver_branch_from", path, required=bool(branch)),
        toolkit_driver=toolkit,
        toolkit_driver_from=c.source(row, "toolkit_driver_from", path, required=bool(toolkit)),
    )


def _image_row(c: Checker, raw: Any, path: str) -> ImageRelease:
    import re  # on first use: a cached matrix needs no pattern

    from envlock.matrix.schema import MINOR, show

    row = c.table(raw, path, _IMAGE_FIELDS)
    version = c.string(row, "version", path, _IMAGE_VERSION)
    cuda = c.string(row, "cuda", path, MINOR)
    if ".".join(version.split(".")[:2]) != cuda:
        raise c.fail(f"{path}.cuda", f"{show(cuda)} is not the major.minor of {show(version)}")
    flavour = c.choice(row, "cudnn_flavour", path, CUDNN_FLAVOURS)
    major = c.integer(row, "cudnn_major", path)
    if flavour != "cudnn" and flavour != f"cudnn{major}":
        raise c.fail(f"{path}.cudnn_major", f"{major} does not match the flavour {show(flavour)}")
    cudnn = c.string(row, "cudnn", path, _CUDNN, required=False)
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
    require = c.string(row, "require_cuda", path, required=False)
    if require:
        from envlock.matrix.require import RequireError, parse_require

        try:
            parsed = parse_require(require)
        except RequireError as e:
            raise c.fail(f"{path}.require_cuda", str(e)) from None
        if parsed.cuda != cuda:
            raise c.fail(f"{path}.require_cuda", f"asks for CUDA {parsed.cuda}, not {cuda}")
    return ImageRelease(
        version=version,
        cuda=cuda,
        os=c.strings(row, "os", path, _UBUNTU, non_empty=True),
        cudnn_flavour=flavour,
        cudnn_major=major,
        cudnn=cudnn or None,
        cudnn_note=c.string(row, "cudnn_note", path, required=False),
        cudnn_from=c.source(row, "cudnn_from", path, required=bool(cudnn)),
        source=c.source(row, "from", path),
        digests=tuple(sorted(digests)),
        require_cuda=require,
        require_cuda_from=c.source(row, "require_cuda_from", path, required=bool(require)),
    )


def _driver_branch(c: Checker, raw: Any, path: str) -> DriverBranch:
    row = c.table(raw, path, ("branch", "ends", "from"))
    return DriverBranch(
        branch=c.string(row, "branch", path, _BRANCH),
        ends=c.string(row, "ends", path, _MONTH),
        source=c.source(row, "from", path),
    )


def _ubuntu_row(c: Checker, raw: Any, path: str) -> UbuntuRelease:
    from envlock.matrix.schema import PYTHON_MINOR

    row = c.table(raw, path, ("release", "python", "from"))
    return UbuntuRelease(
        release=c.string(row, "release", path, _UBUNTU),
        python=c.string(row, "python", path, PYTHON_MINOR),
        source=c.source(row, "from", path),
    )


def parse(doc: Mapping[str, Any], filename: str) -> CudaMatrix:
    """Validate a loaded ``cuda.toml`` document."""
    from envlock.matrix.schema import Checker, show

    c = Checker(filename, HINT)
    c.table(doc, "", _TOP_FIELDS)
    schema, data_version = c.header(doc, SCHEMA_VERSION)
    sources = c.sources(doc)

    cuda = [_cuda_row(c, raw, f"cuda[{i}]") for i, raw in enumerate(c.rows(doc, "cuda"))]
    c.distinct("cuda", "version", [r.version for r in cuda])

    branch_rows = c.rows(doc, "driver_branches", required=False)
    branches = [
        _driver_branch(c, raw, f"driver_branches[{i}]") for i, raw in enumerate(branch_rows)
    ]
    c.distinct("driver_branches", "branch", [b.branch for b in branches])
    known_branches = {b.branch for b in branches}
    for i, rel in enumerate(cuda):
        if rel.driver_branch and rel.driver_branch not in known_branches:
            raise c.fail(
                f"cuda[{i}].driver_branch",
                f"{show(rel.driver_branch)} has no [[driver_branches]] row",
            )

    ubuntu = [_ubuntu_row(c, raw, f"ubuntu[{i}]") for i, raw in enumerate(c.rows(doc, "ubuntu"))]
    c.distinct("ubuntu", "release", [u.release for u in ubuntu])
    known_os = {u.release for u in ubuntu}

    images = [_image_row(c, raw, f"images[{i}]") for i, raw in enumerate(c.rows(doc, "images"))]
    c.distinct("images", "version", [im.version for im in images])
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
