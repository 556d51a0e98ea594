"""The types the execution paths are judged with (``envlock.resolve.paths``): the
build, the tools the environment gives it, one path's verdict, and the lock fix
they name. Their own module so that paths.py and cudnn_path.py share them."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TypedDict


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


# --------------------------------------------------------------- the callers' facts
