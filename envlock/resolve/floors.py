"""Driver floors: what a release on a placement demands of the host driver, on a
host venv and in the container, for the GPUs asked about.

Three facts, each from matrices/cuda.toml with its source:

- minor-version compatibility: a CUDA X.y build runs on the X.x floor
  (``driver_min``), as long as no kernel is JIT-compiled from PTX;
- PTX JIT: a GPU with no compiled kernel (sm_XY) for its compute capability
  runs PTX, which only a driver at least as new as the toolkit that made it
  can compile (``toolkit_driver`` of the build's CUDA). In a container the
  image's forward-compatibility libraries stand in for a newer driver on the
  GPUs and branches its NVIDIA_REQUIRE_CUDA excepts; on a host venv nothing does;
- the container runtime's own check of the image's ``NVIDIA_REQUIRE_CUDA``
  (``require_cuda``): the driver supports the image's CUDA, or the GPU's brand
  and the driver branch match one of the exceptions.

``floors`` turns them into the "why" lines and the warnings of a Resolution
from one evaluation, so the two never disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

from packaging.version import Version

from envlock.matrix import TFRelease
from envlock.matrix.cuda import CudaMatrix, ImageRelease
from envlock.matrix.gpus import GpuMatrix
from envlock.matrix.require import MARKET_BRANDS, Require, parse_require
from envlock.model import Gpu

if TYPE_CHECKING:
    from envlock.driver import HostInfo

MARKET_WORDS = {"datacenter": "data-center", "geforce": "GeForce", "workstation": "workstation"}


def _numbers(caps: Sequence[str], prefix: str) -> list[int]:
    return sorted(
        int(c[len(prefix) :].rstrip("abcdefghijklmnopqrstuvwxyz"))
        for c in caps
        if c.startswith(prefix)
    )


def _cc_number(capability: str) -> int:
    major, minor = capability.split(".")
    return int(major) * 10 + int(minor)


class Build(Protocol):
    """What the floors read of a build: a TFRelease, or a framework build seen by the
    smoke harness (envlock.resolve.paths.Build)."""

    @property
    def cuda(self) -> str: ...
    @property
    def compute_capabilities(self) -> Sequence[str]: ...
    @property
    def version(self) -> object: ...


def needs_jit(release: Build, capability: str) -> bool | None:
    """True: only PTX serves this GPU; False: compiled kernels do; None: neither
    (unsupported) or the wheel lists nothing."""
    sms = _numbers(release.compute_capabilities, "sm_")
    ptx = _numbers(release.compute_capabilities, "compute_")
    have = _cc_number(capability)
    if any(sm // 10 == have // 10 and sm <= have for sm in sms):
        return False
    if any(p <= have for p in ptx):
        return True
    return None


def image_require(image: ImageRelease) -> tuple[Require, bool]:
    """The image's NVIDIA_REQUIRE_CUDA and whether it is recorded (else the bare
    ``cuda>=X.Y`` of the image's CUDA is assumed)."""
    if image.require_cuda:
        return parse_require(image.require_cuda), True
    return parse_require(f"cuda>={image.cuda}"), False


def driver_cuda_of(cuda_matrix: CudaMatrix, driver: Version) -> str | None:
    """The newest CUDA whose toolkit's driver is not newer than ``driver``."""
    best: str | None = None
    for row in cuda_matrix.cuda:
        if row.toolkit_driver and Version(row.toolkit_driver) <= driver:
            best = row.version
    return best


def toolkit_driver_for(cuda_matrix: CudaMatrix, cuda: str) -> str | None:
    """The driver of the oldest toolkit that supports CUDA ``cuda`` (major.minor)."""
    for row in cuda_matrix.cuda:
        if row.toolkit_driver and Version(row.version) >= Version(cuda):
            return row.toolkit_driver
    return None


def _list(items: Sequence[object], word: str = "or") -> str:
    texts = [str(i) for i in items]
    if len(texts) <= 1:
        return "".join(texts)
    return ", ".join(texts[:-1]) + f" {word} " + texts[-1]


@dataclass(frozen=True)
class Floors:
    reasons: tuple[str, ...]
    warnings: tuple[str, ...]
    driver_min: str  # the host floor for the GPUs asked about


@dataclass(frozen=True)
class HostFloor:
    """What a release demands of the driver on a host venv (no container, so no
    forward-compatibility libraries) for the GPUs it will run on: the one floor
    resolve's why lines and doctor's driver check both state."""

    driver: str  # the floor for these GPUs
    cuda: str  # the CUDA the release was built with
    minor_min: str  # minor-version compatibility's floor (GPUs with compiled kernels)
    toolkit: str | None  # the driver of the build's CUDA toolkit (what the PTX JIT needs)
    jit_gpus: tuple[Gpu, ...]  # the GPUs no compiled kernel serves (PTX is JIT-compiled)
    version: str  # the release, "2.15.1"
    # in a container (container_floor): the JIT GPUs its forward-compatibility
    # libraries serve, and the image's NVIDIA_REQUIRE_CUDA ("" on a host venv)
    compat_gpus: tuple[Gpu, ...] = ()
    require: str = ""

    @property
    def why(self) -> str:
        """Why the floor is what it is, for a finding or a why line."""
        if self.jit_gpus and self.toolkit and self.driver == self.toolkit:
            names = _list([_gpu_label(g) for g in self.jit_gpus], "and")
            return (
                f"the PTX JIT of {names}: no compiled kernels for it in tensorflow "
                f"{self.version}, so PTX from CUDA {self.cuda} is JIT-compiled, which needs "
                f"the CUDA {self.cuda} toolkit's driver (minor-version compatibility does not "
                "cover PTX JIT)"
            )
        if self.compat_gpus:
            names = _list([_gpu_label(g) for g in self.compat_gpus], "and")
            return (
                f"the floor of CUDA {self.cuda} (minor-version compatibility); in this "
                f"container the image's forward-compatibility libraries JIT-compile the PTX "
                f"for {names} (its NVIDIA_REQUIRE_CUDA excepts this driver branch)"
            )
        return f"the floor of CUDA {self.cuda} (minor-version compatibility)"


def host_floor(release: Build, cuda_matrix: CudaMatrix, gpus: Sequence[Gpu]) -> HostFloor | None:
    """The driver ``release`` needs on a host venv for ``gpus`` (none: GPUs with
    compiled kernels); None when cuda.toml has no row for its CUDA."""
    row = cuda_matrix.release(release.cuda)
    if row is None:
        return None
    toolkit = row.toolkit_driver
    jit = tuple(
        g for g in gpus if g.compute_capability and needs_jit(release, g.compute_capability)
    )
    driver = max(row.driver_min, toolkit, key=Version) if toolkit and jit else row.driver_min
    return HostFloor(driver, release.cuda, row.driver_min, toolkit, jit, str(release.version))


def compat_serves(require: Require, market: str | None, branch: int) -> bool:
    """In a container of an image with this NVIDIA_REQUIRE_CUDA: whether its
    forward-compatibility libraries JIT-compile PTX on a driver of ``branch`` for a
    GPU of ``market`` (data-center GPUs on an excepted branch; nothing else)."""
    return market == "datacenter" and branch in require.branches(MARKET_BRANDS["datacenter"])


def container_floor(
    release: TFRelease,
    cuda_matrix: CudaMatrix,
    gpus: Sequence[Gpu],
    require: Require,
    driver: Version,
) -> HostFloor | None:
    """``host_floor`` inside a running container of an image with ``require`` as
    its NVIDIA_REQUIRE_CUDA, on ``driver``: GPUs the image's forward-compatibility
    libraries serve (``compat_serves``) need no toolkit driver for the PTX JIT.
    The container runtime already started it, so its own check is passed."""
    host = host_floor(release, cuda_matrix, gpus)
    if host is None:
        return None
    served = tuple(g for g in host.jit_gpus if compat_serves(require, g.market, driver.major))
    jit = tuple(g for g in host.jit_gpus if g not in served)
    floor = host.driver if jit else host.minor_min
    return replace(host, driver=floor, jit_gpus=jit, compat_gpus=served, require=require.text)


def host_gpus(info: HostInfo) -> tuple[Gpu, ...]:
    """The host's GPUs as resolve takes them: the compute capability the driver
    reports, the market from NVML's brand (which the container runtime checks; a
    GPU that gpus.toml does not name still gets one)."""
    from envlock.matrix.require import market_of_brand

    return tuple(
        Gpu(g.name, compute_capability=g.compute_capability, market=market_of_brand(g.brand))
        for g in info.gpus
    )


def admits_image(
    image: ImageRelease, driver: Version, driver_cuda: str | None, markets: Sequence[str | None]
) -> bool:
    """Whether the container runtime starts ``image`` on this driver for every
    GPU market (None: unknown, so both data-center and GeForce must pass)."""
    require, _ = image_require(image)
    cuda = Version(driver_cuda or "0")
    wanted = [m for m in markets] or [None]
    for market in wanted:
        for brands in (
            [MARKET_BRANDS[market]]
            if market
            else [MARKET_BRANDS["datacenter"], MARKET_BRANDS["geforce"]]
        ):
            if not require.admits(driver, cuda, brands):
                return False
    return True


def floors(
    release: TFRelease,
    image: ImageRelease,
    tag: str,
    cuda_matrix: CudaMatrix,
    gpu_matrix: GpuMatrix | None,
    gpus: Sequence[Gpu],
    driver: Version | None,
    driver_shown: str,
    driver_from: str,
    driver_cuda: str | None,
) -> Floors:
    reasons: list[str] = []
    warnings: list[str] = []
    row = cuda_matrix.release(release.cuda)
    host = host_floor(release, cuda_matrix, gpus)
    if row is None or host is None:
        return Floors((), (), "")
    minor_min = row.driver_min
    major = release.cuda.split(".")[0]
    rule = (
        f"any CUDA {major}.x runs on it (minor-version compatibility)"
        if int(major) >= 11
        else f"CUDA {release.cuda}'s own minimum"
    )
    toolkit = row.toolkit_driver
    require, recorded = image_require(image)
    ref = f"nvidia/cuda:{tag}"
    dc_branches = require.branches(MARKET_BRANDS["datacenter"])
    gf_branches = require.branches(MARKET_BRANDS["geforce"])
    image_driver = toolkit_driver_for(cuda_matrix, require.cuda) or f"CUDA {require.cuda}"

    # --- PTX JIT
    jit_gpus = list(host.jit_gpus)
    driver_min = host.driver
    jit_names = _jit_names(release, gpu_matrix) if toolkit and not gpus else ""
    if toolkit and jit_gpus:
        # the table shows the JIT floor: this line must not read as the answer
        reasons.append(
            f"minor-version compatibility: CUDA {release.cuda} runs on driver >= {minor_min} "
            f"for GPUs with compiled kernels, which is not enough for the PTX JIT below"
        )
    elif jit_names:
        reasons.append(f"driver >= {minor_min}: {rule}, on GPUs with compiled kernels")
    else:
        reasons.append(f"driver >= {minor_min}: {rule}")
    if toolkit:
        compat = (
            f"in the container, a data-center GPU on driver branch {_list(dc_branches)} gets a "
            f"newer JIT from the image's forward-compatibility libraries"
            if dc_branches
            else "the image names no forward-compatibility branch"
        )
        if jit_gpus:
            names = _list([_gpu_label(g) for g in jit_gpus], "and")
            reasons.append(
                f"driver >= {toolkit} for {names}: no compiled kernels for it in tensorflow "
                f"{release.version}, so PTX from CUDA {release.cuda} is JIT-compiled, which "
                f"needs the driver of the CUDA {release.cuda} toolkit or newer (minor-version "
                f"compatibility does not cover PTX JIT); on a host venv nothing lowers that; "
                + compat
            )
        elif jit_names:
            reasons.append(
                f"GPUs without compiled kernels in tensorflow {release.version} "
                f"({jit_names}) JIT-compile PTX from CUDA {release.cuda} and need driver >= "
                f"{toolkit} (the CUDA {release.cuda} toolkit's) on a host venv; "
                + compat
                + "; name the GPU with --gpu for one answer"
            )

    # --- the image's NVIDIA_REQUIRE_CUDA
    where = "" if recorded else " (not recorded in matrices/cuda.toml: assumed to be this alone)"
    excepted = (
        f"; exceptions: data-center GPUs on driver branch {_list(dc_branches)}"
        + (f", GeForce on branch {_list(gf_branches)}" if gf_branches else ", none for GeForce")
        if dc_branches or gf_branches
        else ""
    )
    reasons.append(
        f"container: {ref}'s NVIDIA_REQUIRE_CUDA asks for a driver that supports CUDA "
        f"{require.cuda} (>= {image_driver}){where}{excepted}"
    )

    # --- the driver given
    if driver is not None:
        cuda_text = driver_cuda or driver_cuda_of(cuda_matrix, driver)
        cuda_v = Version(cuda_text or "0")
        origin = f" (read by {driver_from})" if driver_from else ""
        branch = driver.major
        subject = f"driver {driver_shown}{origin}, which supports CUDA {cuda_text or '?'}"
        host_ok = driver >= Version(minor_min) and (
            not jit_gpus or not toolkit or driver >= Version(toolkit)
        )
        verdicts: list[str] = []
        problems: list[str] = []
        host_text = (
            "host venv: runs"
            if host_ok
            else (
                f"host venv: too old for the PTX JIT of "
                f"{_list([_gpu_label(g) for g in jit_gpus], 'and')} (needs >= {toolkit})"
            )
        )
        verdicts.append(host_text)
        if not host_ok:
            problems.append(host_text)
        cases = _market_cases(gpus, release)
        for label, brands, market, jit in cases:
            starts = require.admits(driver, cuda_v, brands)
            text = f"container on {label}: "
            if not starts:
                text += (
                    f"refused by the container runtime (needs CUDA {require.cuda}, driver >= "
                    f"{image_driver}" + ")"
                )
                problems.append(text)
            elif jit and toolkit and driver < Version(toolkit):
                if compat_serves(require, market, branch):
                    text += (
                        f"starts, and the image's forward-compatibility libraries JIT-compile "
                        f"the PTX (branch {branch} is excepted)"
                    )
                else:
                    text += f"starts, but the PTX JIT needs driver >= {toolkit}"
                    problems.append(text)
            else:
                via = f" (branch {branch} is excepted)" if cuda_v < Version(require.cuda) else ""
                text += f"starts{via}"
            verdicts.append(text)
        reasons.append(f"{subject}: " + "; ".join(verdicts))
        if problems:
            ways = [f"a driver >= {max(image_driver, toolkit or minor_min, key=_vkey)}"]
            if host_ok:
                ways.append("the host venv (bootstrap.sh), which has no NVIDIA_REQUIRE_CUDA")
            elif len(problems) == 1:
                ways.append(f"the container {ref}, whose forward-compatibility libraries serve it")
            if not jit_gpus:
                ways.append(
                    f"NVIDIA_DISABLE_REQUIRE=1 at docker run (CUDA {release.cuda} runs on "
                    f"driver >= {minor_min} by minor-version compatibility)"
                )
            warnings.append(
                f"{subject}: " + "; ".join(problems) + "; ways out: " + "; or ".join(ways)
            )
    return Floors(tuple(reasons), tuple(warnings), driver_min)


def _vkey(text: str) -> Version:
    try:
        return Version(text)
    except Exception:  # noqa: BLE001 - "CUDA 12.6" when no toolkit driver is recorded
        return Version("0")


def _gpu_label(gpu: Gpu) -> str:
    if gpu.name:
        return f"{gpu.name} ({gpu.compute_capability})"
    return f"compute capability {gpu.compute_capability}"


def _market_cases(
    gpus: Sequence[Gpu], release: TFRelease
) -> list[tuple[str, frozenset[str], str | None, bool]]:
    """(label, brands, market, needs-JIT-known) per distinct GPU market asked about;
    without --gpu: a data-center GPU and a GeForce."""
    if not gpus:
        return [
            ("a data-center GPU", MARKET_BRANDS["datacenter"], "datacenter", False),
            ("a GeForce GPU", MARKET_BRANDS["geforce"], "geforce", False),
        ]
    out: list[tuple[str, frozenset[str], str | None, bool]] = []
    for gpu in gpus:
        jit = bool(gpu.compute_capability and needs_jit(release, gpu.compute_capability))
        market = gpu.market
        label = _gpu_label(gpu)
        if market is not None:
            label += f", {MARKET_WORDS[market]}"
            brands = MARKET_BRANDS[market]
        else:
            label += ", brand unknown: counted as GeForce"
            brands = MARKET_BRANDS["geforce"]
        out.append((label, brands, market, jit))
    return out


def _jit_names(release: TFRelease, gpu_matrix: GpuMatrix | None) -> str:
    """The GPUs only PTX serves in ``release``, in short: "compute capability 8.0
    and up, e.g. A100, A10G, L4, H100"."""
    if gpu_matrix is None or not gpu_matrix.names:
        return ""
    jit = sorted(
        (n for n in gpu_matrix.names if needs_jit(release, n.compute_capability)),
        key=lambda n: (_cc_number(n.compute_capability), n.market != "datacenter"),
    )
    if not jit:
        return ""
    examples = [n.name for n in jit if n.market == "datacenter"][:4] or [jit[0].name]
    lowest = jit[0].compute_capability
    return f"compute capability {lowest} and up, e.g. {', '.join(examples)}"
