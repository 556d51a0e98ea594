"""The build facts TensorFlow's C headers state, read as text (never compiled).

A CUDA build of TensorFlow ships, below its package folder:

- ``include/third_party/gpus/cuda/cuda_config.h``: ``TF_CUDA_VERSION "12.5.1"``,
  ``TF_CUDNN_VERSION "9"`` (the major only) and
  ``TF_CUDA_COMPUTE_CAPABILITIES 60, 70, 80, 89, 90`` (numbers, without saying which
  are compiled kernels and which PTX);
- ``include/external/cuda_cudnn/include/cudnn_version.h``: the cuDNN it was
  built against, ``CUDNN_MAJOR``/``CUDNN_MINOR``/``CUDNN_PATCHLEVEL``.

From 2.22.0rc0 on, ``build_info.py`` holds only ``is_cuda_build`` and its
siblings, so these headers are the wheel's only word on CUDA, cuDNN and
capabilities. Where the header gives bare numbers, the ``sm_``/``compute_``
split is inferred: every entry a compiled kernel but the last, which is PTX
(what every release whose build_info states the split did, 2.3 to 2.21;
``tests/test_matrix_headers.py`` checks it over the shipped matrix).

The same reading, in the standard library only, is in the smoke harness and
doctor's probe (they run inside images without envlock).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from envlock.errors import DataError

_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)(?:[ \t]+(.*?))?[ \t]*$", re.MULTILINE)
_CAPABILITY = re.compile(r"^(?:(sm|compute)_)?([0-9]+)(?:\.([0-9]))?([a-z]?)$")

# where the split of a header's capability list came from
SPLIT_STATED = "cuda_config.h"
SPLIT_INFERRED = "cuda_config.h+inferred-ptx"


@dataclass(frozen=True)
class HeaderFacts:
    """What the two headers say; "" / () where a header or a define is absent."""

    cuda_version: str = ""  # TF_CUDA_VERSION: "12.5.1"
    cudnn_major: str = ""  # TF_CUDNN_VERSION: "9"
    capabilities: tuple[str, ...] = ()  # TF_CUDA_COMPUTE_CAPABILITIES as written: "60", ...
    cudnn_version: str = ""  # CUDNN_MAJOR.CUDNN_MINOR.CUDNN_PATCHLEVEL: "9.10.0"
    cuda_config_path: str = ""
    cudnn_version_path: str = ""


def defines(text: str) -> dict[str, str]:
    """``#define NAME VALUE`` lines (the first of each name), comments cut off."""
    out: dict[str, str] = {}
    for name, value in _DEFINE.findall(text):
        value = value.split("//")[0].split("/*")[0].strip()
        out.setdefault(name, value)
    return out


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1].strip()
    return value


def read(
    cuda_config: tuple[str, bytes] | None, cudnn_version: tuple[str, bytes] | None, where: str
) -> HeaderFacts:
    """The facts of the two headers, each given as (member path, bytes)."""
    cuda = cudnn_major = cudnn = ""
    caps: tuple[str, ...] = ()
    config_path = version_path = ""
    if cuda_config is not None:
        config_path, data = cuda_config
        d = defines(data.decode("utf-8", errors="replace"))
        cuda = _unquote(d.get("TF_CUDA_VERSION", ""))
        cudnn_major = _unquote(d.get("TF_CUDNN_VERSION", ""))
        raw = d.get("TF_CUDA_COMPUTE_CAPABILITIES", "")
        caps = tuple(t for t in (_unquote(p) for p in raw.split(",")) if t)
        for value, what in ((cuda, "TF_CUDA_VERSION"), (cudnn_major, "TF_CUDNN_VERSION")):
            if value and not re.fullmatch(r"[0-9]+(\.[0-9]+){0,2}", value):
                raise DataError(f"{where}:{config_path}: {what} {value!r} is not a version")
        for token in caps:
            if _CAPABILITY.match(token) is None:
                raise DataError(
                    f"{where}:{config_path}: TF_CUDA_COMPUTE_CAPABILITIES entry {token!r} "
                    "is not a compute capability"
                )
    if cudnn_version is not None:
        version_path, data = cudnn_version
        d = defines(data.decode("utf-8", errors="replace"))
        parts = [d.get(k, "") for k in ("CUDNN_MAJOR", "CUDNN_MINOR", "CUDNN_PATCHLEVEL")]
        if any(parts):
            if not all(p.isdigit() for p in parts):
                raise DataError(
                    f"{where}:{version_path}: CUDNN_MAJOR/MINOR/PATCHLEVEL are not numbers: "
                    f"{', '.join(repr(p) for p in parts)}"
                )
            cudnn = ".".join(parts)
    return HeaderFacts(
        cuda_version=cuda,
        cudnn_major=cudnn_major,
        capabilities=caps,
        cudnn_version=cudnn,
        cuda_config_path=config_path,
        cudnn_version_path=version_path,
    )


def capability_number(token: str) -> int | None:
    """``"60"``, ``"6.0"``, ``"sm_60"``, ``"compute_90"``, ``"sm_90a"`` -> 60 / 90."""
    m = _CAPABILITY.match(token)
    if m is None:
        return None
    major, minor = m.group(2), m.group(3)
    return int(major) * 10 + int(minor) if minor is not None else int(major)


def split(capabilities: tuple[str, ...]) -> tuple[tuple[str, ...], str]:
    """The capability names (``sm_60`` ... ``compute_90``) and where their split came
    from: as the header states it when every entry is prefixed, else inferred (every
    entry compiled but the last, which is PTX)."""
    if not capabilities:
        return (), SPLIT_STATED
    if all(t.startswith(("sm_", "compute_")) for t in capabilities):
        return capabilities, SPLIT_STATED
    numbers = [capability_number(t) for t in capabilities]
    if any(t.startswith(("sm_", "compute_")) for t in capabilities) or None in numbers:
        raise DataError(
            f"TF_CUDA_COMPUTE_CAPABILITIES mixes named and bare entries: {', '.join(capabilities)}"
        )
    names = [f"sm_{n}" for n in numbers[:-1]] + [f"compute_{numbers[-1]}"]
    return tuple(names), SPLIT_INFERRED


def numbers(capabilities: tuple[str, ...]) -> list[int]:
    """The capability numbers of a list, sorted, each once (for comparing two lists)."""
    return sorted({n for n in (capability_number(t) for t in capabilities) if n is not None})
