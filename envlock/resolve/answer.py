"""``envlock resolve SPEC [SPEC ...]`` as one call: ``answer(constraints, more)``.

Resolves (several SPECs: one answer for one environment), judges each execution
path when GPUs are named, and returns an ``Answer``: ``to_dict()`` is
``resolve --json`` (the Resolution's own document, plus paths and driver_in_image
with --gpu), ``text()`` the readable summary, ``failure`` the exit 1 raised after
printing when the named GPUs can run none of it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from envlock.errors import EnvlockError
from envlock.model import Constraints, Resolution
from envlock.output import bullets, table
from envlock.resolve import load_matrix, resolve

if TYPE_CHECKING:  # the verdicts are only computed for --gpu: kept off the start-up path
    from envlock.resolve.paths import GpuPaths


def image_floor(res: Resolution, constraints: Constraints, matrix: Any) -> str:
    """The driver the base image itself asks of the named GPUs, when above the host
    venv's floor ("" otherwise): the container runtime refuses a driver that does
    not support the image's CUDA unless NVIDIA_REQUIRE_CUDA excepts the GPU's brand
    on its branch (the images from 12.6 on except no GeForce branch)."""
    from packaging.version import Version

    from envlock.matrix.require import MARKET_BRANDS
    from envlock.resolve.constraints import check
    from envlock.resolve.floors import image_require, toolkit_driver_for

    if matrix is None or matrix.cuda is None or not constraints.gpus:
        return ""
    image = next((i for i in matrix.cuda.images if i.version == res.cuda_image_version), None)
    if image is None:
        return ""
    require, recorded = image_require(image)
    need = toolkit_driver_for(matrix.cuda, require.cuda)
    if need is None or Version(need) <= Version(res.driver_min):
        return ""
    checked = check(constraints, matrix.cuda, gpu_matrix=matrix.gpus)
    bare = [  # GPUs no excepted branch lets start on an older driver
        g
        for g in checked.gpus
        if not (g.market in MARKET_BRANDS and require.branches(MARKET_BRANDS[g.market]))
    ]
    if not bare:
        return ""  # an excepted branch may start it: the why lines say which
    names = ", ".join(g.name or f"compute capability {g.compute_capability}" for g in bare)
    kinds = sorted({MARKETS.get(g.market or "", "this kind of GPU") for g in bare})
    said = "" if recorded else ", not recorded in matrices/cuda.toml: assumed alone"
    return (
        f">= {need} in the image for {names} (its NVIDIA_REQUIRE_CUDA asks for CUDA "
        f"{require.cuda}{said}; no exception for {' or '.join(kinds)})"
    )


MARKETS = {
    "geforce": "GeForce",
    "datacenter": "data-center GPUs",
    "workstation": "workstation GPUs",
}


def _build_of(res: Resolution) -> str:
    """torch and JAX have several CUDA builds per release: which one, " (cu130 build)"."""
    major_minor = res.cuda.replace(".", "")
    if res.framework == "torch" and "+" not in res.version:
        return f"  (the cu{major_minor} build)"
    if res.framework == "jax":
        return f"  (jax[cuda{res.cuda.split('.')[0]}])"
    return ""


def summary(res: Resolution, paths: Sequence[GpuPaths] = (), in_image: str = "") -> str:
    """The readable form: one fact per line, then why, then warnings."""
    driver = f">= {res.driver_min}" + (f" on a host venv; {in_image}" if in_image else "")
    rows = [
        ("release", f"{res.framework} {res.version}{_build_of(res)}"),
        ("python", f"{res.python}  (wheels for {', '.join(res.python_supported)})"),
        ("cuda", f"{res.cuda}  (cuDNN {res.cudnn})"),
        ("driver", driver),
        ("cuda source", res.cuda_source),
        (
            "base image",
            res.base_image + (f"@{res.base_image_digest}" if res.base_image_digest else ""),
        ),
        (
            "image cuda",
            res.cuda_image_version + (f"  (cuDNN {res.image_cudnn})" if res.image_cudnn else ""),
        ),
        ("os", res.os + (f"  (python3 {res.os_python})" if res.os_python else "")),
        ("matrix", f"{res.matrix_version}  (sha256 {res.matrix_digest[:12]})"),
    ]
    lines = [table(None, rows).rstrip()]
    for gpu_paths in paths:
        lines += [
            "",
            f"paths on {gpu_paths.gpu} (compute capability {gpu_paths.compute_capability}):",
        ]
        for p in gpu_paths.paths:
            lines.append(bullets(f"  {p.path:<8} {p.status:<7} ", [p.why]).rstrip())
            if p.fix:
                label = "steps:" if p.manual else "fix:"
                lines.append(bullets(f"  {'':<8} {label:<7} ", [p.fix]).rstrip())
    if res.reasons:
        lines += ["", "why:", bullets("  - ", res.reasons).rstrip()]
    if res.warnings:
        lines += ["", "warnings:", bullets("  ! ", res.warnings).rstrip()]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Answer:
    """What ``envlock resolve`` prints."""

    resolution: Resolution
    constraints: Constraints
    paths: list[GpuPaths] = field(default_factory=list)
    also: list[tuple[Resolution, list[GpuPaths]]] = field(default_factory=list)
    in_image: str = ""
    failure: EnvlockError | None = None

    def to_dict(self) -> dict[str, Any]:
        doc = self.resolution.to_dict()
        if self.constraints.gpus:
            doc["paths"] = [p.to_dict() for p in self.paths]
            doc["driver_in_image"] = self.in_image or None
            for entry, (_other, other_paths) in zip(
                doc.get("together", []), self.also, strict=True
            ):
                entry["paths"] = [p.to_dict() for p in other_paths]
        return doc

    def text(self) -> str:
        res = self.resolution
        text = summary(res, self.paths, self.in_image)
        for other in res.together:
            other_paths = next((p for o, p in self.also if o is other), [])
            text += f"\nwith {other.framework} {other.version} in the same environment:\n"
            text += summary(other, other_paths)
        return text


def answer(constraints: Constraints, more: Sequence[str] = ()) -> Answer:
    matrix = load_matrix() if constraints.gpus else None
    from envlock.resolve.together import spec_of

    if more:
        from envlock.resolve.together import resolve_together

        res = resolve_together(constraints, [constraints.spec, *more], lambda c: resolve(c, matrix))
        constraints = replace(constraints, spec=spec_of(res), cuda_source="pip")
    else:
        res = resolve(constraints, matrix)
    paths: list[GpuPaths] = []
    also: list[tuple[Resolution, list[GpuPaths]]] = []
    if matrix is not None:
        from envlock.resolve.paths import for_resolution

        paths = list(for_resolution(res, constraints, matrix))
        also = [
            (other, list(for_resolution(other, replace(constraints, spec=spec_of(other)), matrix)))
            for other in res.together
        ]
    in_image = image_floor(res, constraints, matrix)
    from envlock.resolve.chooser import runs_nowhere

    failure = runs_nowhere(res, constraints, paths, matrix, resolve) if matrix is not None else None
    return Answer(res, constraints, paths, also, in_image, failure)
