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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envlock.matrix import Matrix
from envlock.matrix.cuda import CudaMatrix
from envlock.matrix.libraries import LibraryMatrix
from envlock.matrix.paths import PathsMatrix
from envlock.model import Constraints, Gpu, Resolution
from envlock.resolve.cudnn_path import cudnn_verdict
from envlock.resolve.floors import _cc_number, _numbers, host_floor, toolkit_driver_for
from envlock.resolve.pathtypes import Build, PathVerdict, PathVerdictDict, Tools, _lock_fix

STATUSES = ("works", "needs", "cannot", "unused", "unknown")
PATH_NAMES = ("kernels", "ptx-jit", "xla", "cudnn")
NVCC = "nvidia-cuda-nvcc-cu12"
CUDNN = "nvidia-cudnn-cu12"
XLA_OFF = (
    "turn XLA off for this GPU: model.compile(..., jit_compile=False) and no "
    "tf.function(jit_compile=True); TF_XLA_FLAGS=--tf_xla_auto_jit=0 keeps auto-clustering off"
)


class GpuPathsDict(TypedDict):
    """One GPU's verdicts, as --json and a smoke result carry them."""

    gpu: str
    compute_capability: str
    paths: list[PathVerdictDict]


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
    cudnn = cudnn_verdict(build, gpu.name, capability, tools, arch, table, libraries)
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
