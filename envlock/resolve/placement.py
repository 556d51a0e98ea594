"""Base-image placement: where a release runs (CUDA source, nvidia/cuda image,
Ubuntu release, Python), or why it has no place.

- ``system`` source: CUDA and cuDNN come from a ``-cudnn-runtime`` image whose
  cuDNN has the compiled major and at least the compiled minor. The image's
  CUDA is the compiled minor when such an image has a new enough cuDNN, else
  the nearest newer minor of the same major (minor-version compatibility,
  CUDA 11+).
- ``pip`` source: the nvidia-* wheels of ``tensorflow[and-cuda]`` on a small
  ``-base`` image, with a Python every and-cuda requirement has wheels for.
- The default (no source asked for) is system, falling back to pip with a
  warning when no image fits (TensorFlow 2.16/2.17: cuDNN 8.9 with CUDA 12.3,
  for which no cudnn8 image exists); an explicit ``--cuda-source system``
  fails instead.
- OS: the Ubuntu release whose own python3 is the chosen Python when the image
  exists for it (no second interpreter in the image), else the newest Ubuntu
  the image exists for (longest support).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from packaging.version import Version

from envlock.matrix import TFRelease
from envlock.matrix.cuda import CudaMatrix, ImageRelease, UbuntuRelease
from envlock.model import OLDEST_PYTHON

_CP_TAG = re.compile(r"\bcp3[0-9]+\b")

# how a reason says the Python was asked for (envlock.lock.core rewrites it when
# the pins chose the Python)
ASKED_PYTHON = "as asked (--python)"


@dataclass(frozen=True)
class Placement:
    """Where a release runs: CUDA source, base image, OS, and why."""

    source: str
    image: ImageRelease
    os: UbuntuRelease
    tag: str
    reasons: tuple[str, ...]
    warnings: tuple[str, ...]
    python: str  # the CPython minor it runs with
    python_reason: str = ""  # why that Python (the release's wheels, the image's Ubuntu)


@dataclass(frozen=True)
class NoPlacement:
    """Why a release has no base image under the constraints."""

    reason: str


def python_ranges(versions: Iterable[str]) -> str:
    """["3.9", "3.10", "3.11", "3.13"] -> "3.9-3.11, 3.13"."""
    minors = sorted({int(v.split(".")[1]) for v in versions})
    parts: list[str] = []
    start = prev = None
    for minor in minors:
        if start is None:
            start = prev = minor
        elif prev is not None and minor == prev + 1:
            prev = minor
        else:
            parts.append(f"3.{start}" if start == prev else f"3.{start}-3.{prev}")
            start = prev = minor
    if start is not None:
        parts.append(f"3.{start}" if start == prev else f"3.{start}-3.{prev}")
    return ", ".join(parts)


def series(release: TFRelease) -> str:
    """The release's X.Y: "2.15"."""
    return f"{release.version.major}.{release.version.minor}"


def _split_minor(text: str) -> tuple[int, int]:
    major, minor = text.split(".")[:2]
    return int(major), int(minor)


def _pick_os(
    cuda_matrix: CudaMatrix,
    image: ImageRelease,
    want_os: str | None,
    python: str | None,
    pythons: Sequence[str] = (),
    *,
    python_said: str = f" {ASKED_PYTHON}",
) -> tuple[UbuntuRelease, str, str, str] | None:
    """Choose the Ubuntu release of an image and the Python: (Ubuntu, Python,
    why this OS, why this Python); None when ``want_os`` is not there.

    ``python`` None: the newest of ``pythons`` (the minors the release can be
    installed on) that an Ubuntu of the image ships as its own python3, on the
    newest such Ubuntu; when none does, the newest of ``pythons`` as a
    standalone CPython on the newest Ubuntu. ``python_said``: why a given
    ``python`` is the one, in the words after "Python 3.X" (" as asked (--python)";
    lock's ": the newest that ... your pins allow (...)")."""
    releases = [u for u in (cuda_matrix.ubuntu_release(o) for o in image.os) if u is not None]
    candidates = [p for p in pythons if Version(p) >= Version(OLDEST_PYTHON)]
    newest_first = sorted(releases, key=lambda u: Version(u.release), reverse=True)
    if want_os is not None:
        newest_first = [u for u in newest_first if u.name == want_os]
        if not newest_first:
            return None
    shown = python_ranges(candidates)
    if python is None:
        shipped = [u for u in newest_first if u.python in candidates]
        if shipped:
            best = max(shipped, key=lambda u: (Version(u.python), Version(u.release)))
            others = [u for u in newest_first if u.python not in candidates]
            python_why = (
                f"Python {best.python}: the newest of {shown} (the release's wheels) that "
                f"{'the asked ' if want_os else 'an '}Ubuntu of the image ships as its own "
                f"python3 ({best.name}), so no standalone CPython is needed"
            )
            if not want_os and others:
                python_why += (
                    "; "
                    + ", ".join(f"{u.name} ships {u.python}" for u in others)
                    + ", which the release has no wheel for"
                )
            os_why = (
                f"{best.name} as asked (--os)"
                if want_os
                else (f"{best.name}: its own python3 is {best.python}, the chosen Python")
            )
            return best, best.python, os_why, python_why
        python = candidates[-1] if candidates else (pythons[-1] if pythons else "")
        ships = ", ".join(f"{u.name}: {u.python}" for u in newest_first)
        python_why = (
            f"Python {python}: the newest of {shown} (the release's wheels); no Ubuntu of "
            f"the image ships one of them as python3 ({ships}), so a standalone CPython "
            f"{python} is installed (uv python install)"
        )
        newest = newest_first[0]
        os_why = (
            f"{newest.name} as asked (--os)"
            if want_os
            else (
                f"{newest.name}: the newest Ubuntu with this image; no Ubuntu it exists for has "
                f"python3 {python} (Python comes from a standalone build)"
            )
        )
        return newest, python, os_why, python_why
    python_why = f"Python {python}{python_said}; wheels exist for {shown}"
    if want_os is not None:
        ubuntu = newest_first[0]
        if ubuntu.python != python:
            python_why += (
                f"; {ubuntu.name} ships python3 {ubuntu.python}, so a standalone CPython "
                f"{python} is installed (uv python install)"
            )
        return ubuntu, python, f"{ubuntu.name} as asked (--os)", python_why
    for ubuntu in newest_first:
        if ubuntu.python == python:
            return (
                ubuntu,
                python,
                (f"{ubuntu.name}: its own python3 is {python}, the chosen Python"),
                python_why,
            )
    newest = newest_first[0]
    python_why += (
        f"; no Ubuntu of the image ships python3 {python}, so a standalone CPython is "
        f"installed (uv python install)"
    )
    return (
        newest,
        python,
        (
            f"{newest.name}: the newest Ubuntu with this image; no Ubuntu it exists for has "
            f"python3 {python} (Python comes from a standalone build)"
        ),
        python_why,
    )


def _host_supports(driver_cuda: str | None, cuda: str) -> bool:
    """Whether the detected host driver supports CUDA ``cuda`` (major.minor)."""
    if not driver_cuda:
        return False
    return Version(driver_cuda) >= Version(cuda)


def _os_list(image: ImageRelease) -> str:
    return ", ".join(f"ubuntu{o}" for o in image.os)


def _newest_patch_first(image: ImageRelease) -> list[int]:
    return [-part for part in image.release]


def place_system(
    release: TFRelease,
    cuda_matrix: CudaMatrix,
    os: str | None,
    python: str | None,
    driver_cuda: str | None = None,
    runs: Callable[[ImageRelease], bool] = lambda image: True,
    *,
    python_said: str = f" {ASKED_PYTHON}",
) -> Placement | NoPlacement:
    """The system source: a cudnn runtime image that fits the build."""
    cuda_major, cuda_minor = _split_minor(release.cuda)
    cudnn_need = Version(release.cudnn)
    cudnn_major = int(release.cudnn.split(".")[0])
    notes: list[str] = []
    ranked: list[tuple[tuple[int, int, int], ImageRelease, bool]] = []
    for image in cuda_matrix.images:
        major, minor = _split_minor(image.cuda)
        if major != cuda_major or minor < cuda_minor:
            continue
        if minor > cuda_minor and major < 11:
            continue  # no minor-version compatibility before CUDA 11
        if image.cudnn_major != cudnn_major:
            continue
        found = image.cudnn_key
        if found is not None and found < cudnn_need:
            notes.append(
                f"nvidia/cuda:{image.version}-{image.cudnn_flavour} carries cuDNN {image.cudnn}, "
                f"older than the {release.cudnn} TensorFlow {series(release)} was built with"
            )
            continue
        known = found is not None
        same = minor == cuda_minor
        # rank: same CUDA minor first (known cuDNN before unknown), then the nearest
        # newer minor with a known cuDNN, then unknown ones; newest patch first.
        rank = (0 if same else 1, 0 if (known or same) else 1, minor - cuda_minor)
        if same and not known:
            rank = (0, 1, 0)
        ranked.append((rank, image, known))
    if not ranked:
        what = f"cuDNN {cudnn_major}.x >= {release.cudnn} with CUDA {release.cuda}"
        if cuda_major >= 11:
            what += f" or a newer CUDA {cuda_major}.x"
        reason = f"no nvidia/cuda cudnn image carries {what}"
        if notes:
            reason += " (" + "; ".join(notes) + ")"
        return NoPlacement(reason)
    ranked.sort(key=lambda item: (not runs(item[1]), item[0], _newest_patch_first(item[1])))
    os_misses: list[str] = []
    for _rank, image, known in ranked:
        picked = _pick_os(cuda_matrix, image, os, python, release.python, python_said=python_said)
        if picked is None:
            os_misses.append(f"{image.version} ({_os_list(image)})")
            continue
        ubuntu, chosen, os_reason, python_reason = picked
        tag = image.tag("runtime", ubuntu.release, cudnn=True)
        reasons: list[str] = []
        warnings: list[str] = []
        minor = _split_minor(image.cuda)[1]
        cudnn_text = f"cuDNN {image.cudnn}" if known else f"cuDNN {image.cudnn_major}.x"
        if minor == cuda_minor:
            reasons.append(
                f"base image nvidia/cuda:{tag}: CUDA {image.version} with {cudnn_text}, "
                f"for a build with CUDA {release.cuda} and cuDNN {release.cudnn}"
            )
        else:
            reasons.append(
                f"base image nvidia/cuda:{tag}: no CUDA {release.cuda} image has a cuDNN "
                f"{cudnn_major}.x >= {release.cudnn}; CUDA {image.version} runs a CUDA "
                f"{release.cuda} build by minor-version compatibility and has {cudnn_text}"
            )
        reasons.extend(notes)
        if not known:
            warnings.append(
                f"the exact cuDNN inside nvidia/cuda:{tag} is not recorded (the tag promises "
                f"cuDNN {image.cudnn_major}.x; tensorflow {release.version} needs >= "
                f"{release.cudnn}): check NV_CUDNN_VERSION in the image"
            )
        reasons.append(f"OS {os_reason}")
        return Placement(
            "system", image, ubuntu, tag, tuple(reasons), tuple(warnings), chosen, python_reason
        )
    return NoPlacement(
        f"no fitting nvidia/cuda cudnn image exists for {os}: " + ", ".join(os_misses)
    )


def _and_cuda_gap(release: TFRelease, python: str) -> str:
    """The parts of the release's and_cuda_python_note that concern ``python``:
    "tensorrt==8.5.3.1: no cp311 wheel" (a part naming no cp tag removed every minor)."""
    tag = "cp" + python.replace(".", "")
    this_tag = re.compile(rf"\b{tag}\b")
    parts = [
        part
        for part in release.and_cuda_python_note.split("; ")
        if part and (this_tag.search(part) or not _CP_TAG.search(part))
    ]
    return "; ".join(parts) or f"no wheels for {tag}"


def place_pip(
    release: TFRelease,
    cuda_matrix: CudaMatrix,
    os: str | None,
    python: str | None,
    driver_cuda: str | None = None,
    runs: Callable[[ImageRelease], bool] = lambda image: True,
    *,
    python_said: str = f" {ASKED_PYTHON}",
) -> Placement | NoPlacement:
    """The pip source on the -base image; ``python`` None: the newest minor every
    and-cuda requirement has wheels for (``and_cuda_python``)."""
    if not release.and_cuda and release.project != "tensorflow":
        return NoPlacement(f"{release.label} names no CUDA wheels to take CUDA from")
    if not release.and_cuda:
        return NoPlacement(
            "no and-cuda extra to take CUDA from (the nvidia-* CUDA wheels start with "
            "tensorflow 2.14)"
        )
    if python is None:
        if not release.and_cuda_python:
            return NoPlacement(
                f"the and-cuda extra cannot be installed on any Python "
                f"({release.and_cuda_python_note or 'no wheels for its requirements'})"
            )
    elif python not in release.and_cuda_python:
        return NoPlacement(
            f"the and-cuda extra cannot be installed on Python {python} "
            f"({_and_cuda_gap(release, python)})"
        )
    cuda_major, cuda_minor = _split_minor(release.cuda)
    ranked: list[tuple[int, ImageRelease]] = []
    for image in cuda_matrix.images:
        major, minor = _split_minor(image.cuda)
        if major == cuda_major and minor >= cuda_minor:
            # JAX states a floor, not a build CUDA (with-cuda-minimum): the newest image
            # of the major serves it best; a build's own CUDA: the nearest image
            floor = release.cuda_from == "with-cuda-minimum"
            ranked.append((-minor if floor else minor - cuda_minor, image))
    ranked.sort(key=lambda item: (not runs(item[1]), item[0], _newest_patch_first(item[1])))
    misses: list[str] = []
    for _distance, image in ranked:
        picked = _pick_os(
            cuda_matrix, image, os, python, release.and_cuda_python, python_said=python_said
        )
        if picked is None:
            misses.append(f"{image.version} ({_os_list(image)})")
            continue
        ubuntu, chosen, os_reason, python_reason = picked
        if python is None and release.and_cuda_python != release.python:
            python_reason += (
                f"; every {release.cuda_wheels} requirement has Linux x86_64 wheels for "
                f"{python_ranges(release.and_cuda_python)} ({release.and_cuda_python_note}); "
                f"{release.project} itself has wheels for {python_ranges(release.python)}"
            )
        tag = image.tag("base", ubuntu.release, cudnn=False)
        cudnn_requirement = next(
            (r for r in release.and_cuda if r.lower().startswith("nvidia-cudnn")), ""
        )
        reasons = [
            f"base image nvidia/cuda:{tag}: only the CUDA runtime; CUDA and cuDNN come "
            f"from {release.cuda_wheels}'s nvidia-* wheels"
            + (f" ({cudnn_requirement})" if cudnn_requirement else ""),
            f"OS {os_reason}",
        ]
        warnings: tuple[str, ...] = ()
        return Placement("pip", image, ubuntu, tag, tuple(reasons), warnings, chosen, python_reason)
    if misses:
        return NoPlacement(
            f"no nvidia/cuda CUDA {cuda_major}.x base image exists for {os}: " + ", ".join(misses)
        )
    return NoPlacement(f"no nvidia/cuda image for CUDA {release.cuda} is recorded in cuda.toml")


def place(
    release: TFRelease,
    cuda_matrix: CudaMatrix,
    *,
    source: str | None,
    os: str | None,
    python: str | None,
    driver_cuda: str | None,
    runs: Callable[[ImageRelease], bool] = lambda image: True,
    python_said: str = f" {ASKED_PYTHON}",
) -> Placement | NoPlacement:
    """Place ``release`` with the source asked for, or system falling back to pip.
    Python as asked, else the newest with a wheel (for the pip source: the
    newest every and-cuda requirement has wheels for)."""
    if source == "pip" or release.project != "tensorflow":
        return place_pip(
            release, cuda_matrix, os, python, driver_cuda, runs, python_said=python_said
        )
    system = place_system(
        release, cuda_matrix, os, python, driver_cuda, runs, python_said=python_said
    )
    if isinstance(system, Placement) or source == "system":
        return system
    pip = place_pip(release, cuda_matrix, os, python, driver_cuda, runs, python_said=python_said)
    if isinstance(pip, NoPlacement):
        return NoPlacement(f"{system.reason}; the pip source does not fit either: {pip.reason}")
    return Placement(
        pip.source,
        pip.image,
        pip.os,
        pip.tag,
        pip.reasons,
        (
            f"CUDA source pip, not system: {system.reason}; the nvidia-* wheels of "
            f"{release.cuda_wheels} bring the CUDA and cuDNN it was built with",
            *pip.warnings,
        ),
        pip.python,
        pip.python_reason,
    )
