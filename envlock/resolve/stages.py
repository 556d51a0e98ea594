"""The constraints a release must pass after the SPEC, one stage each, in the
order they are reported. Each stage says why a release fails it
(``why_not``) and, when it removes every release left, what went wrong and
what would work instead (``explain``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from packaging.version import Version

from envlock.matrix import TFRelease
from envlock.matrix.cuda import CudaMatrix, ImageRelease
from envlock.model import OLDEST_PYTHON, Constraints, Gpu
from envlock.resolve.constraints import Checked
from envlock.resolve.explain import (
    and_cuda_python_hint,
    describe,
    distinct_versions,
    first_distinct,
    source_alternatives,
)
from envlock.resolve.placement import (
    ASKED_PYTHON,
    NoPlacement,
    Placement,
    place,
    python_ranges,
    series,
)


@dataclass(frozen=True)
class Failure:
    """Why a stage removed every release left, and what would work instead."""

    message: str
    hints: tuple[str, ...] = ()


class Stage:
    """One constraint on releases."""

    reported = True  # named in "(after ...)" when a later stage removes the rest

    @property
    def name(self) -> str:
        """The constraint as the user gave it: "--python 3.12"."""
        raise NotImplementedError

    def why_not(self, release: TFRelease) -> str | None:
        """None when ``release`` passes, else why not."""
        raise NotImplementedError

    def explain(self, blocked: Sequence[TFRelease], nearest: str | None) -> Failure:
        """Why every one of ``blocked`` fails; ``nearest``: the nearest release
        series that passes every stage, as a SPEC."""
        raise NotImplementedError

    def reasons(self, blocked: Sequence[TFRelease]) -> list[str]:
        return first_distinct((self.why_not(r) or "" for r in blocked), limit=3)


def _matches(value: str, wanted: str) -> bool:
    """Whether "12.2" satisfies --cuda 12.2 or --cuda 12 (a major alone)."""
    if "." in wanted:
        return value == wanted
    return value.split(".")[0] == wanted


@dataclass(frozen=True)
class GpuBuild(Stage):
    """The 2.0.x wheels are CPU builds."""

    reported = False

    @property
    def name(self) -> str:
        return "gpu build"

    def why_not(self, release: TFRelease) -> str | None:
        if release.cuda_build:
            return None
        return (
            f"the tensorflow {series(release)}.x wheels are CPU-only builds (the GPU "
            f"build of {series(release)} was the separate tensorflow-gpu package)"
        )

    def explain(self, blocked: Sequence[TFRelease], nearest: str | None) -> Failure:
        hints = (f"the nearest GPU build is {nearest}",) if nearest else ()
        return Failure("; ".join(self.reasons(blocked)), hints)


@dataclass(frozen=True)
class UploadedBefore(Stage):
    """--exclude-newer: the release was on the index before the instant (the matrix's
    ``uploaded``, the earliest upload of its Linux x86_64 wheels)."""

    instant: str  # RFC 3339 UTC
    given: str  # as the user wrote it

    @property
    def name(self) -> str:
        return f"--exclude-newer {self.given}"

    def why_not(self, release: TFRelease) -> str | None:
        from envlock.instant import uploaded_before

        if not release.uploaded:
            return "its upload time is not in the matrix (run envlock matrix refresh)"
        if uploaded_before(release.uploaded, self.instant):
            return None
        return f"uploaded {release.uploaded}, not before {self.instant}"

    def explain(self, blocked: Sequence[TFRelease], nearest: str | None) -> Failure:
        hints = [f"use {nearest}"] if nearest else []
        hints.append("give a later --exclude-newer, or drop it")
        known = sorted(r.uploaded for r in blocked if r.uploaded)
        if len(known) < len(blocked):
            reasons = "; ".join(self.reasons(blocked))
            return Failure(f"{describe(blocked)}: {reasons}", tuple(hints))
        return Failure(
            f"{describe(blocked)}: uploaded {known[0]} or later, not before {self.instant}",
            tuple(hints),
        )


@dataclass(frozen=True)
class PythonFloor(Stage):
    """Without --python: a wheel for a Python the smoke harness runs on."""

    reported = False

    @property
    def name(self) -> str:
        return f"Python >= {OLDEST_PYTHON}"

    def why_not(self, release: TFRelease) -> str | None:
        oldest = Version(OLDEST_PYTHON)
        if any(Version(python) >= oldest for python in release.python):
            return None
        return f"wheels for Python {python_ranges(release.python)} only"

    def explain(self, blocked: Sequence[TFRelease], nearest: str | None) -> Failure:
        pythons = python_ranges(p for r in blocked for p in r.python)
        return Failure(
            f"{describe(blocked)} has wheels for Python {pythons} only, older than "
            f"{OLDEST_PYTHON}, the oldest Python envlock's smoke harness runs on",
            (f"use {nearest}",) if nearest else (),
        )


@dataclass(frozen=True)
class PythonWheel(Stage):
    """--python X.Y: a wheel for that Python."""

    python: str

    @property
    def name(self) -> str:
        return f"--python {self.python}"

    def why_not(self, release: TFRelease) -> str | None:
        return None if self.python in release.python else f"no Python {self.python} wheel"

    def explain(self, blocked: Sequence[TFRelease], nearest: str | None) -> Failure:
        supported = python_ranges(p for r in blocked for p in r.python)
        hints = [f"for Python {self.python} use {nearest}"] if nearest else []
        hints.append("drop --python to get the newest Python the release supports")
        return Failure(
            f"{describe(blocked)} supports Python {supported}; "
            f"there is no Python {self.python} wheel",
            tuple(hints),
        )


@dataclass(frozen=True)
class CudaBuild(Stage):
    """--cuda X[.Y]: built with that CUDA."""

    cuda: str

    @property
    def name(self) -> str:
        return f"--cuda {self.cuda}"

    def why_not(self, release: TFRelease) -> str | None:
        return None if _matches(release.cuda, self.cuda) else f"built with CUDA {release.cuda}"

    def explain(self, blocked: Sequence[TFRelease], nearest: str | None) -> Failure:
        built = distinct_versions(r.cuda for r in blocked)
        return Failure(
            f"{describe(blocked)} was built with CUDA {built}, not {self.cuda}",
            (f"for CUDA {self.cuda} use {nearest}",) if nearest else (),
        )


@dataclass(frozen=True)
class CudnnBuild(Stage):
    """--cudnn X[.Y]: built with that cuDNN."""

    cudnn: str

    @property
    def name(self) -> str:
        return f"--cudnn {self.cudnn}"

    def why_not(self, release: TFRelease) -> str | None:
        if _matches(release.cudnn, self.cudnn):
            return None
        return f"built with cuDNN {release.cudnn}"

    def explain(self, blocked: Sequence[TFRelease], nearest: str | None) -> Failure:
        built = distinct_versions(r.cudnn for r in blocked)
        return Failure(
            f"{describe(blocked)} was built with cuDNN {built}, not {self.cudnn}",
            (f"for cuDNN {self.cudnn} use {nearest}",) if nearest else (),
        )


@dataclass(frozen=True)
class DriverMinimum(Stage):
    """--driver VERSION: the build's CUDA runs on that driver, and so does the PTX JIT
    of the GPUs asked about that have no compiled kernel in the release."""

    driver: Version
    shown: str  # as given
    cuda_matrix: CudaMatrix
    gpus: tuple[Gpu, ...] = ()
    driver_cuda: str | None = None  # the CUDA the driver supports, when given

    @property
    def name(self) -> str:
        return f"--driver {self.shown}"

    def driver_min(self, release: TFRelease) -> str | None:
        row = self.cuda_matrix.release(release.cuda)
        return row.driver_min if row is not None else None

    def _jit_short(self, release: TFRelease) -> tuple[list[Gpu], str]:
        """The GPUs whose PTX JIT this driver cannot serve for ``release`` anywhere, and
        the toolkit driver they need. A data-center GPU is served in the container when
        the driver's branch is one that the forward-compatibility libraries of an image
        for the release's CUDA cover (floors says which image and how)."""
        from envlock.matrix.require import MARKET_BRANDS
        from envlock.resolve.floors import image_require, needs_jit

        row = self.cuda_matrix.release(release.cuda)
        toolkit = row.toolkit_driver if row is not None else ""
        if not toolkit or self.driver >= Version(toolkit):
            return [], toolkit
        jit = [
            g
            for g in self.gpus
            if g.compute_capability and needs_jit(release, g.compute_capability)
        ]
        if not jit:
            return [], toolkit
        build = Version(release.cuda)
        images = [
            im
            for im in self.cuda_matrix.images
            if Version(im.cuda).major == build.major and Version(im.cuda) >= build
        ]
        forward = {
            branch
            for im in images
            for branch in image_require(im)[0].branches(MARKET_BRANDS["datacenter"])
        }
        short = [g for g in jit if not (g.market == "datacenter" and self.driver.major in forward)]
        if not short and not any(self._container_serves_all(im, release) for im in images):
            # each JIT GPU is served only in a container, and no image of the release's
            # CUDA both starts on every GPU asked about and serves their PTX JIT there
            short = jit
        return short, toolkit

    def _container_serves_all(self, image: ImageRelease, release: TFRelease) -> bool:
        """The container runtime starts ``image`` on this driver for every GPU asked
        about, and its forward-compatibility libraries serve each one's PTX JIT."""
        from envlock.matrix.require import MARKET_BRANDS
        from envlock.resolve.floors import compat_serves, driver_cuda_of, image_require, needs_jit

        require = image_require(image)[0]
        cuda = Version(self.driver_cuda or driver_cuda_of(self.cuda_matrix, self.driver) or "0")
        for g in self.gpus:
            brands = MARKET_BRANDS[g.market or "geforce"]  # an unknown brand: as GeForce
            if not require.admits(self.driver, cuda, brands):
                return False
            jit = g.compute_capability and needs_jit(release, g.compute_capability)
            if jit and not compat_serves(require, g.market, self.driver.major):
                return False
        return True

    def why_not(self, release: TFRelease) -> str | None:
        need = self.driver_min(release)
        if need is None:
            return f"matrices/cuda.toml has no CUDA {release.cuda} row"
        if self.driver < Version(need):
            major = release.cuda.split(".")[0]
            builds = f"CUDA {major}.x builds" if int(major) >= 11 else f"CUDA {release.cuda} builds"
            return f"{builds} need driver >= {need}"
        short, toolkit = self._jit_short(release)
        if short:
            names = ", ".join(g.name or f"compute capability {g.compute_capability}" for g in short)
            return (
                f"the PTX JIT of CUDA {release.cuda} builds for {names} (no compiled kernel) "
                f"needs driver >= {toolkit}"
            )
        return None

    def explain(self, blocked: Sequence[TFRelease], nearest: str | None) -> Failure:
        hints = [f"with driver {self.shown} use {nearest}"] if nearest else []
        needs = [self.driver_min(blocked[0]) or ""]
        short, toolkit = self._jit_short(blocked[0])
        if short:
            needs.append(toolkit)
        need = max((n for n in needs if n), key=Version, default="")
        hints.append(f"upgrade the driver to >= {need}" if need else "upgrade the driver")
        return Failure(
            f"{describe(blocked)}: "
            + "; ".join(self.reasons(blocked))
            + f", and the driver is {self.shown}",
            tuple(hints),
        )


@dataclass(frozen=True)
class BaseImage(Stage):
    """A base image (and CUDA source) the release runs on."""

    checked: Checked
    driver_cuda: str | None
    cuda_matrix: CudaMatrix
    # why a given Python is the one, per release, in the words after "Python 3.X"
    # (None: " as asked (--python)"); envlock.lock.core says it chose it for the pins
    python_said: Callable[[TFRelease], str] | None = None

    @property
    def name(self) -> str:
        name = "the base image"
        if self.checked.os:
            name += f" (--os {self.checked.os})"
        if self.checked.source:
            name += f" (--cuda-source {self.checked.source})"
        return name

    def place(self, release: TFRelease) -> Placement | NoPlacement:
        return place(
            release,
            self.cuda_matrix,
            source=self.checked.source,
            os=self.checked.os,
            python=self.checked.python,
            driver_cuda=self.driver_cuda,
            runs=self._runs,
            python_said=f" {ASKED_PYTHON}"
            if self.python_said is None
            else self.python_said(release),
        )

    def _runs(self, image: ImageRelease) -> bool:
        """With --driver: whether the container runtime starts ``image`` there
        (for the GPUs asked about), so that such an image is preferred."""
        if self.checked.driver is None:
            return True
        from envlock.resolve.floors import admits_image, driver_cuda_of

        cuda = self.driver_cuda or driver_cuda_of(self.cuda_matrix, self.checked.driver)
        return admits_image(image, self.checked.driver, cuda, [g.market for g in self.checked.gpus])

    def why_not(self, release: TFRelease) -> str | None:
        placed = self.place(release)
        return placed.reason if isinstance(placed, NoPlacement) else None

    def explain(self, blocked: Sequence[TFRelease], nearest: str | None) -> Failure:
        hints: list[str] = []
        other_python = and_cuda_python_hint(self.checked, blocked[0], self.cuda_matrix)
        if other_python:
            hints.append(other_python)
        if nearest:
            hints.append(f"use {nearest}")
        hints.extend(source_alternatives(self.checked, blocked[0], self.cuda_matrix))
        return Failure(f"{describe(blocked)}: " + "; ".join(self.reasons(blocked)), tuple(hints))


def stages_for(
    checked: Checked,
    constraints: Constraints,
    cuda_matrix: CudaMatrix,
    python_said: Callable[[TFRelease], str] | None = None,
) -> tuple[list[Stage], BaseImage]:
    """The stages for these constraints, in order, and the last one (the image)."""
    stages: list[Stage] = [GpuBuild()]
    if constraints.exclude_newer:
        stages.append(UploadedBefore(constraints.exclude_newer, constraints.exclude_newer))
    if checked.python:
        stages.append(PythonWheel(checked.python))
    else:
        stages.append(PythonFloor())
    if checked.cuda:
        stages.append(CudaBuild(checked.cuda))
    if checked.cudnn:
        stages.append(CudnnBuild(checked.cudnn))
    if checked.driver is not None:
        stages.append(
            DriverMinimum(
                checked.driver,
                str(constraints.driver),
                cuda_matrix,
                checked.gpus,
                constraints.driver_cuda,
            )
        )
    image = BaseImage(checked, constraints.driver_cuda, cuda_matrix, python_said)
    stages.append(image)
    return stages, image
