"""Requirement files that are a ``pip freeze`` of a working environment.

A freeze names the framework itself and, in a venv made with
``tensorflow[and-cuda]``, the nvidia-* CUDA wheels. envlock takes both from
the resolution instead:

- a line naming the framework (``tensorflow``, ``tensorflow[and-cuda]``, or one
  of its other distributions: ``tensorflow-cpu``, ``tensorflow-gpu``,
  ``tensorflow-intel``, ``tensorflow-macos``) must allow the resolved release;
  it is then dropped (the SPEC states the release), else the conflict is named
  (exit 2);
- a line naming an nvidia CUDA wheel (``nvidia-*-cu11``/``-cu12``/... and the
  other ``nvidia-*`` runtime wheels the and-cuda extras pull in) is dropped: the
  lock's CUDA source decides them (``system``: none, the base image carries
  CUDA; ``pip``: the release's own and-cuda pins).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from envlock.errors import UsageError

# the framework's other distributions on the index (same version numbers)
_ALIASES = {
    "tensorflow": ("tensorflow-cpu", "tensorflow-gpu", "tensorflow-intel", "tensorflow-macos"),
}
# nvidia CUDA wheels: nvidia-cublas-cu12, nvidia-cudnn-cu11, nvidia-nccl-cu12, nvidia-nvjitlink-cu12
_NVIDIA_CUDA = re.compile(r"^nvidia-[a-z0-9-]+-cu\d+$")


@dataclass(frozen=True)
class FrozenLines:
    """The lines of a requirement file that the lock pins, and what was dropped and why."""

    kept: tuple[str, ...]
    notes: tuple[str, ...]


def framework_names(framework: str) -> frozenset[str]:
    fw = canonicalize_name(framework)
    return frozenset((fw, *_ALIASES.get(fw, ())))


def is_cuda_wheel(name: str) -> bool:
    return bool(_NVIDIA_CUDA.match(canonicalize_name(name)))


def split_frozen(
    lines: Sequence[str], *, framework: str, version: str, cuda_source: str, origin: str
) -> FrozenLines:
    """``lines`` (valid requirements) without those the resolution decides.

    Raises UsageError (exit 2) when a framework line excludes the resolved release.
    """
    names = framework_names(framework)
    kept: list[str] = []
    notes: list[str] = []
    cuda: list[str] = []
    for line in lines:
        req = Requirement(line)
        name = canonicalize_name(req.name)
        if name in names:
            if not req.specifier.contains(Version(version), prereleases=True):
                raise UsageError(
                    f"{origin}: {line!r} conflicts with SPEC, which resolved to "
                    f"{canonicalize_name(framework)} {version}",
                    hint=f"make them agree: lock '{canonicalize_name(framework)}"
                    f"{req.specifier}' or drop the {req.name} line from the file",
                )
            notes.append(
                f"{origin}: {line} agrees with SPEC ({framework} {version}); "
                "the release comes from SPEC"
            )
            continue
        if is_cuda_wheel(name):
            cuda.append(name)
            continue
        kept.append(line)
    if cuda:
        decides = "the release's and-cuda pins" if cuda_source == "pip" else "the base image's CUDA"
        notes.append(
            f"{origin}: {len(cuda)} nvidia CUDA wheel(s) left out ({', '.join(cuda)}): "
            f"CUDA source {cuda_source} decides them ({decides})"
        )
    return FrozenLines(tuple(kept), tuple(notes))
