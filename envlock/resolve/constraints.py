"""What the user asked for (``Constraints``), and the same values checked.

``check`` turns each value into the form resolve compares (or a
``UsageError`` naming the flag, with an example), and refuses a Python older
than the smoke harness runs on: every bundle runs the harness, so a Python it
cannot run on would give an environment envlock cannot prove.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.version import Version

from envlock.errors import NoResolution, UsageError
from envlock.matrix.cuda import CudaMatrix
from envlock.matrix.gpus import GpuMatrix
from envlock.model import CUDA_SOURCES, OLDEST_PYTHON, Constraints, Gpu
from envlock.readers import quoted
from envlock.resolve.spec import Spec, parse_spec

PYTHON_MINOR = re.compile(r"^3\.[0-9]{1,2}$")
MAJOR_MINOR = re.compile(r"^[0-9]{1,2}(\.[0-9]{1,2})?$")
DRIVER = re.compile(r"^[0-9]{3}(\.[0-9]{1,3}){0,2}$")
UBUNTU = re.compile(r"^ubuntu[0-9]{2}\.[0-9]{2}$")
CAPABILITY = re.compile(r"^[0-9]{1,2}\.[0-9]$")


SM = re.compile(r"^(?:sm|compute)_([0-9]{1,2})([0-9])[a-z]?$")


def capability_of(value: str) -> str | None:
    """A compute capability as given to --gpu: "8.0", "sm_80", "compute_90a", "sm_100"."""
    value = value.strip().lower()
    if CAPABILITY.fullmatch(value):
        return value
    m = SM.fullmatch(value)
    return f"{int(m.group(1))}.{m.group(2)}" if m else None


@dataclass(frozen=True)
class Checked:
    """The constraints, checked: the values resolve compares."""

    spec: Spec
    python: str | None
    cuda: str | None
    cudnn: str | None
    driver: Version | None  # the host driver
    os: str | None
    source: str | None  # explicit CUDA source (--cuda-source, or pip for [and-cuda])
    gpus: tuple[Gpu, ...]


def _check_value(
    value: str | None, pattern: re.Pattern[str], flag: str, shape: str, example: str
) -> str | None:
    if value is None:
        return None
    value = value.strip()
    if not pattern.fullmatch(value):
        raise UsageError(f"{flag} {quoted(value)} is not {shape}", hint=f"e.g. {flag} {example}")
    return value


def named_gpus(gpus: tuple[Gpu, ...], gpu_matrix: GpuMatrix | None) -> tuple[Gpu, ...]:
    """Each GPU with its compute capability and market from gpus.toml's names;
    a name given without a capability that gpus.toml does not know is a UsageError."""
    out: list[Gpu] = []
    for gpu in gpus:
        entry = gpu_matrix.lookup(gpu.name) if gpu_matrix is not None and gpu.name else None
        if gpu.compute_capability is None:
            if entry is None:
                near = gpu_matrix.nearest(gpu.name) if gpu_matrix is not None else []
                raise UsageError(
                    f"--gpu {quoted(gpu.name)} is not a GPU envlock knows (matrices/gpus.toml)",
                    hint=(f"did you mean {' or '.join(near)}? or give" if near else "give")
                    + " its compute capability, e.g. --gpu 8.6 or --gpu sm_86, or --gpu auto",
                )
            out.append(Gpu(gpu.name, entry.compute_capability, gpu.market or entry.market))
        elif entry is not None and gpu.market is None:
            out.append(Gpu(gpu.name, gpu.compute_capability, entry.market))
        else:
            out.append(gpu)
    return tuple(out)


def check(
    constraints: Constraints, cuda_matrix: CudaMatrix, *, gpu_matrix: GpuMatrix | None = None
) -> Checked:
    """The constraints checked, or the first bad value as a ``UsageError``."""
    c = constraints
    spec = parse_spec(c.spec)
    python = _check_value(c.python, PYTHON_MINOR, "--python", "a CPython minor (3.X)", "3.11")
    cuda = _check_value(c.cuda, MAJOR_MINOR, "--cuda", "a CUDA version (X.Y or X)", "12.2")
    cudnn = _check_value(c.cudnn, MAJOR_MINOR, "--cudnn", "a cuDNN version (X.Y or X)", "8.9")
    driver = _check_value(
        c.driver, DRIVER, "--driver", "a driver version (NNN[.NN[.NN]]) or auto", "535.104.05"
    )
    if c.driver_cuda is not None and not MAJOR_MINOR.fullmatch(c.driver_cuda):
        raise UsageError(
            f"the driver's CUDA version {quoted(c.driver_cuda)} is not X.Y",
            hint="pass --driver VERSION instead of auto",
        )
    os = c.os.strip() if c.os is not None else None
    known_os = [ubuntu.name for ubuntu in cuda_matrix.ubuntu]
    if os is not None and (not UBUNTU.fullmatch(os) or os not in known_os):
        raise UsageError(
            f"--os {quoted(os)} is not a known Ubuntu release of the nvidia/cuda images",
            hint="one of: " + ", ".join(known_os),
        )
    if c.cuda_source is not None and c.cuda_source not in CUDA_SOURCES:
        raise UsageError(
            f"--cuda-source {quoted(c.cuda_source)} is not one of {', '.join(CUDA_SOURCES)}",
            hint="system: from the nvidia/cuda cudnn image; pip: tensorflow[and-cuda] wheels",
        )
    source = c.cuda_source
    if spec.and_cuda:
        if source == "system":
            raise UsageError(
                f"SPEC {quoted(c.spec)} asks for [and-cuda] but --cuda-source is system",
                hint="drop [and-cuda] (system CUDA) or --cuda-source system (pip CUDA)",
            )
        source = "pip"
    for gpu in c.gpus:
        if gpu.compute_capability is not None and not CAPABILITY.fullmatch(gpu.compute_capability):
            raise UsageError(
                f"GPU {gpu.name or '(--gpu)'}: compute capability "
                f"{quoted(gpu.compute_capability)} is not X.Y",
                hint="e.g. --gpu 9.0, --gpu sm_90 or --gpu H100",
            )
    if python is not None and Version(python) < Version(OLDEST_PYTHON):
        raise NoResolution(
            f"nothing fits: Python {python} is older than {OLDEST_PYTHON}, the oldest "
            f"Python envlock's smoke harness runs on (every bundle runs it to prove the GPU "
            f"works)",
            hint=f"--python {OLDEST_PYTHON} or newer, or drop --python",
        )
    return Checked(
        spec=spec,
        python=python,
        cuda=cuda,
        cudnn=cudnn,
        driver=Version(driver) if driver else None,
        os=os,
        source=source,
        gpus=named_gpus(tuple(c.gpus), gpu_matrix),
    )
