"""``envlock matrix refresh --project torch|jax``: the build matrices, read from the wheels.

torch: for every 2.x release with Linux x86_64 CPython wheels on the configured
index, one wheel's ``torch/version.py`` (``cuda = '13.0'``) and METADATA
(Requires-Dist: ``cuda-toolkit[...]==13.0.2``, ``nvidia-cudnn-cu13==9.19.0.56``,
``nvidia-nccl-cu13==2.28.9``), by range requests (a few per wheel, about 1.3 MB
of a 530 MB wheel; never a download). The builds on PyTorch's own index (cu126,
cu128, ...) cannot be read from here: they come from
``matrices/torch-published.toml`` (rows of PyTorch's published compatibility
matrix, each naming it), kept where the index has no row for the same release
and build.

JAX: for each CUDA major, every ``jax-cudaNN-plugin`` release's METADATA (its
``with-cuda`` extra: ``nvidia-cuda-runtime>=13.0.48``, ``nvidia-cudnn-cu13>=9.12.0.46``).

``refresh`` returns the matrix; the command writes it (``dumps``) or compares it
(``--check``) with the shipped file.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from email.parser import BytesHeaderParser
from typing import TYPE_CHECKING, Any

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

from envlock.errors import DataError
from envlock.index.pep691 import IndexFile
from envlock.matrix import builds
from envlock.matrix.builds import (
    GENERATED_BY,
    SCHEMA_VERSION,
    BuildMatrix,
    FrameworkBuild,
    sort_key,
)

if TYPE_CHECKING:
    import requests

JAX_MAJORS = ("12", "13")
OLDEST_TORCH = Version("2.0")
_VERSION_PY = re.compile(r"^cuda\s*(?::[^=\n]*)?=\s*['\"]([0-9]+\.[0-9]+)['\"]", re.MULTILINE)
_CUDA_NAMES = re.compile(r"^(nvidia-.*|cuda-toolkit|cuda-bindings|jax-cuda[0-9]+-pjrt)$")

READ_SOURCE = "read-index"
READ_TEXT = {
    "torch": (
        "read by 'envlock matrix refresh --project torch' from the configured package index: "
        "one Linux x86_64 wheel per release, its torch/version.py (cuda = 'X.Y') and METADATA "
        "(Requires-Dist: the cuda-toolkit or nvidia-cuda-runtime-cuNN pin, nvidia-cudnn-cuNN, "
        "nvidia-nccl-cuNN), by HTTP range requests"
    ),
    "jax": (
        "read by 'envlock matrix refresh --project jax' from the configured package index: "
        "one Linux x86_64 wheel per jax-cudaNN-plugin release, its METADATA (the with-cuda "
        "extra's nvidia-* floors), by HTTP range requests; JAX states no build CUDA, so cuda "
        "is the lowest the extra accepts (nvidia-cuda-runtime[-cu12]>=X.Y)"
    ),
}
NO_CAPS_NOTE = {
    "torch": (
        "compute_capabilities: unknown: the wheel's compiled sm targets are inside "
        "libtorch_cuda.so and no text member of the wheel names them"
    ),
    "jax": (
        "compute_capabilities: unknown: the plugin's compiled sm targets are inside its "
        "shared objects and no text member of the wheel names them"
    ),
}


@dataclass(frozen=True)
class RefreshResult:
    matrix: BuildMatrix
    read: int  # wheels read
    requests: int
    bytes_read: int
    seconds: float
    skipped: tuple[str, ...] = ()  # releases without a CUDA build, with why


def _linux_minors(filename: str) -> tuple[str, ...]:
    from envlock.matrix.refresh import _cpython3_minors

    return _cpython3_minors(filename)


def _releases(files: Iterable[IndexFile], oldest: Version) -> dict[Version, list[IndexFile]]:
    out: dict[Version, list[IndexFile]] = {}
    for f in files:
        if not _linux_minors(f.filename):
            continue
        version = parse_wheel_filename(f.filename)[1]
        if version < oldest or version.is_devrelease or version.is_prerelease:
            continue
        if version.local or version.epoch:
            continue
        out.setdefault(version, []).append(f)
    return out


def _chosen(files: list[IndexFile]) -> IndexFile:
    def rank(f: IndexFile) -> tuple[bool, Version, str]:
        return (not f.yanked, max(Version(m) for m in _linux_minors(f.filename)), f.filename)

    return max(files, key=rank)


def _python(files: list[IndexFile]) -> tuple[str, ...]:
    return tuple(sorted({m for f in files for m in _linux_minors(f.filename)}, key=Version))


def _uploaded(files: list[IndexFile]) -> str:
    from envlock.matrix.refresh import first_upload

    return first_upload(files)


def cuda_requirements(requires_dist: Iterable[str], extra: str, python: str) -> list[Requirement]:
    """The CUDA requirements that apply on Linux x86_64 with ``extra`` (``""``: none)."""
    env = {
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "os_name": "posix",
        "python_version": python,
        "python_full_version": f"{python}.0",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "extra": extra,
    }
    out = []
    for line in requires_dist:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if not _CUDA_NAMES.match(canonicalize_name(req.name)):
            continue
        marker: Marker | None = req.marker
        if marker is not None and not marker.evaluate(env):
            continue
        req.marker = None
        out.append(req)
    return out


def _pin(reqs: Iterable[Requirement], pattern: str) -> tuple[str, str]:
    """(version, operator) of the first requirement whose name matches ``pattern`` and
    that pins (``==``) or floors (``>=``) a version; ("", "") when none."""
    for req in reqs:
        if re.fullmatch(pattern, canonicalize_name(req.name)):
            for spec in req.specifier:
                if spec.operator in ("==", "===", ">="):
                    return spec.version, spec.operator
    return "", ""


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _read(sess: requests.Session, index: str, f: IndexFile, members: tuple[str, ...]) -> Any:
    from envlock.matrix.refresh import range_fetcher
    from envlock.matrix.wheel_members import read_listing

    return read_listing(range_fetcher(sess, f.url, index, f.size), f.filename, members)


def _metadata_name(filename: str) -> str:
    name, version, *_ = parse_wheel_filename(filename)
    return f"{str(name).replace('-', '_')}-{version}.dist-info/METADATA"


def torch_row(version: Version, files: list[IndexFile], listing: Any) -> FrameworkBuild | str:
    """The row of one torch release, or why it has none (a CPU-only wheel)."""
    f = _chosen(files)
    meta = listing.members.get(_metadata_name(f.filename))
    if meta is None:
        raise DataError(f"{f.filename}: no {_metadata_name(f.filename)} in the wheel")
    version_py = listing.members.get("torch/version.py", b"").decode("utf-8", "replace")
    found = _VERSION_PY.search(version_py)
    if found is None:
        return f"torch {version}: torch/version.py states no CUDA (a CPU build)"
    cuda = found.group(1)
    msg = BytesHeaderParser().parsebytes(meta)
    python = _python(files)
    reqs = cuda_requirements(msg.get_all("Requires-Dist", []), "", python[-1])
    toolkit, _ = _pin(reqs, r"cuda-toolkit")
    runtime, _ = _pin(reqs, r"nvidia-cuda-runtime(-cu[0-9]+)?")
    cudnn, _ = _pin(reqs, r"nvidia-cudnn-cu[0-9]+")
    nccl, _ = _pin(reqs, r"nvidia-nccl-cu[0-9]+")
    if not cudnn:
        return f"torch {version}: no nvidia-cudnn requirement on Linux x86_64"
    full = toolkit if toolkit and _minor(toolkit) == cuda else cuda
    note = NO_CAPS_NOTE["torch"]
    if runtime and not toolkit:
        note += (
            f"; cuda_full: version.py's {cuda} (the runtime pin is {runtime}, a library version)"
        )
    return FrameworkBuild(
        project="torch",
        version=version,
        build="cu" + cuda.replace(".", ""),
        index="default",
        python=python,
        requires_python=str(msg.get("Requires-Python", "") or "").strip(),
        cuda=cuda,
        cuda_full=full,
        cuda_from="torch/version.py+requires-dist",
        cudnn=_minor(cudnn),
        cudnn_full=cudnn,
        nccl=nccl,
        compute_capabilities=(),
        compute_capabilities_from="unknown",
        requires=tuple(str(r) for r in reqs),
        wheel=f.filename,
        sha256=f.sha256,
        uploaded=_uploaded(files),
        sources=(READ_SOURCE,),
        yanked=all(x.yanked for x in files),
        note=note,
    )


def jax_row(
    major: str, version: Version, files: list[IndexFile], listing: Any
) -> FrameworkBuild | str:
    f = _chosen(files)
    meta = listing.members.get(_metadata_name(f.filename))
    if meta is None:
        raise DataError(f"{f.filename}: no {_metadata_name(f.filename)} in the wheel")
    msg = BytesHeaderParser().parsebytes(meta)
    python = _python(files)
    lines = msg.get_all("Requires-Dist", [])
    extra = "with-cuda"
    reqs = cuda_requirements(lines, extra, python[-1])
    if not any(canonicalize_name(r.name).startswith("nvidia-") for r in reqs):
        extra = "with_cuda"  # the 0.4 plugins spell it so
        reqs = cuda_requirements(lines, extra, python[-1])
    runtime, _ = _pin(reqs, r"nvidia-cuda-runtime(-cu[0-9]+)?")
    cudnn, _ = _pin(reqs, r"nvidia-cudnn-cu[0-9]+")
    nccl, _ = _pin(reqs, r"nvidia-nccl-cu[0-9]+")
    if not runtime or not cudnn:
        return (
            f"jax-cuda{major}-plugin {version}: its with-cuda extra names no CUDA runtime or cuDNN"
        )
    if runtime.split(".")[0] != major:
        raise DataError(
            f"{f.filename}: the with-cuda extra asks for CUDA {runtime}, not CUDA {major}"
        )
    return FrameworkBuild(
        project="jax",
        version=version,
        build=f"cuda{major}",
        index="default",
        python=python,
        requires_python=str(msg.get("Requires-Python", "") or "").strip(),
        cuda=_minor(runtime),
        cuda_full=_minor(runtime),
        cuda_from="with-cuda-minimum",
        cudnn=_minor(cudnn),
        cudnn_full=cudnn,
        nccl=nccl,
        compute_capabilities=(),
        compute_capabilities_from="unknown",
        requires=tuple(str(r) for r in reqs),
        wheel=f.filename,
        sha256=f.sha256,
        uploaded=_uploaded(files),
        sources=(READ_SOURCE,),
        yanked=all(x.yanked for x in files),
        note=NO_CAPS_NOTE["jax"],
    )


def refresh(
    index: str, project: str, *, jobs: int = 8, only: Iterable[Version] | None = None
) -> RefreshResult:
    """Read every release's facts from the index and build the matrix."""
    from envlock.index import http
    from envlock.matrix.refresh import project_files

    started = time.monotonic()
    sess = http.session(http.HttpSettings.from_env(pool_size=max(jobs, 4)))
    work: list[tuple[str, Version, list[IndexFile], tuple[str, ...]]] = []
    newest = ""
    try:
        if project == "torch":
            pages = [("", "torch")]
        else:
            pages = [(m, f"jax-cuda{m}-plugin") for m in JAX_MAJORS]
        for major, name in pages:
            files = project_files(sess, index, name)
            oldest = OLDEST_TORCH if project == "torch" else Version("0")
            for version, group in sorted(_releases(files, oldest).items()):
                if only is not None and version not in set(only):
                    continue
                f = _chosen(group)
                wanted: tuple[str, ...] = (_metadata_name(f.filename),)
                if project == "torch":
                    wanted += ("torch/version.py",)
                work.append((major, version, group, wanted))
                newest = max([newest, *(x.upload_time for x in group)])
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            listings = list(pool.map(lambda w: _read(sess, index, _chosen(w[2]), w[3]), work))
    finally:
        sess.close()
    rows: list[FrameworkBuild] = []
    skipped: list[str] = []
    for (major, version, group, _wanted), listing in zip(work, listings, strict=True):
        row = (
            torch_row(version, group, listing)
            if project == "torch"
            else jax_row(major, version, group, listing)
        )
        if isinstance(row, str):
            skipped.append(row)
        else:
            rows.append(row)
    sources: list[tuple[str, str]] = [(READ_SOURCE, READ_TEXT[project])]
    extra = builds.published(project)
    if extra is not None:
        have = {(b.version, b.build) for b in rows}
        kept = [b for b in extra.builds if (b.version, b.build) not in have]
        if only is not None:
            kept = [b for b in kept if b.version in set(only)]
        used = {k for b in kept for k in b.sources}
        sources += [(k, t) for k, t in extra.sources if k in used]
        rows += kept
    # sm targets read on a GPU machine where the wheel names none (matrices/arch-lists.toml)
    from envlock.matrix import archlists

    table = archlists.load()
    if only is None:  # a partial refresh (--version) holds some releases only
        archlists.check_known(table, rows)
    rows, arch_sources = archlists.applied(rows, table)
    sources += arch_sources
    rows.sort(key=sort_key)
    matrix = BuildMatrix(
        project=project,
        data_version=newest[:10] if newest else "1970-01-01",
        sources=tuple(sources),
        builds=tuple(rows),
        schema_version=SCHEMA_VERSION,
        generated_by=GENERATED_BY,
    )
    return RefreshResult(
        matrix=matrix,
        read=len(listings),
        requests=sum(x.requests for x in listings) + len(pages),
        bytes_read=sum(x.bytes_read for x in listings),
        seconds=time.monotonic() - started,
        skipped=tuple(skipped),
    )


def drift(shipped: BuildMatrix, fresh: BuildMatrix) -> list[str]:
    """What differs, row by row: ``new``, ``gone`` and ``changed`` lines; [] when current."""
    old: Mapping[tuple[Version, str], FrameworkBuild] = {
        (b.version, b.build): b for b in shipped.builds
    }
    new: Mapping[tuple[Version, str], FrameworkBuild] = {
        (b.version, b.build): b for b in fresh.builds
    }
    lines = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        label = (b or a).label  # type: ignore[union-attr]
        if a is None:
            lines.append(f"new: {label}")
        elif b is None:
            lines.append(f"gone: {label} (the index no longer lists it)")
        else:
            da, db = a.to_dict(), b.to_dict()
            changed = [k for k in da if da[k] != db[k]]
            if changed:
                shown = "; ".join(f"{k}: {da[k]!r} -> {db[k]!r}" for k in changed[:4])
                lines.append(f"changed: {label}: {shown}")
    return lines
