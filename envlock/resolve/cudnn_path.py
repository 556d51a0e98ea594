"""The cuDNN path of ``envlock.resolve.paths``: whether the build's cuDNN wheel (or the
image's cuDNN) has device code for a GPU, with the caps of ``libraries.toml`` (a
version range that dropped or broke an architecture) and the lock that steps
around them. Split from paths.py by size; it reads paths' types."""

from __future__ import annotations

from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envlock.matrix.libraries import LibraryCap, LibraryMatrix
from envlock.matrix.paths import PathsMatrix
from envlock.resolve.pathtypes import Build, PathVerdict, Tools, _lock_fix


def _wanted(cap: LibraryCap) -> str:
    """What to install instead of a version ``cap`` rules out: from the version a
    source verified to work (a broken range), else the cap itself (below a drop)."""
    return f">={cap.works_from}" if cap.works_from else cap.cap


def _none_left(cap: LibraryCap, version: str) -> bool:
    """Whether ``cap`` (a drop) leaves no release of ``version``'s major: the
    complement of ">=9" admits no 9.x, so no lock can step around it."""
    major = version.split(".")[0]
    allowed = SpecifierSet(cap.cap)
    return cap.kind == "dropped" and not any(
        allowed.contains(f"{major}.{minor}", prereleases=True) for minor in range(100)
    )


def _lowest(spec: SpecifierSet) -> str:
    """The lowest version a requirement admits, as far as its >= / == bound says."""
    for s in spec:
        if s.operator in (">=", "==", "~=") and "*" not in s.version:
            return s.version
    return "0"


def cudnn_verdict(
    build: Build,
    gpu_name: str,
    capability: str,
    tools: Tools,
    arch: Any,
    table: PathsMatrix,
    libraries: LibraryMatrix | None,
) -> PathVerdict:
    # the build's cuDNN wheel: nvidia-cudnn-cu12 for a CUDA 12 build, -cu13 for CUDA 13; a
    # cap in libraries.toml is for one of them (cuDNN for CUDA 12 dropped pre-Turing)
    cudnn_wheel = f"nvidia-cudnn-cu{build.cuda.split('.')[0]}"
    needs_from = arch.cudnn if arch is not None else None
    arch_sources = table.urls(arch.sources) if arch is not None else ()
    caps = [
        c
        for c in (libraries.caps if libraries else ())
        if c.package == cudnn_wheel
        and c.on_gpu(capability)
        and c.for_release(build.framework, build.version)
    ]
    if tools.cudnn:
        version = tools.cudnn
        for cap in caps:
            if cap.affects(version) and _none_left(cap, version):
                return PathVerdict(
                    "cudnn",
                    "cannot",
                    f"cuDNN {version}: {cap.effect}; no {cudnn_wheel} {version.split('.')[0]}.x "
                    "outside that",
                    "",
                    libraries.urls(cap) if libraries else (),
                )
            if cap.affects(version):
                fix = (
                    _lock_fix(tools, gpu_name or capability)
                    if tools.lock_spec
                    else f"{tools.install} '{cudnn_wheel}{_wanted(cap)}'"
                )
                return PathVerdict(
                    "cudnn",
                    "needs",
                    f"cuDNN {version}: {cap.effect}; a lock for this GPU takes "
                    f"{cudnn_wheel}{cap.cap}",
                    fix,
                    libraries.urls(cap) if libraries else (),
                )
        if needs_from and Version(version) < Version(needs_from):
            return PathVerdict(
                "cudnn",
                "needs",
                f"cuDNN {version} has no device code for compute capability {capability} "
                f"(from cuDNN {needs_from})",
                f"{tools.install} '{cudnn_wheel}>={needs_from},<10'",
                arch_sources,
            )
        return PathVerdict(
            "cudnn", "works", f"cuDNN {version} has device code for compute capability {capability}"
        )
    if tools.cudnn_range:
        try:
            spec = Requirement(tools.cudnn_range).specifier
        except InvalidRequirement:
            spec = SpecifierSet()
        allowed = spec
        for cap in caps:
            allowed &= SpecifierSet(cap.cap)
        gone = [c for c in caps if _none_left(c, _lowest(spec))]
        if gone:
            return PathVerdict(
                "cudnn",
                "cannot",
                f"{tools.cudnn_range}: {gone[0].effect}",
                "",
                tuple(u for c in gone for u in (libraries.urls(c) if libraries else ())),
            )
        kept = ", ".join(f"{cudnn_wheel}{c.cap}" for c in caps)
        capped = f"; a lock for this GPU adds {kept} (libraries.toml)" if caps else ""
        cap_sources = tuple(u for c in caps for u in (libraries.urls(c) if libraries else ()))
        if needs_from and not allowed.contains(f"{needs_from}.999", prereleases=True):
            return PathVerdict(
                "cudnn",
                "needs",
                f"{tools.cudnn_range} admits no cuDNN with device code for compute capability "
                f"{capability} (from cuDNN {needs_from}){capped}",
                f"{tools.install} '{cudnn_wheel}>={needs_from},<10'",
                arch_sources + cap_sources,
            )
        return PathVerdict(
            "cudnn",
            "works",
            f"{tools.cudnn_range}: a lock takes the newest that runs on compute capability "
            f"{capability}{capped}",
            "",
            arch_sources + cap_sources,
        )
    return PathVerdict("cudnn", "unknown", "which cuDNN the environment has is not known here")
