"""Plain, frozen data passed between the stages.

Each stage takes and returns these; ``to_dict``/``from_dict`` give the JSON
shape (the ``--json`` output and the ``[tool.envlock]`` table of pylock.toml).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

CUDA_SOURCES = ("system", "pip")

# The oldest CPython the smoke harness (envlock/smoke/harness.py) runs on; its
# tests run under it. Resolve and lock refuse an older Python: a bundle whose
# harness cannot run proves nothing.
OLDEST_PYTHON = "3.8"


@dataclass(frozen=True)
class Resolution:
    """What goes together for one framework release on one target."""

    framework: str  # "tensorflow"
    version: str  # exact release, "2.15.1"
    python: str  # chosen CPython minor, "3.11"
    python_supported: tuple[str, ...]  # minors with Linux x86_64 wheels
    cuda: str  # CUDA the release was built with, "12.2"
    cudnn: str  # cuDNN major.minor it was built with, "8.9"
    driver_min: str  # minimum Linux driver, "525.60.13"
    compute_capabilities: tuple[str, ...]  # as compiled: "sm_60", ..., "compute_80"
    cuda_source: str  # "system" (CUDA from the base image) | "pip" (nvidia-* wheels)
    os: str  # base image OS, "ubuntu22.04"
    base_image: str  # full reference, "nvidia/cuda:12.2.2-cudnn8-runtime-ubuntu22.04"
    base_image_digest: str | None  # "sha256:..." when known
    cuda_image_version: str  # CUDA of the base image tag, "12.2.2"
    image_cudnn: str | None  # exact cuDNN inside the base image, "8.9.6.50", if known
    and_cuda: tuple[str, ...]  # the and-cuda extra's requirements, as written
    requires_python: str  # the wheel's Requires-Python
    matrix_version: str  # tensorflow.toml data_version
    matrix_digest: str  # sha256 of tensorflow.toml
    warnings: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()  # why this release / python / image was chosen
    os_python: str | None = None  # python3 minor of the base image's OS, "3.10"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Resolution:
        kwargs: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in data:
                continue
            value = data[f.name]
            kwargs[f.name] = tuple(value) if isinstance(value, list) else value
        return cls(**kwargs)


@dataclass(frozen=True)
class LockedWheel:
    """One wheel file of a locked package: where it is and its hash."""

    filename: str
    url: str
    size: int
    sha256: str


@dataclass(frozen=True)
class LockedPackage:
    """One package of the locked closure, with its wheels for the target."""

    name: str  # normalized (PEP 503)
    version: str
    wheels: tuple[LockedWheel, ...]  # the wheels valid for the target; usually one
    # the locked packages this one requires (normalized names, sorted): the lock's
    # dependency graph, recorded as PEP 751 ``dependencies``; () when unknown
    dependencies: tuple[str, ...] = ()


@dataclass(frozen=True)
class LockInput:
    """What the user asked for, recorded so the lock can be recomputed."""

    spec: str  # "tensorflow==2.15"
    with_requirements: tuple[str, ...] = ()  # --with and -r lines, in order
    python: str | None = None
    cuda: str | None = None
    cudnn: str | None = None
    driver: str | None = None
    os: str | None = None
    cuda_source: str = "system"
    index_url: str | None = None  # only when given on the command line
    # --exclude-newer as an RFC 3339 UTC instant ("2024-03-10T00:00:00Z"): files
    # uploaded at or after it were not considered
    exclude_newer: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LockInput:
        kwargs = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        if "with_requirements" in kwargs:
            kwargs["with_requirements"] = tuple(kwargs["with_requirements"])
        return cls(**kwargs)


@dataclass(frozen=True)
class Lock:
    """A whole locked closure for one target, plus how it was made."""

    resolution: Resolution
    input: LockInput
    packages: tuple[LockedPackage, ...]  # sorted by name
    resolver: str  # "uv" | "pip"
    resolver_version: str
    top_requirements: tuple[str, ...] = field(default=())  # what was given to the resolver
