"""The host's NVIDIA driver and GPUs, for ``--driver auto``.

NVML first (``libnvidia-ml.so.1`` through ctypes: no extra dependency, no
process), else ``nvidia-smi --query-gpu``. Neither found is the user's problem
to solve (pass ``--driver VERSION``), so it is a ``UsageError`` (exit 2); a
driver that is there but fails is an ``EnvironmentFailure`` (exit 3).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

from envlock.errors import EnvironmentFailure, UsageError

NVML_LIBRARY = "libnvidia-ml.so.1"
# nvmlBrandType_t by value (nvml.h), as the token the container runtime compares with
# an image's NVIDIA_REQUIRE_CUDA "brand=" (nvidia-container-toolkit,
# internal/modifier: brandTypeToRequirementString); 0 is NVML_BRAND_UNKNOWN
NVML_BRANDS = (
    "",
    "quadro",
    "tesla",
    "nvs",
    "grid",
    "geforce",
    "titan",
    "nvidiavapps",
    "nvidiavpc",
    "nvidiavcs",
    "nvidiavws",
    "nvidiacloudgaming",
    "quadrortx",
    "nvidiartx",
    "nvidia",
    "geforcertx",
    "titanrtx",
)
SMI_FIELDS = "driver_version,name,compute_cap"
_NOT_FOUND_HINT = "pass the driver version instead, e.g. --driver 535.104.05"


@dataclass(frozen=True)
class HostGpu:
    name: str  # as NVML / nvidia-smi report it, "NVIDIA H200"
    compute_capability: str | None  # "9.0"; None when the tool cannot say
    brand: str | None = None  # NVML's brand as the container runtime names it, "nvidia"


@dataclass(frozen=True)
class HostInfo:
    driver: str  # "550.54.15"
    cuda_driver: str | None  # newest CUDA the driver supports, "12.4"; None if unknown
    gpus: tuple[HostGpu, ...]
    source: str  # "NVML" or "nvidia-smi"


class _NvmlMissing(Exception):
    """NVML cannot be loaded here (no driver): try nvidia-smi."""


def _nvml(library: str = NVML_LIBRARY) -> HostInfo:
    import ctypes

    try:
        lib = ctypes.CDLL(library)
    except OSError as e:
        raise _NvmlMissing(str(e)) from None

    def check(ret: int, call: str) -> None:
        if ret != 0:
            text = ""
            try:
                err = lib.nvmlErrorString
                err.restype = ctypes.c_char_p
                raw = err(ret)
                text = raw.decode(errors="replace") if raw else ""
            except AttributeError:  # pragma: no cover - every NVML has it
                pass
            raise EnvironmentFailure(
                f"NVML {call} failed: {text or f'error {ret}'}",
                hint="check the driver with nvidia-smi, or pass --driver VERSION",
            )

    init = getattr(lib, "nvmlInit_v2", None) or lib.nvmlInit
    ret = init()
    if ret != 0:  # e.g. the library is there but no driver is loaded: try nvidia-smi
        try:
            check(ret, "nvmlInit")
        except EnvironmentFailure as e:
            raise _NvmlMissing(e.message) from None
    try:
        buf = ctypes.create_string_buffer(96)
        check(lib.nvmlSystemGetDriverVersion(buf, ctypes.c_uint(len(buf))), "GetDriverVersion")
        driver = buf.value.decode().strip()
        cuda_driver: str | None = None
        version = ctypes.c_int(0)
        get_cuda = getattr(lib, "nvmlSystemGetCudaDriverVersion_v2", None) or getattr(
            lib, "nvmlSystemGetCudaDriverVersion", None
        )
        if get_cuda is not None and get_cuda(ctypes.byref(version)) == 0 and version.value:
            cuda_driver = f"{version.value // 1000}.{version.value % 1000 // 10}"
        count = ctypes.c_uint(0)
        get_count = getattr(lib, "nvmlDeviceGetCount_v2", None) or lib.nvmlDeviceGetCount
        check(get_count(ctypes.byref(count)), "DeviceGetCount")
        by_index = (
            getattr(lib, "nvmlDeviceGetHandleByIndex_v2", None) or lib.nvmlDeviceGetHandleByIndex
        )
        gpus: list[HostGpu] = []
        for i in range(count.value):
            handle = ctypes.c_void_p()
            check(by_index(ctypes.c_uint(i), ctypes.byref(handle)), "DeviceGetHandleByIndex")
            name = ctypes.create_string_buffer(96)
            check(lib.nvmlDeviceGetName(handle, name, ctypes.c_uint(len(name))), "DeviceGetName")
            major, minor = ctypes.c_int(0), ctypes.c_int(0)
            cc: str | None = None
            get_cc = getattr(lib, "nvmlDeviceGetCudaComputeCapability", None)
            if get_cc is not None and get_cc(handle, ctypes.byref(major), ctypes.byref(minor)) == 0:
                cc = f"{major.value}.{minor.value}"
            brand: str | None = None
            kind = ctypes.c_int(0)
            get_brand = getattr(lib, "nvmlDeviceGetBrand", None)
            if get_brand is not None and get_brand(handle, ctypes.byref(kind)) == 0:
                brand = NVML_BRANDS[kind.value] if 0 < kind.value < len(NVML_BRANDS) else None
            gpus.append(
                HostGpu(
                    name=name.value.decode(errors="replace").strip(),
                    compute_capability=cc,
                    brand=brand,
                )
            )
    finally:
        lib.nvmlShutdown()
    return HostInfo(driver=driver, cuda_driver=cuda_driver, gpus=tuple(gpus), source="NVML")


def parse_smi(text: str) -> tuple[str, tuple[HostGpu, ...]]:
    """Parse ``nvidia-smi --query-gpu=driver_version,name[,compute_cap] --format=csv,noheader``."""
    driver = ""
    gpus: list[HostGpu] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) < 2 or not cells[0][:1].isdigit():
            raise EnvironmentFailure(
                f"nvidia-smi printed an unexpected line: {line.strip()!r}",
                hint="pass --driver VERSION",
            )
        driver = driver or cells[0]
        cc = cells[2] if len(cells) > 2 and cells[2][:1].isdigit() else None
        gpus.append(HostGpu(name=cells[1], compute_capability=cc))
    if not driver:
        raise EnvironmentFailure("nvidia-smi listed no GPU", hint="pass --driver VERSION")
    return driver, tuple(gpus)


def _smi(smi: str) -> HostInfo:
    def query(fields: str) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(
                [smi, f"--query-gpu={fields}", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise EnvironmentFailure(f"nvidia-smi failed: {e}", hint=_NOT_FOUND_HINT) from None

    out = query(SMI_FIELDS)
    if out.returncode != 0 and "compute_cap" in (out.stdout + out.stderr):
        out = query("driver_version,name")  # drivers older than 510 lack compute_cap
    if out.returncode != 0:
        detail = (out.stderr or out.stdout).strip().splitlines()
        raise EnvironmentFailure(
            f"nvidia-smi failed (exit {out.returncode}): {detail[0] if detail else 'no output'}",
            hint=_NOT_FOUND_HINT,
        )
    driver, gpus = parse_smi(out.stdout)
    return HostInfo(driver=driver, cuda_driver=None, gpus=gpus, source="nvidia-smi")


def detect(library: str | None = None, smi: str | None = None) -> HostInfo:
    """The host's driver and GPUs: NVML, else nvidia-smi, else a UsageError."""
    library = library or NVML_LIBRARY
    try:
        return _nvml(library)
    except _NvmlMissing as e:
        nvml_problem = str(e)
    path = smi if smi is not None else shutil.which("nvidia-smi")
    if not path:
        raise UsageError(
            f"--driver auto: no NVIDIA driver found on this machine ({library} does not "
            f"load: {nvml_problem}; nvidia-smi is not on PATH)",
            hint=_NOT_FOUND_HINT,
        )
    return _smi(path)
