"""A verdict per execution path for one (framework build, GPU, driver) triple.

Four paths run a framework's GPU code, and each can fail on its own:

- ``kernels``: precompiled machine code (SASS ``sm_XY``) for the GPU's
  architecture (same major, minor not above the GPU's);
- ``ptx-jit``: no SASS, so the driver JIT-compiles the build's ``compute_XY``
  PTX at first start, which needs a driver at least as new as the toolkit that
  made the PTX (the floor ``envlock.resolve.floors.host_floor`` states for
  resolve and doctor alike) and one that knows the GPU;
- ``xla``: XLA compiles its own PTX and hands it to the ptxas it finds (the
  ``nvidia-cuda-nvcc-cu12`` wheel in a pip-CUDA environment, a CUDA toolkit's
  otherwise); the PTX version it emits is that of the older of that ptxas and
  the CUDA XLA was built with (``matrices/paths.toml``, source
  ``xla-ptx-version``), so a GPU whose target needs a newer PTX ISA than the
  build's CUDA knows cannot be served by any ptxas;
- ``cudnn``: the cuDNN in the environment has device code for the GPU (the
  first cuDNN per architecture in ``paths.toml``; the versions that dropped or
  broke an architecture in ``libraries.toml``).

``execution_paths`` is the one function; ``for_resolution`` feeds it what a
Resolution says (resolve), ``for_smoke`` what the smoke harness saw (smoke's
report), and doctor the installed versions. Each verdict is ``works``,
``needs`` (with the fix), ``cannot`` (with the way out, if any), ``unused``
(another path serves the GPU) or ``unknown`` (a fact is missing).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envlock.matrix import Matrix
from envlock.matrix.cuda import CudaMatrix
from envlock.matrix.libraries import LibraryCap, LibraryMatrix
from envlock.matrix.paths import PathsMatrix
from envlock.model import Constraints, Gpu, Resolution
from envlock.resolve.floors import _cc_number, _numbers, host_floor, toolkit_driver_for

STATUSES = ("works", "needs", "cannot", "unused", "unknown")
PATH_NAMES = ("kernels", "ptx-jit", "xla", "cudnn")
NVCC = "nvidia-cuda-nvcc-cu12"
CUDNN = "nvidia-cudnn-cu12"
XLA_OFF = (
    "turn XLA off for this GPU: model.compile(..., jit_compile=False) and no "
    "tf.function(jit_compile=True); TF_XLA_FLAGS=--tf_xla_auto_jit=0 keeps auto-clustering off"
)


@dataclass(frozen=True)
class Build:
    """A framework build as the paths read it."""

    framework: str  # "tensorflow", "torch", "jax"
    version: str  # "2.21.0"
    cuda: str  # the CUDA it was built with, "12.5"
    compute_capabilities: tuple[str, ...]  # "sm_89", "compute_90"; () unknown


@dataclass(frozen=True)
class Tools:
    """What the environment gives the build: ptxas and cuDNN, exact or as a
    requirement the lock will meet, the driver, and how to name a fix."""

    cuda_source: str  # "pip", "system", "host"
    ptxas: str | None = None  # the exact ptxas version XLA uses, "12.5.82"
    ptxas_range: str | None = (
        None  # or the requirement a lock meets, "nvidia-cuda-nvcc-cu12<13,>=12.5.82"
    )
    ptxas_where: str = ""  # where it is, "nvidia-cuda-nvcc-cu12==12.5.82", "PATH"
    no_ptxas: bool = False  # known to be absent (a -cudnn-runtime image, or not found)
    cudnn: str | None = None  # the exact cuDNN, "9.3.0.75"
    cudnn_range: str | None = None  # or the requirement, "nvidia-cudnn-cu12<10,>=9.3.0.75"
    cudnn_caps: tuple[str, ...] = ()  # the caps a lock for this GPU adds ("nvidia-cudnn-cu12<9.11")
    driver: str | None = None  # the host driver, when known
    install: str = "python -m pip install"  # how a pip fix starts for this environment
    lock_spec: str = ""  # the SPEC a lock fix names, "tensorflow==2.21.0"


class PathVerdictDict(TypedDict):
    path: str
    status: str
    why: str
    fix: str
    manual: bool
    sources: list[str]


class GpuPathsDict(TypedDict):
    """One GPU's verdicts, as --json and a smoke result carry them."""

    gpu: str
    compute_capability: str
    paths: list[PathVerdictDict]


@dataclass(frozen=True)
class PathVerdict:
    path: str  # one of PATH_NAMES
    status: str  # one of STATUSES
    why: str
    # a command to paste as it stands, or with ``manual`` the steps no command takes
    fix: str = ""
    sources: tuple[str, ...] = ()
    manual: bool = False

    def to_dict(self) -> PathVerdictDict:
        return {
            "path": self.path,
            "status": self.status,
            "why": self.why,
            "fix": self.fix,
            "manual": self.manual,
            "sources": list(self.sources),
        }


@dataclass(frozen=True)
class GpuPaths:
    gpu: str  # "RTX 5090"
    compute_capability: str  # "12.0"
    paths: tuple[PathVerdict, ...] = field(default_factory=tuple)

    def to_dict(self) -> GpuPathsDict:
        return {
            "gpu": self.gpu,
            "compute_capability": self.compute_capability,
            "paths": [p.to_dict() for p in self.paths],
        }

    def status(self, path: str) -> str:
        return next(p.status for p in self.paths if p.path == path)


def _v(text: str | None) -> Version | None:
    if not text:
        return None
    try:
        return Version(text)
    except InvalidVersion:
        return None


def _minor(text: str) -> Version:
    v = Version(text)
    return Version(f"{v.major}.{v.minor}")


def execution_paths(
    build: Build,
    gpu: Gpu,
    tools: Tools,
    cuda_matrix: CudaMatrix,
    table: PathsMatrix,
    libraries: LibraryMatrix | None = None,
) -> GpuPaths:
    """The four verdicts for ``build`` on ``gpu`` (its compute capability known)."""
    capability = gpu.compute_capability or ""
    label = gpu.name or f"a GPU of compute capability {capability}"
    if not capability:
        unknown = PathVerdict("kernels", "unknown", "compute capability unknown")
        return GpuPaths(label, capability, tuple(replace_path(unknown, p) for p in PATH_NAMES))
    have = _cc_number(capability)
    arch = table.arch(capability)
    gpu_driver = toolkit_driver_for(cuda_matrix, arch.cuda) if arch else None
    driver = _v(tools.driver)
    kernels = _kernels(build, capability, have, driver, gpu_driver, cuda_matrix)
    jit = _ptx_jit(build, gpu, have, kernels, driver, gpu_driver, cuda_matrix, table)
    xla = _xla(build, capability, have, tools, arch, table)
    cudnn = _cudnn(build, gpu.name, capability, tools, arch, table, libraries)
    return GpuPaths(label, capability, (kernels, jit, xla, cudnn))


def replace_path(verdict: PathVerdict, path: str) -> PathVerdict:
    return PathVerdict(
        path, verdict.status, verdict.why, verdict.fix, verdict.sources, verdict.manual
    )


def _driver_fix(needed: str) -> str:
    return f"upgrade the NVIDIA driver to {needed} or newer (the host's, outside this environment)"


def _kernels(
    build: Build,
    capability: str,
    have: int,
    driver: Version | None,
    gpu_driver: str | None,
    cuda_matrix: CudaMatrix,
) -> PathVerdict:
    name = f"{build.framework} {build.version}"
    if not build.compute_capabilities:
        return PathVerdict("kernels", "unknown", f"{name} does not say which sm targets it carries")
    sass = [sm for sm in _numbers(build.compute_capabilities, "sm_") if sm // 10 == have // 10]
    sass = [sm for sm in sass if sm <= have]
    compiled = ", ".join(build.compute_capabilities)
    if not sass:
        return PathVerdict(
            "kernels", "cannot", f"no SASS for sm_{have} in {name} (compiled: {compiled})"
        )
    row = cuda_matrix.release(build.cuda)
    floor = max([x for x in (row.driver_min if row else None, gpu_driver) if x], key=Version)
    why = f"SASS for sm_{sass[-1]} in {name} runs on compute capability {capability}"
    if driver is not None and driver < Version(floor):
        return PathVerdict(
            "kernels", "needs", f"{why}, on driver >= {floor}", _driver_fix(floor), manual=True
        )
    return PathVerdict("kernels", "works", f"{why} (driver >= {floor})")


def _ptx_jit(
    build: Build,
    gpu: Gpu,
    have: int,
    kernels: PathVerdict,
    driver: Version | None,
    gpu_driver: str | None,
    cuda_matrix: CudaMatrix,
    table: PathsMatrix,
) -> PathVerdict:
    name = f"{build.framework} {build.version}"
    if kernels.status in ("works", "needs"):
        return PathVerdict("ptx-jit", "unused", "not needed: SASS serves this GPU")
    if kernels.status == "unknown":
        return PathVerdict("ptx-jit", "unknown", kernels.why)
    ptx = [p for p in _numbers(build.compute_capabilities, "compute_") if p <= have]
    if not ptx:
        return PathVerdict(
            "ptx-jit",
            "cannot",
            f"no PTX at or below compute_{have} in {name}: GPU ops fail",
        )
    for failure in table.failures:
        if failure.path == "ptx-jit" and failure.applies(
            build.framework, build.version, gpu.compute_capability or ""
        ):
            return PathVerdict(
                "ptx-jit",
                "cannot",
                f"compute_{ptx[-1]} PTX is JIT-compiled, but reported failing on this GPU: "
                f"{failure.effect}",
                "",
                table.urls(failure.sources),
            )
    floor = host_floor(build, cuda_matrix, [gpu])
    needed = [x for x in (floor.driver if floor else None, gpu_driver) if x]
    why = (
        f"compute_{ptx[-1]} PTX from CUDA {build.cuda} is JIT-compiled by the driver at first "
        f"start (minutes; cached afterwards)"
    )
    if not needed:
        return PathVerdict("ptx-jit", "works", why)
    top = max(needed, key=Version)
    why += f", which needs driver >= {top}"
    if top == gpu_driver and (floor is None or Version(top) > Version(floor.driver)):
        why += f" (the first that knows compute capability {gpu.compute_capability})"
    elif floor is not None:
        why += f" (the CUDA {build.cuda} toolkit's)"
    if driver is not None and driver < Version(top):
        return PathVerdict("ptx-jit", "needs", why, _driver_fix(top), manual=True)
    return PathVerdict("ptx-jit", "works", why)


def _xla(
    build: Build,
    capability: str,
    have: int,
    tools: Tools,
    arch: Any,
    table: PathsMatrix,
) -> PathVerdict:
    if build.framework == "torch":
        return PathVerdict(
            "xla",
            "unused",
            "torch has no XLA (torch.compile goes through Triton, which brings its own ptxas)",
        )
    if arch is None:
        return PathVerdict(
            "xla", "unknown", f"compute capability {capability} is not in matrices/paths.toml"
        )
    sources = table.urls(("xla-ptx-version", *arch.sources))
    first = Version(arch.cuda)
    target = f"sm_{have}"
    off = XLA_OFF if build.framework == "tensorflow" else ""
    if _minor(build.cuda) < first:
        return PathVerdict(
            "xla",
            "cannot",
            f"XLA emits the PTX of the older of its ptxas and CUDA {build.cuda} (what "
            f"{build.framework} {build.version} was built with); {target} needs PTX ISA "
            f"{arch.ptx} (CUDA {arch.cuda}), so no ptxas helps (LLVM stops: 'PTX version ... "
            f"does not support target {target}')",
            off,
            sources + table.urls(("tf-111958",)),
            manual=bool(off),
        )
    nvcc_fix = f"{tools.install} '{NVCC}>={arch.cuda},<13'"
    if tools.ptxas:
        v = _v(tools.ptxas)
        if v is not None and _minor(str(v)) < first:
            return PathVerdict(
                "xla",
                "needs",
                f"the ptxas XLA finds is {tools.ptxas} ({tools.ptxas_where}), older than "
                f"{target} (CUDA {arch.cuda})",
                nvcc_fix,
                sources,
            )
        return PathVerdict(
            "xla",
            "works",
            f"XLA compiles for {target} with ptxas {tools.ptxas} ({tools.ptxas_where})",
            "",
            sources,
        )
    if tools.ptxas_range:
        spec = Requirement(tools.ptxas_range).specifier
        lowest = next((s.version for s in spec if s.operator in (">=", "==", "~=")), None)
        if lowest is not None and _minor(lowest.removesuffix(".*")) >= first:
            return PathVerdict(
                "xla",
                "works",
                f"XLA compiles for {target} with the ptxas of {tools.ptxas_range}",
                "",
                sources,
            )
        if spec.contains(f"{arch.cuda}.999", prereleases=True) or any(
            s.operator in ("<", "<=") and Version(s.version) > first for s in spec
        ):
            return PathVerdict(
                "xla",
                "works",
                f"XLA compiles for {target} with the ptxas of {tools.ptxas_range} (a lock takes "
                f"the newest, which knows {target}; one below CUDA {arch.cuda} would not)",
                "",
                sources,
            )
        return PathVerdict(
            "xla",
            "needs",
            f"{tools.ptxas_range} admits no ptxas that knows {target} (CUDA {arch.cuda})",
            nvcc_fix,
            sources,
        )
    if tools.no_ptxas:
        wheel_fix = f"{tools.install} '{NVCC}=={build.cuda}.*'"
        if tools.lock_spec:
            wheel_fix = _lock_fix(tools, "")
        return PathVerdict(
            "xla",
            "needs",
            "XLA needs ptxas and libdevice and finds none"
            + (f" ({tools.ptxas_where})" if tools.ptxas_where else "")
            + f"; the {NVCC} wheel of pip CUDA carries both",
            wheel_fix,
            sources,
        )
    return PathVerdict("xla", "unknown", "which ptxas XLA finds is not known here", "", sources)


def _wanted(cap: LibraryCap) -> str:
    """What to install instead of a version ``cap`` rules out: from the version a
    source verified to work (a broken range), else the cap itself (below a drop)."""
    return f">={cap.works_from}" if cap.works_from else cap.cap


def _lock_fix(tools: Tools, gpu: str) -> str:
    """``envlock lock`` with the and-cuda extra (pip CUDA: the nvidia-* wheels, which a
    lock for a named GPU caps) for the release resolved."""
    spec = tools.lock_spec
    if "[" not in spec and "==" in spec and spec.startswith("tensorflow=="):
        # torch's CUDA wheels are its own requirements; JAX names its plugin's extra
        name, version = spec.split("==", 1)
        spec = f"{name}[and-cuda]=={version}"
    source = "" if tools.cuda_source == "pip" else " --cuda-source pip"
    named = f" --gpu {shlex.quote(gpu)}" if gpu else ""
    return f"envlock lock {shlex.quote(spec)}{source}{named} -o env"


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


def _cudnn(
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


# --------------------------------------------------------------- the callers' facts


def _requirement_for(requirements: Sequence[str], package: str) -> Requirement | None:
    for text in requirements:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) == package:
            return req
    return None


def _exact(req: Requirement | None) -> str | None:
    if req is None:
        return None
    clauses = list(req.specifier)
    if len(clauses) == 1 and clauses[0].operator in ("==", "===") and "*" not in clauses[0].version:
        return clauses[0].version
    return None


def tools_from_resolution(
    cuda_source: str,
    and_cuda: Sequence[str],
    image_cudnn: str | None,
    spec: str,
    driver: str | None,
) -> Tools:
    """What a lock of this resolution will give the build."""
    if cuda_source == "pip":
        # CUDA 12's compiler wheel is nvidia-cuda-nvcc-cu12; CUDA 13's is unsuffixed
        nvcc = _requirement_for(and_cuda, NVCC) or _requirement_for(and_cuda, NVCC[:-5])
        cudnn = _requirement_for(and_cuda, CUDNN) or _requirement_for(and_cuda, CUDNN[:-2] + "13")
        nvcc_exact, cudnn_exact = _exact(nvcc), _exact(cudnn)
        return Tools(
            cuda_source="pip",
            ptxas=nvcc_exact,
            ptxas_range=None if nvcc_exact or nvcc is None else str(nvcc),
            ptxas_where=f"{nvcc.name}=={nvcc_exact}" if nvcc and nvcc_exact else "",
            no_ptxas=nvcc is None,
            cudnn=cudnn_exact,
            cudnn_range=None if cudnn_exact or cudnn is None else str(cudnn),
            driver=driver,
            lock_spec=spec,
        )
    return Tools(
        cuda_source=cuda_source,
        no_ptxas=True,
        ptxas_where="the -cudnn-runtime base image has no CUDA compiler",
        cudnn=image_cudnn,
        driver=driver,
        lock_spec=spec,
    )


def for_smoke(
    result: Mapping[str, Any],
    cuda_matrix: CudaMatrix,
    table: PathsMatrix,
    libraries: LibraryMatrix | None = None,
) -> list[GpuPaths]:
    """The verdicts for what a smoke result saw: the build's CUDA and sm targets
    (build_info), each GPU's compute capability and driver, the cuDNN that loaded
    and the ptxas the XLA check found. The harness records facts; this judges them."""
    info = result.get("build_info") or {}
    framework = str(result.get("framework") or "")
    cuda = info.get("cuda")
    if not framework or not cuda:
        return []
    build = Build(
        framework,
        str(result.get("version") or ""),
        str(cuda),
        tuple(str(c) for c in info.get("compute_capabilities") or ()),
    )
    checks = {c.get("name"): c for c in result.get("checks") or []}
    loaded = (checks.get("cudnn_runtime") or {}).get("loaded")
    ptxas = ((checks.get("xla") or {}).get("xla") or {}).get("ptxas") or {}
    out: list[GpuPaths] = []
    for gpu in result.get("gpus") or []:
        capability = gpu.get("compute_capability")
        tools = Tools(
            cuda_source="host",
            ptxas=ptxas.get("version") if ptxas.get("path") else None,
            ptxas_where=f"{ptxas.get('path')}, from {ptxas.get('source')}"
            if ptxas.get("path")
            else "",
            no_ptxas=bool(ptxas) and not ptxas.get("path"),
            cudnn=str(loaded) if loaded else None,
            driver=gpu.get("driver"),
        )
        out.append(
            execution_paths(
                build,
                Gpu(str(gpu.get("name") or ""), compute_capability=capability),
                tools,
                cuda_matrix,
                table,
                libraries,
            )
        )
    return out


def for_resolution(res: Resolution, constraints: Constraints, matrix: Matrix) -> list[GpuPaths]:
    """The verdicts for each GPU asked about (``--gpu``), for what a lock of ``res``
    holds: the ptxas and cuDNN of its and-cuda extra (pip) or its base image
    (system), with the library caps a lock for that GPU adds."""
    if not constraints.gpus or matrix.cuda is None:
        return []
    from envlock.matrix import libraries as libraries_mod
    from envlock.matrix import paths as paths_mod
    from envlock.resolve.constraints import check

    checked = check(constraints, matrix.cuda, gpu_matrix=matrix.gpus)
    build = Build(res.framework, res.version, res.cuda, tuple(res.compute_capabilities))
    # the SPEC a lock fix names: JAX's with its CUDA plugin's extra, torch's version with
    # the local label of a build from PyTorch's own index (res.version carries it)
    spec = f"{res.framework}=={res.version}"
    if res.framework == "jax":
        spec = f"jax[cuda{res.cuda.split('.')[0]}]=={res.version}"
    tools = tools_from_resolution(
        res.cuda_source,
        res.and_cuda,
        res.image_cudnn,
        spec,
        str(checked.driver) if checked.driver is not None else None,
    )
    table, libraries = paths_mod.load(), libraries_mod.load()
    return [
        execution_paths(build, gpu, tools, matrix.cuda, table, libraries)
        for gpu in checked.gpus
        if gpu.compute_capability
    ]
