"""One cell of a CI matrix, as data: the cell, its JSON row and an expansion's result.

``envlock.ci.cells`` expands TensorFlow ranges into them and
``envlock.ci.buildcells`` torch and JAX ranges; both build these.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from envlock.model import Constraints, Resolution

ALL = "all"


class _CellFields(TypedDict):
    id: str
    spec: str
    version: str
    python: str
    cuda: str
    cudnn: str
    cuda_source: str
    base_image: str
    image_tag: str


class CellDict(_CellFields, total=False):
    """One cell as JSON (a row of the GitHub matrix, of cells.json, of ``ci matrix``);
    ``build`` and ``index`` on torch/JAX cells only (the base class, not NotRequired:
    the typing of Python 3.10, which envlock runs on, has none)."""

    build: str  # torch/JAX cells: "cu130", "cuda13"
    index: str  # torch/JAX cells: "default" | "pytorch"


@dataclass(frozen=True)
class Cell:
    """One release x Python x CUDA source, as ``envlock lock`` resolves it."""

    id: str
    spec: str  # "tensorflow==2.15.1"
    resolution: Resolution
    image_tag: str  # "REPO:<id>"
    # what the cell asked resolve for: the Python and CUDA source only where the
    # command line listed them (resolve's defaults are left to resolve, so the
    # cell's lock is `envlock lock <spec> -o D` and checks as current)
    constraints: Constraints | None = None
    build: str = ""  # torch/JAX: the CUDA build ("cu128", "cuda13"); "" for TensorFlow
    index: str = ""  # torch/JAX: "default" or "pytorch" (PyTorch's own index)

    @property
    def asked(self) -> Constraints:
        return self.constraints if self.constraints is not None else Constraints(spec=self.spec)

    @property
    def version(self) -> str:
        return self.resolution.version

    @property
    def python(self) -> str:
        return self.resolution.python

    @property
    def cuda_source(self) -> str:
        return self.resolution.cuda_source

    @property
    def base_image(self) -> str:
        r = self.resolution
        return r.base_image + (f"@{r.base_image_digest}" if r.base_image_digest else "")

    def to_dict(self) -> CellDict:
        r = self.resolution
        out: CellDict = {
            "id": self.id,
            "spec": self.spec,
            "version": r.version,
            "python": r.python,
            "cuda": r.cuda,
            "cudnn": r.cudnn,
            "cuda_source": r.cuda_source,
            "base_image": self.base_image,
            "image_tag": self.image_tag,
        }
        if self.build:
            out["build"] = self.build
            out["index"] = self.index
        return out


@dataclass(frozen=True)
class Expansion:
    """The cells, and the notes on what ``--python all`` left out (and why)."""

    cells: tuple[Cell, ...]
    notes: tuple[str, ...] = ()


def cell_id_of_build(project: str, version: str, python: str, build: str) -> str:
    """``torch2.11.0-py3.12-cu130``, ``jax0.11.2-py3.12-cuda13``."""
    return f"{project}{version}-py{python}-{build}"
