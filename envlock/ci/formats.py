"""The cells as ``ci matrix`` prints them: a GitHub Actions matrix, a bake file, a list.

``github``: ``{"include": [cell, ...]}`` on one line, for ``strategy.matrix``
through ``fromJSON``. ``bake``: a docker-bake.json document for the folder
holding the cells' bundles (``cd DIR && docker buildx bake``): the group
``default`` naming every target, one target per cell (named by
``cells.bake_target``), its context the cell's folder ``<cell-id>`` relative to
the bake file, dockerfile ``Dockerfile``, the cell's image tag, labels (the
cell and, once the cell is locked, ``io.envlock.lock.digest``, the sha256 of
its pylock.toml, the same label the Dockerfile sets), the ``BASE_IMAGE``
build argument, the GitHub Actions cache (``type=gha``, a scope per cell) and
an output. ``json``: the plain list of cells.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import TypedDict

from envlock.ci.cells import Cell, CellDict, bake_target
from envlock.errors import UsageError

FORMATS = ("github", "bake", "json")


def github_matrix(cells: Sequence[Cell]) -> str:
    """One line of JSON for ``strategy.matrix: ${{ fromJSON(...) }}``."""
    return json.dumps({"include": [c.to_dict() for c in cells]}, separators=(",", ":"))


def cell_labels(cell: Cell, lock_digest: str | None = None) -> dict[str, str]:
    r = cell.resolution
    labels = {
        "io.envlock.cell": cell.id,
        "io.envlock.framework": r.framework,
        "io.envlock.framework.version": r.version,
        "io.envlock.python": r.python,
        "io.envlock.cuda": r.cuda,
        "io.envlock.cudnn": r.cudnn,
        "io.envlock.cuda-source": r.cuda_source,
    }
    if lock_digest:
        labels["io.envlock.lock.digest"] = lock_digest
    return labels


# bake interpolates ${...} and %{...} in every string of the file (HCL templates,
# JSON files too): envlock writes none, it refuses a value that holds one
_TEMPLATE = re.compile(r"[$%]\{")
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


def _plain(value: str, where: str, *, name: bool = False) -> str:
    """A value written into the bake file: no control or bidi characters, no
    ``${``/``%{`` (bake would interpolate it), and for a path or a name the
    plain shape of one (letters, digits, ``_ . -``)."""
    from envlock.door import bad_character

    bad = bad_character(value)
    if bad:
        raise UsageError(f"bake file: {where} holds the control character {bad}", hint=_BAKE_HINT)
    if _TEMPLATE.search(value):
        raise UsageError(
            f"bake file: {where} {value!r} holds '${{' or '%{{', which buildx bake would "
            "interpolate",
            hint=_BAKE_HINT,
        )
    if name and (not _PLAIN_NAME.fullmatch(value) or value in (".", "..")):
        raise UsageError(
            f"bake file: {where} {value!r} is not a plain folder or file name", hint=_BAKE_HINT
        )
    return value


_BAKE_HINT = "give plain names and image references (letters, digits, '_', '.', '-', '/', ':')"


# one target of docker-bake.json (keys with "-": the functional form)
BakeTarget = TypedDict(
    "BakeTarget",
    {
        "context": str,
        "dockerfile": str,
        "tags": list[str],
        "labels": dict[str, str],
        "args": dict[str, str],
        "cache-from": list[str],
        "cache-to": list[str],
        "output": list[str],
    },
)


class BakeFile(TypedDict):
    group: dict[str, dict[str, list[str]]]  # {"default": {"targets": [...]}}
    target: dict[str, BakeTarget]


def bake_file(cells: Sequence[Cell], digests: Mapping[str, str] | None = None) -> BakeFile:
    """The docker-bake.json document for the folder that holds the cells' bundles.

    Contexts are the cells' folder names, relative to the bake file's own folder:
    run it there (``cd DIR && docker buildx bake``), from wherever the folder
    was made. Each target caches through the GitHub Actions cache, one scope per
    cell; its output pushes (``type=registry``) when the cells' repository names
    a registry host (``--repo``), else loads the image into the local engine
    (``type=docker``) under the local name ``envlock-ci:<cell-id>``: no
    namespace on any registry is assumed. ``digests``: lock digest
    ("sha256:...") by cell id. Every value is checked (``_plain``).
    """
    from envlock.image import ref as imageref

    digests = digests or {}
    targets: dict[str, BakeTarget] = {}
    for cell in cells:
        target = bake_target(cell.id)
        _plain(cell.id, f"target {target}: context", name=True)
        tag = imageref.parse(_plain(cell.image_tag, f"target {target}: tag"), "--repo")
        base = _plain(cell.base_image, f"target {target}: args.BASE_IMAGE")
        imageref.parse(base, "BASE_IMAGE")
        labels = {
            k: _plain(v, f"target {target}: labels.{k}")
            for k, v in cell_labels(cell, digests.get(cell.id)).items()
        }
        output = "type=registry" if tag.registry is not None else "type=docker"
        targets[target] = {
            "context": cell.id,
            "dockerfile": "Dockerfile",
            "tags": [str(tag)],
            "labels": labels,
            "args": {"BASE_IMAGE": base},
            "cache-from": [f"type=gha,scope={target}"],
            "cache-to": [f"type=gha,scope={target},mode=max"],
            "output": [output],
        }
    return {"group": {"default": {"targets": list(targets)}}, "target": targets}


class LockedCellDict(CellDict):
    lock_digest: str  # "sha256:<hex of pylock.toml>"


def cell_list(cells: Sequence[Cell], digests: Mapping[str, str] | None = None) -> list[CellDict]:
    out: list[CellDict] = []
    for cell in cells:
        row = cell.to_dict()
        if digests and cell.id in digests:
            locked: LockedCellDict = {**row, "lock_digest": digests[cell.id]}
            row = locked
        out.append(row)
    return out
