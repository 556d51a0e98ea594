"""``matrices/torch.toml`` and ``matrices/jax.toml``: one row per release and CUDA build.

TensorFlow has one CUDA build per release; PyTorch and JAX have several: torch
on the default index is one build per release (torch 2.11.0 there is CUDA 13.0,
``torch/version.py`` says ``cuda = '13.0'``) and the others (cu126, cu128, ...)
live on PyTorch's own index; JAX has one plugin per CUDA major
(``jax-cuda12-plugin``, ``jax-cuda13-plugin``), chosen by the ``jax[cuda12]`` /
``jax[cuda13]`` extra. Each row says what the build states and where it was read:

- ``cuda``/``cuda_full``: torch: ``torch/version.py``'s ``cuda`` and the
  ``cuda-toolkit``/``nvidia-cuda-runtime-cu12`` pin of its Requires-Dist; JAX:
  the major its name states and the lowest CUDA its ``with-cuda`` extra accepts
  (``nvidia-cuda-runtime>=13.0.48`` -> 13.0): JAX states no build CUDA.
- ``cudnn``/``cudnn_full``, ``nccl``: the ``nvidia-cudnn-cuNN`` and
  ``nvidia-nccl-cuNN`` requirement (torch pins them exactly; JAX gives a floor).
- ``compute_capabilities``: as the wheel states them; neither torch nor JAX
  wheels carry a readable list (torch's is compiled into libtorch_cuda.so; no
  text member of the wheel names it), so ``[]`` with
  ``compute_capabilities_from = "unknown"``: resolve's kernels verdict is then
  ``unknown``, never a guess.
- ``index``: ``default`` (the configured index, read by ``envlock matrix
  refresh --project``) or ``pytorch`` (PyTorch's own index, which envlock cannot
  reach here: such rows are kept from ``matrices/torch-published.toml``, each
  with the published table it comes from).
- ``from``: keys of the file's ``[sources]``.

``parse`` validates a loaded document (every problem a ``DataError`` naming the
file and the place); ``dumps`` writes what ``parse`` reads; ``load(project)``
reads the packaged file (cached per process).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from packaging.version import Version

from envlock.errors import DataError

if TYPE_CHECKING:
    from pathlib import Path

    from envlock.matrix.schema import Checker
    from envlock.matrix.tensorflow import TFRelease

PROJECTS = ("torch", "jax")
SCHEMA_VERSION = 1
GENERATED_BY = "envlock matrix refresh"
HINT = "regenerate the file with 'envlock matrix refresh --project torch|jax'"
INDEXES = ("default", "pytorch")
CUDA_SOURCES = (
    "torch/version.py+requires-dist",  # version.py's cuda, the toolkit pin's full version
    "with-cuda-minimum",  # JAX: the lowest nvidia-cuda-runtime its with-cuda extra accepts
    "published-table",  # a row of a table the project publishes (source named in from)
)
CAPABILITY_SOURCES = ("unknown", "published-table", "gpu-machine")  # archlists: gpu-machine

_BUILD = (r"cu[0-9]{2,3}|cuda[0-9]{2}", "cuXYZ or cudaNN")
_FULL = (r"[0-9]+(\.[0-9]+){1,3}", "X.Y[.Z[.W]]")
_OPTIONAL_FULL = (r"([0-9]+(\.[0-9]+){1,3})?", "X.Y[.Z[.W]] or empty")
_CAPABILITY = (r"sm_[0-9]{2,3}[a-z]?|compute_[0-9]{2,3}[a-z]?", "sm_XY or compute_XY")
_SHA256 = (r"([0-9a-f]{64})?", "64 lowercase hex digits or empty")
_TOP = ("schema_version", "data_version", "generated_by", "project", "sources", "builds")
_FIELDS = (
    "version",
    "build",
    "index",
    "python",
    "requires_python",
    "cuda",
    "cuda_full",
    "cuda_from",
    "cudnn",
    "cudnn_full",
    "nccl",
    "compute_capabilities",
    "compute_capabilities_from",
    "requires",
    "wheel",
    "sha256",
    "uploaded",
    "yanked",
    "from",
    "note",
)


@dataclass(frozen=True)
class FrameworkBuild:
    """One CUDA build of one torch or JAX release."""

    project: str  # "torch" | "jax"
    version: Version
    build: str  # "cu130" (torch's local label), "cuda13" (the JAX extra)
    index: str  # one of INDEXES
    python: tuple[str, ...]
    requires_python: str
    cuda: str  # major.minor
    cuda_full: str
    cuda_from: str
    cudnn: str  # major.minor
    cudnn_full: str
    nccl: str  # "" when the build names none
    compute_capabilities: tuple[str, ...]
    compute_capabilities_from: str
    requires: tuple[str, ...]  # the CUDA requirements of the build, markers stripped
    wheel: str  # the file the facts were read from ("" for a published-table row)
    sha256: str
    uploaded: str
    sources: tuple[str, ...]  # keys of [sources]
    yanked: bool = False
    note: str = ""

    @property
    def label(self) -> str:
        """``torch 2.11.0+cu130``, ``jax 0.11.2 [cuda13]``."""
        if self.project == "torch":
            return f"torch {self.version}+{self.build}"
        return f"jax {self.version} [{self.build}]"

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": str(self.version),
            "build": self.build,
            "index": self.index,
            "python": list(self.python),
            "requires_python": self.requires_python,
            "cuda": self.cuda,
            "cuda_full": self.cuda_full,
            "cuda_from": self.cuda_from,
            "cudnn": self.cudnn,
            "cudnn_full": self.cudnn_full,
            "nccl": self.nccl,
            "compute_capabilities": list(self.compute_capabilities),
            "compute_capabilities_from": self.compute_capabilities_from,
            "requires": list(self.requires),
            "wheel": self.wheel,
            "sha256": self.sha256,
            "uploaded": self.uploaded,
            "yanked": self.yanked,
            "from": list(self.sources),
            "note": self.note,
        }


@dataclass(frozen=True)
class BuildMatrix:
    project: str
    data_version: str
    sources: tuple[tuple[str, str], ...]
    builds: tuple[FrameworkBuild, ...]  # sorted by (version, build)
    schema_version: int = SCHEMA_VERSION
    generated_by: str = GENERATED_BY
    digest: str = field(default="", compare=False)

    def source_text(self, key: str) -> str:
        return dict(self.sources).get(key, "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "data_version": self.data_version,
            "generated_by": self.generated_by,
            "project": self.project,
            "sources": dict(self.sources),
            "builds": [b.to_dict() for b in self.builds],
        }


def sort_key(b: FrameworkBuild) -> tuple[Version, Version]:
    return (b.version, Version(b.cuda))


def _build(c: Checker, raw: Any, path: str, project: str) -> FrameworkBuild:
    from envlock.matrix.schema import MINOR, PYTHON_MINOR, UTC_INSTANT, show

    row = c.table(raw, path, _FIELDS)
    version = c.version(row, "version", path)
    if str(version) != row["version"] or version.local or version.epoch or version.is_devrelease:
        raise c.fail(
            f"{path}.version", f"expected a release in canonical form, got {show(row['version'])}"
        )
    build = c.string(row, "build", path, _BUILD)
    if (
        project == "torch"
        and not build.startswith("cu")
        or project == "jax"
        and not build.startswith("cuda")
    ):
        raise c.fail(f"{path}.build", f"{show(build)} is not a {project} build name")
    python = c.strings(row, "python", path, PYTHON_MINOR)
    if not python or list(python) != sorted(set(python), key=Version):
        raise c.fail(f"{path}.python", "expected distinct minors in ascending order")
    requires_python = c.string(row, "requires_python", path, empty=True)
    if requires_python:
        c.specifier(requires_python, f"{path}.requires_python")
    cuda = c.string(row, "cuda", path, MINOR)
    cuda_full = c.string(row, "cuda_full", path, _FULL)
    if not (cuda_full + ".").startswith(cuda + "."):
        raise c.fail(
            f"{path}.cuda_full", f"{show(cuda_full)} does not start with cuda {show(cuda)}"
        )
    major = cuda.split(".")[0]
    stated = build[2:-1] if project == "torch" else build[4:]
    if stated != major:
        raise c.fail(f"{path}.build", f"{show(build)} does not name CUDA {major}")
    cudnn = c.string(row, "cudnn", path, MINOR)
    cudnn_full = c.string(row, "cudnn_full", path, _FULL)
    if not (cudnn_full + ".").startswith(cudnn + "."):
        raise c.fail(
            f"{path}.cudnn_full", f"{show(cudnn_full)} does not start with cudnn {show(cudnn)}"
        )
    requires = c.strings(row, "requires", path)
    for i, line in enumerate(requires):
        req = c.requirement(line, f"{path}.requires[{i}]")
        if req.marker is not None:
            raise c.fail(f"{path}.requires[{i}]", "markers are stripped in the matrix")
    sources = c.strings(row, "from", path)
    for i, key in enumerate(sources):
        if key not in c.source_keys:
            raise c.fail(f"{path}.from[{i}]", f"{show(key)} is not a key of [sources]")
    if not sources:
        raise c.fail(f"{path}.from", "every row names its source")
    uploaded = c.string(row, "uploaded", path, required=False, empty=True)
    if uploaded:
        c.string(row, "uploaded", path, UTC_INSTANT)
    index = c.choice(row, "index", path, INDEXES)
    wheel = c.string(row, "wheel", path, empty=index != "default")
    if wheel and "/" in wheel:
        raise c.fail(f"{path}.wheel", "a file name, not a path")
    return FrameworkBuild(
        project=project,
        version=version,
        build=build,
        index=index,
        python=python,
        requires_python=requires_python,
        cuda=cuda,
        cuda_full=cuda_full,
        cuda_from=c.choice(row, "cuda_from", path, CUDA_SOURCES),
        cudnn=cudnn,
        cudnn_full=cudnn_full,
        nccl=c.string(row, "nccl", path, _OPTIONAL_FULL, empty=True),
        compute_capabilities=c.strings(row, "compute_capabilities", path, _CAPABILITY),
        compute_capabilities_from=c.choice(
            row, "compute_capabilities_from", path, CAPABILITY_SOURCES
        ),
        requires=requires,
        wheel=wheel,
        sha256=c.string(row, "sha256", path, _SHA256, empty=True),
        uploaded=uploaded,
        sources=sources,
        yanked=c.boolean(row, "yanked", path, default=False),
        note=c.string(row, "note", path, required=False, empty=True),
    )


def parse(doc: Mapping[str, Any], filename: str, digest: str = "") -> BuildMatrix:
    """Validate a loaded ``torch.toml`` / ``jax.toml`` document."""
    from envlock.matrix.schema import Checker

    c = Checker(filename, HINT)
    c.table(doc, "", _TOP)
    schema, data_version = c.header(
        doc, SCHEMA_VERSION, hint="use the envlock release that wrote the file, or regenerate it"
    )
    project = c.choice(doc, "project", "", PROJECTS)
    sources = c.sources(doc)
    rows = c.rows(doc, "builds")
    builds = [_build(c, row, f"builds[{i}]", project) for i, row in enumerate(rows)]
    c.distinct("builds", "version+build", [(b.version, b.build) for b in builds])
    builds.sort(key=sort_key)
    return BuildMatrix(
        project=project,
        data_version=data_version,
        sources=sources,
        builds=tuple(builds),
        schema_version=schema,
        generated_by=c.string(doc, "generated_by", "", required=False) or GENERATED_BY,
        digest=digest,
    )


def header(project: str) -> str:
    name = "PyTorch" if project == "torch" else "JAX"
    return (
        f"# {name} releases and CUDA builds as their Linux x86_64 wheels describe them.\n"
        "# Written by 'envlock matrix refresh' from the package index; do not edit by hand.\n"
        f"# Regenerate: envlock matrix refresh --project {project}\n"
        f"# Check:      envlock matrix refresh --project {project} --check\n"
    )


def dumps(matrix: BuildMatrix) -> str:
    from envlock.matrix.tensorflow import _toml_value

    lines = [header(matrix.project).rstrip("\n")]
    lines.append(f"schema_version = {matrix.schema_version}")
    lines.append(f"data_version = {_toml_value(matrix.data_version)}")
    lines.append(f"generated_by = {_toml_value(matrix.generated_by)}")
    lines.append(f"project = {_toml_value(matrix.project)}")
    lines.append("")
    lines.append("[sources]")
    for key, text in matrix.sources:
        lines.append(f"{key} = {_toml_value(text)}")
    for b in sorted(matrix.builds, key=sort_key):
        lines.append("")
        lines.append("[[builds]]")
        for key, value in b.to_dict().items():
            lines.append(f"{key} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"


def load_file(project: str, path: Path | None = None) -> BuildMatrix:
    from envlock.matrix import read_toml

    if project not in PROJECTS:
        raise DataError(f"no build matrix for {project!r}")
    doc, digest, shown = read_toml(f"{project}.toml", path)
    return parse(doc, shown, digest=digest)


@functools.lru_cache(maxsize=4)
def load(project: str) -> BuildMatrix:
    """The packaged matrix of ``project``, validated; cached per process."""
    return load_file(project)


def published(project: str) -> BuildMatrix | None:
    """``matrices/<project>-published.toml``: builds the index cannot show, from
    tables the project publishes (None when there is no such file)."""
    from envlock import resources
    from envlock.matrix import read_toml

    name = f"{project}-published.toml"
    try:
        resources.read_bytes("matrices", name)
    except FileNotFoundError:
        return None
    doc, digest, shown = read_toml(name)
    return parse(doc, shown, digest)


def as_release(b: FrameworkBuild) -> TFRelease:
    """The build in the shape resolve's stages read (``TFRelease``): its CUDA wheels
    are the pip source's requirements, installable wherever the build has a wheel."""
    from envlock.matrix.tensorflow import TFRelease

    return TFRelease(
        version=b.version,
        python=b.python,
        requires_python=b.requires_python,
        cuda=b.cuda,
        cuda_full=b.cuda_full,
        cuda_from=b.cuda_from,
        cudnn=b.cudnn,
        cudnn_from=b.cuda_from if b.cuda_from == "published-table" else "requires-dist",
        compute_capabilities=b.compute_capabilities,
        and_cuda=b.requires,
        wheel=b.wheel,
        sha256=b.sha256,
        yanked=b.yanked,
        note=b.note,
        and_cuda_python=b.python,
        uploaded=b.uploaded,
        compute_capabilities_from=b.compute_capabilities_from,
        prerelease=b.version.is_prerelease,
        project=b.project,
        build=b.build,
        index=b.index,
    )
