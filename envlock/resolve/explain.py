"""Words for resolve's answers: releases and Pythons in short form, the
warnings a Resolution carries, and the hints that say what would work instead
when nothing fits."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from packaging.version import Version

from envlock.errors import NoResolution
from envlock.matrix import TFRelease
from envlock.matrix.cuda import CudaMatrix
from envlock.matrix.gpus import GpuMatrix
from envlock.model import CUDA_SOURCES, Gpu, ImageEndOfLife
from envlock.readers import quoted
from envlock.resolve.constraints import Checked
from envlock.resolve.placement import Placement, place_pip, place_system, python_ranges, series
from envlock.resolve.spec import Spec

# ---------------------------------------------------------------- short forms


def describe(releases: Sequence[TFRelease]) -> str:
    """A set of releases in words: "tensorflow 2.15.0" (one release: named, not its
    series, whose other patches may fit), "tensorflow 2.15.x" or
    "tensorflow 2.14.0-2.16.2"."""
    project = releases[0].project if releases else "tensorflow"
    if len(releases) == 1:
        return releases[0].label
    versions_seen = {r.version for r in releases}
    if len(versions_seen) == 1:
        return f"{project} {next(iter(versions_seen))}"
    all_series = sorted({(r.version.major, r.version.minor) for r in releases})
    if len(all_series) == 1:
        return f"{project} {all_series[0][0]}.{all_series[0][1]}.x"
    versions = sorted(r.version for r in releases)
    return f"{project} {versions[0]}-{versions[-1]}"


def distinct_versions(values: Iterable[str]) -> str:
    """Dotted versions, each once, in version order: "12.2, 12.3"."""
    return ", ".join(sorted(dict.fromkeys(values), key=Version))


def first_distinct(values: Iterable[str], limit: int) -> list[str]:
    """Each value once, in order; past ``limit``, "and N more"."""
    out = list(dict.fromkeys(values))
    if len(out) > limit:
        out = [*out[:limit], f"and {len(out) - limit} more"]
    return out


def distinct_text(values: Iterable[str]) -> str:
    return "; ".join(dict.fromkeys(values))


# ---------------------------------------------------------------- warnings


def compute_warnings(
    release: TFRelease, gpus: Sequence[Gpu], gpu_matrix: GpuMatrix | None
) -> list[str]:
    """Warn when a GPU is served only through PTX JIT, or not at all."""
    out: list[str] = []
    binaries = sorted(
        int(cap[3:].rstrip("abcdefghijklmnopqrstuvwxyz"))
        for cap in release.compute_capabilities
        if cap.startswith("sm_")
    )
    ptx = sorted(
        int(cap[8:].rstrip("abcdefghijklmnopqrstuvwxyz"))
        for cap in release.compute_capabilities
        if cap.startswith("compute_")
    )
    for gpu in gpus:
        label = f"GPU {gpu.name}" if gpu.name else "a GPU"
        capability = gpu.compute_capability
        if capability is None and gpu_matrix is not None:
            model = gpu_matrix.find(gpu.name)
            capability = model.compute_capability if model else None
        if capability is None:
            out.append(
                f"GPU {quoted(gpu.name)}: compute capability unknown (not in matrices/gpus.toml); "
                f"give it with --gpu X.Y to check the compiled kernels"
            )
            continue
        major, minor = (int(x) for x in capability.split("."))
        have = major * 10 + minor
        if not binaries and not ptx:
            out.append(f"{release.label}: the wheel does not list its compiled capabilities")
            continue
        if any(sm // 10 == major and sm <= have for sm in binaries):
            continue
        usable_ptx = [p for p in ptx if p <= have]
        compiled = ", ".join(release.compute_capabilities)
        if usable_ptx and _jit_reported_failing(release, capability):
            out.append(
                f"{label} (compute capability {capability}) has no compiled kernels in "
                f"{release.label} ({compiled}), and the JIT of its "
                f"compute_{usable_ptx[-1]} PTX is reported failing on it: GPU ops will fail "
                f"(the ptx-jit path; sources in matrices/paths.toml)"
            )
        elif usable_ptx:
            out.append(
                f"{label} (compute capability {capability}) has no compiled kernels in "
                f"{release.label} ({compiled}): they are JIT-compiled from "
                f"compute_{usable_ptx[-1]} PTX at first start (minutes; cached afterwards)"
            )
        else:
            out.append(
                f"{label} (compute capability {capability}) is not supported by "
                f"{release.label} (compiled for {compiled}): GPU ops will fail"
            )
    return out


def _jit_reported_failing(release: TFRelease, capability: str) -> bool:
    """Whether matrices/paths.toml reports the PTX JIT of this release failing on GPUs
    of this compute capability (the data the ptx-jit verdict reads)."""
    from envlock.matrix import paths

    return any(
        f.path == "ptx-jit" and f.applies(release.project, str(release.version), capability)
        for f in paths.load().failures
    )


def image_warnings(eol: ImageEndOfLife | None, ref: str) -> list[str]:
    """The base image ``ref``'s end of life in words: deleted, end-of-life, or when it
    will be (``CudaMatrix.end_of_life`` finds it)."""
    if eol is None:
        return []
    if eol.state == "deleted":
        return [f"{ref} is gone: {eol.note}; build from a mirror that still has it (--base-image)"]
    if eol.state == "eol":
        return [
            f"{ref} is end-of-life ({eol.note}); NVIDIA deletes end-of-life tags "
            f"six months later: pin it by digest or mirror it"
        ]
    return [
        f"{ref}: CUDA {eol.cuda} shipped with driver branch {eol.branch}, "
        f"supported until {eol.ends}; NVIDIA deletes the tags six months after "
        f"that: pin it by digest or mirror it"
    ]


# ---------------------------------------------------------------- when nothing fits


def no_match(
    spec: Spec, newest_first: Sequence[TFRelease], prereleases: bool = False
) -> NoResolution:
    """No release matches the SPEC itself (``newest_first``: every row, pre-releases
    included; ``prereleases``: whether they were candidates)."""
    inside = [r for r in newest_first if spec.admits(r.version)]
    yanked = [r for r in inside if r.yanked and (prereleases or not r.prerelease)]
    candidates = [r for r in inside if r.prerelease and not r.yanked and not prereleases]
    finals = [r for r in newest_first if not r.yanked and not r.prerelease]
    p = spec.project
    hints: list[str] = []
    if candidates:
        newest = candidates[0].version
        hints.append(
            f"{p} {newest} is a pre-release, used only with --pre or when pinned ({p}=={newest})"
        )
    if yanked:
        pins = ", ".join(f"{p}=={r.version}" for r in yanked[:3])
        hints.append(f"yanked releases are used only when pinned exactly ({pins})")
    if spec.prereleases and not inside:
        pres = [r for r in newest_first if r.prerelease]
        if pres:
            hints.append(
                f"the matrix's pre-releases are {p} {pres[-1].version} to {pres[0].version}"
            )
        else:
            hints.append("the matrix holds no pre-releases")
    if spec.epoch:
        hints.append(f"{p} releases are all in epoch 0; drop the 'N!' part")
    if spec.local:
        hints.append("the matrix holds index releases only, no local labels; drop the '+...' part")
    if finals:
        hints.append(f"the matrix has {p} {finals[-1].version} to {finals[0].version}")
    return NoResolution(
        f"no {p} release matches {quoted(spec.text)}",
        hint="; ".join(hints) or f"try '{p}' to get the newest release",
    )


def nearest(blocked: Sequence[TFRelease], passing: Sequence[TFRelease]) -> str | None:
    """The release series nearest to the blocked set among ``passing`` (the
    releases that pass every constraint but the SPEC), as a SPEC."""
    if not passing:
        return None
    p = passing[0].cuda_wheels if passing[0].project == "jax" else passing[0].project
    # another patch of the blocked releases' own series fits: name it (==X.Y or >=X.Y
    # would reach past it, to another patch or the newest release)
    blocked_series = {series(r) for r in blocked}
    same = [r for r in passing if series(r) in blocked_series]
    if same:
        return f"{p}=={max(same, key=lambda r: r.version).version}"
    lowest = min(r.version for r in blocked)
    highest = max(r.version for r in blocked)
    newer = [r for r in passing if r.version > highest]
    older = [r for r in passing if r.version < lowest]
    if newer:
        return f"{p}>={series(min(newer, key=lambda r: r.version))}"
    if older:
        return f"{p}=={series(max(older, key=lambda r: r.version))}"
    return f"{p}=={max(passing, key=lambda r: r.version).version}"


def and_cuda_python_hint(
    checked: Checked, release: TFRelease, cuda_matrix: CudaMatrix
) -> str | None:
    """``--python 3.10 or 3.9`` when the pip source fails only for the asked Python."""
    if not checked.python or checked.source == "system" or not release.and_cuda:
        return None
    if checked.python in release.and_cuda_python or not release.and_cuda_python:
        return None
    placed = place_pip(release, cuda_matrix, checked.os, release.and_cuda_python[-1])
    if not isinstance(placed, Placement):
        return None
    pythons = " or ".join(reversed(release.and_cuda_python))
    return (
        f"--python {pythons} (every {release.cuda_wheels} {release.version} requirement has "
        f"Linux x86_64 wheels for {python_ranges(release.and_cuda_python)})"
    )


def source_alternatives(checked: Checked, release: TFRelease, cuda_matrix: CudaMatrix) -> list[str]:
    """Other settings under which ``release`` would place: another source, another OS."""

    def try_source(source: str, os: str | None) -> Placement | None:
        if source == "pip":
            placed = place_pip(release, cuda_matrix, os, checked.python)
        else:
            placed = place_system(release, cuda_matrix, os, checked.python)
        return placed if isinstance(placed, Placement) else None

    out: list[str] = []
    for source in CUDA_SOURCES:
        if source == checked.source:
            continue
        placed = try_source(source, checked.os)
        if placed is not None:
            if source == "system" and checked.spec.and_cuda:
                out.append(f"drop [and-cuda] for CUDA from the image (nvidia/cuda:{placed.tag})")
            else:
                out.append(f"--cuda-source {source} (nvidia/cuda:{placed.tag})")
    if checked.os:
        for source in CUDA_SOURCES if checked.source is None else (checked.source,):
            placed = try_source(source, None)
            if placed is not None:
                out.append(f"drop --os (nvidia/cuda:{placed.tag})")
                break
    return out
